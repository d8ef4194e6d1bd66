"""The driver's read of one HTTP read's SSE events: the hot text events on a fast path.

A mixin of :class:`~.machine.A2aDriver` (``machine.py`` has the rules).  One
read's payloads are decoded in one call (``frames_hot`` views for v1.0, the full
Structs for the draft), and an event that is text appended to a known artifact
(D2) or one agent text chunk in a WORKING status (D1) is mapped right here with
the driver's books; every other event is decoded in full and goes through the
general rules (:meth:`A2aDriver._one`).

Consecutive text of one artifact, or of agent status messages, taken in one read
becomes one ``cap.text_chunk`` (text boundaries carry no meaning, as stream-json's
R2; a status run keeps its first message's id).  Apart from that the fast path
gives exactly what the general rules give: ``tests/driver_a2a/test_hot_path.py``
checks it on the shared corpus and on generated streams, both spellings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.frames_hot import decode_hot_batch
from trio_cap.actors.bindings.a2a.machine_io import CANCEL, ArtifactState, Exchange
from trio_cap.actors.bindings.base import Output
from trio_cap.events.kinds import TextChunk

_WORKING = "TASK_STATE_WORKING"
_AGENT = f.v1.ROLE_AGENT


class HotPath:
    live: dict[int, Exchange]
    artifacts: dict[str, ArtifactState]
    seen: set[str]
    task_id: str | None
    context_id: str | None
    state: str | None
    turn_text: list[str]
    fast: bool
    """False: every event through the general rules (the reference the fast path is checked
    against)."""

    def _events(self, rid: int, datas: Sequence[bytes]) -> list[Output]:
        ex = self.live.get(rid)
        if ex is None:
            return []
        out: list[Output] = []
        views = decode_hot_batch(datas) if self.fast and ex.spelling == f.CURRENT else None
        if views is None:
            for data, env in zip(datas, f.decode_stream_batch(ex.spelling, datas), strict=True):
                if rid not in self.live:
                    break  # the turn ended (or the exchange was closed) earlier in this read
                self._one(rid, ex, data, env, out)  # type: ignore[attr-defined]
        else:
            self._hot(rid, ex, datas, views, out)
        if self.cancel_wanted and self.task_id is not None and self.turn_open:  # type: ignore[attr-defined]
            self.cancel_wanted = False  # H4: the cancel held until the task id was known
            if self.state is None or f.state_class(self.state) == "active":
                out.append(self._task_request(CANCEL))  # type: ignore[attr-defined]
        return out

    def _hot(self, rid: int, ex: Exchange, datas: Sequence[bytes], views: list[Any],
             out: list[Output]) -> None:
        live = self.live
        arts = self.artifacts
        seen = self.seen
        task = self.task_id
        ctx = self.context_id
        run_id: str | None = None  # the text run being gathered: its CAP message id,
        run: list[str] = []  # its pieces,
        run_art: ArtifactState | None = None  # and its artifact (None: agent status messages)
        got = False
        for i, env in enumerate(views):
            result = env.result
            if result is not None and env.id == rid and env.error is None:
                au = result.artifact_update
                if au is not None:
                    parts = au.artifact.parts
                    if au.append and not au.last_chunk and au.task_id == task \
                            and (au.context_id == ctx or not au.context_id) \
                            and len(parts) == 1 and (text := parts[0].text):
                        aid = au.artifact.artifact_id
                        if run_art is not None and aid == run_id:
                            run.append(text)
                            continue
                        st = arts.get(aid)
                        if st is not None and st.call_id is None and not st.cap \
                                and not st.quiet:
                            if run:
                                self._flush(run_id, run, run_art, out)  # type: ignore[arg-type]
                            st.closed = False
                            run_id, run, run_art = aid, [text], st
                            got = True
                            continue
                elif (u := result.status_update) is not None and u.task_id == task \
                        and (u.context_id == ctx or not u.context_id):
                    msg = u.status.message
                    if u.status.state == _WORKING and msg is not None and msg.role == _AGENT \
                            and len(msg.parts) == 1 and (text := msg.parts[0].text) \
                            and msg.message_id not in seen:
                        seen.add(msg.message_id)
                        self.state = "working"
                        if run_art is None and run:
                            run.append(text)
                        else:
                            if run:
                                self._flush(run_id, run, run_art, out)  # type: ignore[arg-type]
                            run_id, run, run_art = msg.message_id, [text], None
                        got = True
                        continue
            if run:
                self._flush(run_id, run, run_art, out)  # type: ignore[arg-type]
                run_id, run, run_art = None, [], None
            data = datas[i]
            env = f.decode_stream_batch(ex.spelling, [data])[0]
            self._one(rid, ex, data, env, out)  # type: ignore[attr-defined]
            if rid not in live:
                break  # the turn ended (or the exchange was closed): the rest is not read
            task = self.task_id  # the general rules may have moved to a new task,
            ctx = self.context_id
            arts = self.artifacts  # whose books are a new dict
        if run:
            self._flush(run_id, run, run_art, out)  # type: ignore[arg-type]
        if got:
            ex.got_event = True

    def _flush(self, mid: str, run: list[str], st: ArtifactState | None,
               out: list[Output]) -> None:
        text = run[0] if len(run) == 1 else "".join(run)
        if st is not None:
            st.count += len(run)
            st.text_bytes += len(text.encode())
        else:
            self.turn_text.append(text)
        out.append(TextChunk(message_id=mid, text=text))
