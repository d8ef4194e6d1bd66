"""The driver's read of one HTTP read's SSE events: a turn's text taken by its byte shape.

A mixin of :class:`~.machine.A2aDriver` (``machine.py`` has the rules).  Every
event the general rules take (full decode, :meth:`A2aDriver._one`) that is
text appended to a known artifact (D2) or one agent text chunk in a WORKING
status (D1) teaches the driver its byte shape (``bindings.byte_shape``); the events
after it that have that shape, as a run of text events has, are matched with
bytes operations, their varying strings decoded in one call, and mapped here
with the driver's books.  What does not match goes through the general rules.

A shape is only used while the books are as they were when it was learnt
(same task and context, the artifact still plain text): then each matching
event means to the general rules what the one it was learnt from meant, with
its own text (and message id).  Consecutive matching events of one read become
one ``cap.text_chunk`` (text boundaries carry no meaning, as stream-json's R2;
a status run keeps its first new message's id).  Apart from that the fast path
gives exactly what the general rules give: ``tests/driver_a2a/test_hot_path.py``
checks it on the shared corpus and on generated streams, both spellings.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.machine_io import CANCEL, ArtifactState, Exchange
from trio_cap.actors.bindings.a2a.machine_parts import TEXT, is_agent, part_view
from trio_cap.actors.bindings.base import Output
from trio_cap.actors.bindings.byte_shape import Markers, Matcher, Shape, learn, pinnable
from trio_cap.events.kinds import TextChunk

_WORKING = "TASK_STATE_WORKING"
_ARTIFACT = ("text",)
_STATUS = ("timestamp", "messageId", "text")
_OPTIONAL = frozenset({"timestamp"})
_NONE: frozenset[str] = frozenset()
_PINNED_ARTIFACT = ("taskId", "contextId", "artifactId")
_PINNED_STATUS = ("taskId", "contextId")
_NUMBERS = ("id",)
"""Keys pinned in a learnt shape (byte_shape.learn): the turn's ids, so the shape serves
the next turns too; the JSON-RPC id is a number."""
_LEARNS = 8
"""Shapes learnt in one exchange that matched nothing before another was wanted: past
this the exchange's events all go the general way (a peer whose every event differs)."""


class _Learnt:
    """A shape and what it stands for: the exchange, task, context and artifact it was
    learnt in (artifact None: agent status messages), where its text and message id are."""

    __slots__ = ("aid", "ctx", "joined", "match", "mid_at", "rid", "shape", "task", "text_at",
                 "unread")

    def __init__(self, shape: Shape, rid: int, task: str, ctx: str, aid: str | None) -> None:
        self.shape = shape
        self.rid, self.task, self.ctx, self.aid = rid, task, ctx, aid
        self.text_at, self.mid_at, self.unread, self.joined = _holes(shape.names, aid is not None)
        self.match = Matcher(shape, self.unread, self.joined).sized


