"""Transcript diffs, the transcript document and fragments: the CAP extensions' bookkeeping.

The agent's event log *is* its transcript.  Every envelope the agent appends
is also queued here and goes out in a ``system/cap.transcript_diff`` frame
while a turn runs — every ``every`` events, on the shell's timer, and once
before each ``result`` — so a client that only applies diffs holds an exact
copy of the log.  Diffs are chained (``index`` + 1, ``prev_seq`` = previous
``to_seq``, seqs contiguous) so a lost diff is visible in the very next one,
and each ``result`` names the last seq sent (``_meta["cap.transcript_seq"]``),
so a diff lost at the end of a turn is too.  Nothing follows a session's last
``result``: the copy is complete when stdout ends right after a result that
confirmed it (or after a diff marked ``final``).

SDK clients cap a line at 1 MiB; an extension frame longer than ``max_line``
is cut into ``system/cap.fragment`` frames whose ``data`` joined in order is
the original line.  Standard frames are never fragmented.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from trio_cap.actors.bindings.stream_json import frames as f
from trio_cap.events.envelope import Envelope

TRANSCRIPT_MIME = "application/vnd.cap.coding.transcript.v1+json"


class TranscriptDiffs:
    def __init__(self, every: int = 1000) -> None:
        self.every = every
        self._pending: list[Envelope] = []
        self._index = 0
        self.last_seq = 0
        """``to_seq`` of the last diff taken (0 before the first)."""

    def add(self, envs: Sequence[Envelope]) -> None:
        self._pending.extend(envs)

    @property
    def due(self) -> bool:
        return self.every > 0 and len(self._pending) >= self.every

    def take(self, *, final: bool = False) -> f.TranscriptDiff | None:
        """The pending envelopes as the next diff; None when there are none, except that a
        ``final`` diff is always taken (empty if need be) so the chain is visibly closed."""
        if not self._pending and not final:
            return None
        envs, self._pending = self._pending, []
        self._index += 1
        to_seq = envs[-1].seq if envs else self.last_seq
        diff = f.TranscriptDiff(index=self._index, prev_seq=self.last_seq,
                                from_seq=envs[0].seq if envs else to_seq + 1, to_seq=to_seq,
                                events=envs, final=final)
        self.last_seq = to_seq
        return diff


class Transcript(msgspec.Struct, kw_only=True):
    """Coding profile §6.6; ``events``: the log's envelopes ``[seq, at, stream, cause, event]``."""

    session_id: str
    agent: str
    model: str | None
    started_at: str | None
    ended_at: str | None
    events: Sequence[Envelope]


def transcript_document(session_id: str, model: str | None, envs: Sequence[Envelope]) -> str:
    return msgspec.json.encode(Transcript(
        session_id=session_id, agent="cap-agent", model=model,
        started_at=_iso(envs[0].at) if envs else None,
        ended_at=_iso(envs[-1].at) if envs else None,
        events=envs,
    )).decode()


def _iso(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).isoformat().replace("+00:00", "Z")


def extension_lines(frame: f.System, max_line: int, new_uuid: Callable[[], str]) -> list[bytes]:
    """``frame`` as one line, or as fragments when it is longer than ``max_line`` bytes."""
    line = f.encode_line(frame)
    if len(line) <= max_line:
        return [line]
    text = line[:-1].decode()
    # 4 bytes per character at worst once re-encoded (UTF-8), plus room for the wrapper
    step = max(1, (max_line - 512) // 4)
    pieces = [text[i : i + step] for i in range(0, len(text), step)]
    frame_uuid = frame.uuid or new_uuid()
    return [
        f.encode_line(f.System(subtype="cap.fragment", session_id=frame.session_id,
                               uuid=new_uuid(),
                               cap=f.Fragment(frame_uuid=frame_uuid, index=i, count=len(pieces),
                                              data=piece)))
        for i, piece in enumerate(pieces)
    ]


def join_fragments(parts: Sequence[dict[str, Any]]) -> bytes:
    """The original line from the ``cap`` payloads of its fragments (any order)."""
    ordered = sorted(parts, key=lambda p: p["index"])
    if [p["index"] for p in ordered] != list(range(ordered[0]["count"])):
        raise ValueError("missing fragments")
    return "".join(p["data"] for p in ordered).encode()


class TranscriptGap(Exception):
    """A transcript diff is missing: the copy can no longer equal the agent's log."""


class TranscriptMirror:
    """A client's exact copy of the agent's log, kept only from the frames it prints.

    ``feed`` takes every stdout frame (a dict) in order: it applies
    ``cap.transcript_diff`` payloads and checks each ``result``.  ``apply``
    raises :class:`TranscriptGap` when a diff was lost (a skipped index, a
    ``prev_seq`` that is not the last seq held, seqs that are not contiguous);
    ``check_result`` when a result names a seq the copy does not end at; and
    ``check_closed``, at the end of stdout, unless the copy was confirmed by the
    last result or closed by a ``final`` diff.
    """

    def __init__(self) -> None:
        self.envelopes: list[Envelope] = []
        self.index = 0
        self.last_seq = 0
        self.closed = False
        self.confirmed: int | None = None
        """The seq the last ``result`` said was sent (None before the first)."""

    def feed(self, frame: dict[str, Any]) -> None:
        if frame.get("type") == "system" and frame.get("subtype") == "cap.transcript_diff":
            self.apply(frame["cap"])
        elif frame.get("type") == "result":
            self.check_result(frame["_meta"]["cap.transcript_seq"])

    def apply(self, diff: dict[str, Any] | f.TranscriptDiff) -> None:
        d = diff if isinstance(diff, f.TranscriptDiff) else msgspec.convert(diff, f.TranscriptDiff)
        if d.index != self.index + 1 or d.prev_seq != self.last_seq:
            raise TranscriptGap(f"diff {d.index} follows seq {d.prev_seq}, but the copy holds "
                                f"diff {self.index} up to seq {self.last_seq}")
        envs = msgspec.convert(d.events, list[Envelope])
        seqs = [e.seq for e in envs]
        if seqs != list(range(d.from_seq, d.to_seq + 1)):
            raise TranscriptGap(f"diff {d.index} does not hold seqs {d.from_seq}..{d.to_seq}")
        if self.closed:
            raise TranscriptGap(f"diff {d.index} arrived after the final diff")
        self.envelopes += envs
        self.index, self.last_seq, self.closed = d.index, d.to_seq, d.final
        self.confirmed = None

    def check_result(self, transcript_seq: int) -> None:
        if transcript_seq != self.last_seq:
            raise TranscriptGap(f"the result says seq {transcript_seq} was sent; the copy "
                                f"holds up to {self.last_seq}")
        self.confirmed = transcript_seq

    def check_closed(self) -> None:
        if not self.closed and self.confirmed != self.last_seq:
            raise TranscriptGap(f"stdout ended after diff {self.index} (up to seq "
                                f"{self.last_seq}) with no result confirming it")