@functools.lru_cache(maxsize=64)
def _holes(names: tuple[str, ...], artifact: bool) -> tuple[int, int, tuple[int, ...], int]:
    """Where a shape's text and message id are; the holes only checked, their values
    unused (a status message's timestamp); the hole whose values are only wanted
    concatenated (an artifact's text), or -1.  Once per shape layout, not per turn."""
    text_at = names.index("text")
    return (text_at, -1 if artifact else names.index("messageId"),
            tuple(k for k, name in enumerate(names) if name == "timestamp"),
            text_at if artifact else -1)


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
    _learnt: _Learnt | None = None
    _learns: tuple[int, int] = (0, 0)
    _pinned: dict[bool, Shape]
    """The last shape learnt of each kind with its ids pinned (True: artifact text)."""
    """(exchange, shapes learnt there that matched nothing yet)."""

    def _events(self, rid: int, datas: Sequence[bytes]) -> list[Output]:
        ex = self.live.get(rid)
        if ex is None:
            return []
        out: list[Output] = []
        if self.fast and ex.spelling == f.CURRENT:
            self._hot(rid, ex, datas, out)
        else:
            for data, env in zip(datas, f.decode_stream_batch(ex.spelling, datas), strict=True):
                if rid not in self.live:
                    break  # the turn ended (or the exchange was closed) earlier in this read
                self._one(rid, ex, data, env, out)  # type: ignore[attr-defined]
        if self.cancel_wanted and self.task_id is not None and self.turn_open:  # type: ignore[attr-defined]
            self.cancel_wanted = False  # H4: the cancel held until the task id was known
            if self.state is None or f.state_class(self.state) == "active":
                out.append(self._task_request(CANCEL))  # type: ignore[attr-defined]
        return out

    def _hot(self, rid: int, ex: Exchange, datas: Sequence[bytes], out: list[Output]) -> None:
        i, n = 0, len(datas)
        live = self.live
        tail: TextChunk | None = None  # the read's last text of a hot event,
        tail_of: str | None = None  # and whose: its artifact (None: agent status messages)
        while i < n:
            learnt = self._learnt
            if learnt is not None and learnt.rid == rid and self._fits(learnt):
                j, values, text, size = learnt.match(datas, i)
                if values is None:
                    self._learnt = None  # a hole that is no string: those go the general way
                elif j > i:
                    joins = out and out[-1] is tail and tail_of == learnt.aid
                    tail = self._settle(learnt, values, text, size, j - i, out, joins) or tail
                    tail_of = learnt.aid
                    ex.got_event = True
                    self._learns = (rid, 0)
                    i = j
                    continue
            data = datas[i]
            env = f.decode_stream_batch(ex.spelling, [data])[0]
            self._one(rid, ex, data, env, out)  # type: ignore[attr-defined]
            if rid not in live:
                return  # the turn ended (or the exchange was closed): the rest is not read
            hot = self._learn_shape(rid, data, env)
            if hot is not None and out and type(out[-1]) is TextChunk \
                    and out[-1].message_id == hot[0]:
                tail, tail_of = out[-1], hot[1]
            i += 1

    def _fits(self, learnt: _Learnt) -> bool:
        """The books still as they were when the shape was learnt."""
        if learnt.task != self.task_id or (learnt.ctx and learnt.ctx != self.context_id):
            return False
        if learnt.aid is None:
            return True
        st = self.artifacts.get(learnt.aid)
        return st is not None and _plain(st) and (st.text_bytes > 0 or not self.turn_text)

    def _learn_shape(self, rid: int, data: bytes, env: Any) -> tuple[str, str | None] | None:
        """After the general rules took ``env``: if it was a hot text event, learn its shape
        and say so: (the message id its text went out under, its artifact or None)."""
        if type(env) is f.FrameError or env.id != rid or env.error is not None \
                or env.result is None:
            return None
        result = env.result
        task = self.task_id
        au = result.artifact_update
        if au is not None:
            parts = au.artifact.parts
            if not (au.append and not au.last_chunk and au.task_id == task
                    and len(parts) == 1 and part_view(parts[0])[0] == TEXT):
                return None
            aid: str | None = au.artifact.artifact_id
            st = self.artifacts.get(aid)  # type: ignore[arg-type]
            if st is None or not _plain(st):
                return None
            names, optional, check, ctx, mid = _ARTIFACT, _NONE, _CHECK_ARTIFACT, au.context_id, aid
        else:
            u = result.status_update
            if u is None or u.task_id != task or u.status.state != _WORKING:
                return None
            msg = u.status.message
            if msg is None or not is_agent(msg.role) or len(msg.parts) != 1 \
                    or part_view(msg.parts[0])[0] != TEXT:
                return None
            names, optional, check, ctx, mid = _STATUS, _OPTIONAL, _CHECK_STATUS, u.context_id, \
                msg.message_id
            aid = None
        learnt_rid, tries = self._learns
        if learnt_rid != rid:
            tries = 0
        if tries < _LEARNS:
            self._learns = (rid, tries + 1)
            pins = _pins(rid, task, ctx, aid)  # type: ignore[arg-type]
            learnt = self._repinned(data, pins, rid, task, ctx, aid)  # type: ignore[arg-type]
            if learnt is None:
                shape = None
                if pinnable(pins):
                    pinned = _PINNED_ARTIFACT if aid is not None else _PINNED_STATUS
                    general = learn(data, names, optional, check, pinned, _NUMBERS)
                    if general is not None:
                        self._pinned[aid is not None] = general
                        shape = general.pinned_to(pins)
                if shape is None:  # an id not where it is expected, or not plain: this
                    shape = learn(data, names, optional, check)  # turn's own shape
                if shape is not None:
                    learnt = _Learnt(shape, rid, task, ctx, aid)  # type: ignore[arg-type]
            if learnt is not None:
                self._learnt = learnt
        return mid, aid  # type: ignore[return-value]

    def _repinned(self, data: bytes, pins: dict[str, bytes], rid: int, task: str, ctx: str,
                  aid: str | None) -> _Learnt | None:
        """The last shape learnt of this kind (artifact text or agent status message) for
        this event's ids, if the event has it: a turn's text events are shaped as the last
        turn's were, so a new turn costs the match of one event, not a learn (a probe)."""
        general = self._pinned.get(aid is not None)
        shape = general.pinned_to(pins) if general is not None else None
        if shape is None:
            return None
        learnt = _Learnt(shape, rid, task, ctx, aid)
        return learnt if learnt.match([data], 0)[0] == 1 else None

    def _settle(self, learnt: _Learnt, values: list[list[str]], joined: str | None,
                size: int, count: int, out: list[Output], joins: bool) -> TextChunk | None:
        """``count`` events of the shape, each hole's values (an artifact's text joined,
        ``size`` its UTF-8 bytes):
        what the general rules would make of them one by one, consecutive text as one
        chunk (``joins``: with the last output too, the same artifact's or status
        messages' text); that chunk, if any."""
        if learnt.aid is not None:  # D2: text appended to a plain artifact
            text = joined or ""
            st = self.artifacts[learnt.aid]
            st.count += count
            st.closed = False
            if not text:
                return None
            st.text_bytes += size
            return _put(out, learnt.aid, text, joins)
        texts = values[learnt.text_at]
        seen = self.seen  # D1: agent text in WORKING statuses, once per messageId
        mids = values[learnt.mid_at]
        self.state = "working"
        fresh = seen.isdisjoint(mids)
        if fresh:  # none seen before: taken in one update, which tells whether all differ
            before = len(seen)
            seen.update(mids)
            fresh = len(seen) - before == count
            if not fresh:  # a message id twice in the run: the later ones are not new
                seen = set()
        if fresh:  # all new: set operations
            text = "".join(texts)
            if not text:
                return None
            first = mids[0] if texts[0] else next(m for m, t in zip(mids, texts, strict=True) if t)
        else:
            first, kept = None, []
            for mid, t in zip(mids, texts, strict=True):
                if mid in seen:
                    continue
                seen.add(mid)
                if t:
                    kept.append(t)
                    if first is None:
                        first = mid
            if first is None:
                return None
            text = "".join(kept)
        self.turn_text.append(text)
        return _put(out, first, text, joins)


def _put(out: list[Output], mid: str, text: str, joins: bool) -> TextChunk:
    if joins:
        last: TextChunk = out[-1]  # type: ignore[assignment]
        chunk = TextChunk(message_id=last.message_id, text=last.text + text)
        out[-1] = chunk
    else:
        chunk = TextChunk(message_id=mid, text=text)
        out.append(chunk)
    return chunk


def _pins(rid: int, task: str, ctx: str | None, aid: str | None) -> dict[str, bytes]:
    """This event's ids as the keys a learnt shape pins (``Shape.pinned_to`` says which
    it can fill in)."""
    pins = {"taskId": task.encode("utf-8", "replace"), "id": str(rid).encode()}
    if ctx:
        pins["contextId"] = ctx.encode("utf-8", "replace")
    if aid is not None:
        pins["artifactId"] = aid.encode("utf-8", "replace")
    return pins


def _plain(st: ArtifactState) -> bool:
    """An artifact whose text the general rules stream as ``cap.text_chunk``."""
    return st.call_id is None and not st.cap and not st.quiet


def _artifact_text(env: Any) -> dict[str, list[Any]]:
    """Every field a hole of an artifact text shape may stand for, by key."""
    au = env.result.artifact_update
    if au is None or not au.artifact.parts:
        return {}
    return {"text": [au.artifact.parts[0].text], "taskId": [au.task_id],
            "contextId": [au.context_id], "artifactId": [au.artifact.artifact_id],
            "id": [env.id]}


def _status_text(env: Any) -> dict[str, list[Any]]:
    """The same for an agent status message: its ids are there twice, the update's and the
    message's."""
    u = env.result.status_update
    msg = u.status.message if u is not None else None
    if msg is None or not msg.parts:
        return {}
    got = {"text": [msg.parts[0].text], "messageId": [msg.message_id],
           "taskId": [u.task_id, msg.task_id], "contextId": [u.context_id, msg.context_id],
           "id": [env.id]}
    if u.status.timestamp is not None:
        got["timestamp"] = [u.status.timestamp]
    return got


def _checker(fields: Any) -> Any:
    def check(probe: bytes, markers: Markers) -> bool:
        """Every marker decoded into a field of its key (a field of that key not holding
        one holds the learnt payload's bytes in every payload of the shape)."""
        env = f.decode_stream_batch(f.CURRENT, [probe])[0]
        if type(env) is f.FrameError or env.result is None:
            return False
        got = fields(env)
        return all(m in got.get(name, ()) for name, marks in markers.items() for m in marks)
    return check


_CHECK_ARTIFACT = _checker(_artifact_text)
_CHECK_STATUS = _checker(_status_text)
