"""The ACP client's hot read: a read's lines → CAP events, a message's chunks joined inline.

A mixin of :class:`~.machine.AcpClient` (``machine.py`` has the rules).  While a
turn runs, most of what an agent writes is a message's text chunks; they are
decoded a read at a time by the session's own block decoder (views without
what the translation does not read) and joined into one event per message per
read without a call per line.  A chunk carrying ``_meta`` (``cap.message_to``,
a message to a fleet member) leaves the inline path for :meth:`_update`, which
keeps its CAP keys: the views decode ``_meta`` only where it is present, so a
read needs no search for it.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from trio_cap.actors.bindings.acp import frames as f
from trio_cap.actors.bindings.acp.runs import join_runs, layout
from trio_cap.actors.bindings.base import Output
from trio_cap.actors.bindings.ndjson import Lines
from trio_cap.events.kinds import TextChunk, Thought


class HotPath:
    session_id: str | None
    _prompt: Any
    _loading: bool
    _turn: int
    _session_decoder: tuple[str, type, Any, Any] | None
    updates: Any

    def _update(self, params: Any, out: list[Output]) -> None:
        raise NotImplementedError

    def _handle(self, kind: type, item: Any, out: list[Output]) -> None:
        raise NotImplementedError

    def _translate(self, lines: Lines[Any]) -> list[Output]:
        """The hot loop: one pass over a read's messages, text chunks handled inline.

        A *run* is consecutive text chunks of one message (or thought) in one read:
        they become one event, as the stream-json driver joins its deltas (text
        boundaries carry no meaning; the text is the same).  Everything else goes
        through :meth:`_update` or the handler table (a chunk with ``_meta`` too: its
        ``cap.*`` keys are its event's).
        """
        live = self._chunks_live()
        sid = self.session_id
        items = lines.items
        if live and type(items) is f.SessionBlock and items.session_id == sid:
            return self._translate_updates(items)
        out: list[Output] = []
        update_t, text_t = self._message_type(), f.TextView
        message_t, thought_t = f.MessageChunkView, f.ThoughtChunkView
        run_kind: type | None = None
        run_id: Any = None
        parts: list[str] = []
        append = parts.append
        for item in items:
            kind = type(item)
            if kind is update_t or kind is f.UpdateMessage:  # the block decoder's: a notification
                params = item.params
                update = params.update
                ukind = type(update)
                if ukind is run_kind:  # the hottest case: the run goes on (so: live)
                    content = update.content
                    if (type(content) is text_t and update.message_id == run_id
                            and params.session_id == sid and update.meta is UNSET
                            and content.meta is UNSET):
                        append(content.text)
                        continue
                if ((ukind is message_t or ukind is thought_t) and live
                        and type(update.content) is text_t and params.session_id == sid
                        and update.meta is UNSET and update.content.meta is UNSET):
                    if run_kind is not None:
                        self._flush(run_kind, run_id, "".join(parts), out)
                    run_kind, run_id, parts = ukind, update.message_id, [update.content.text]
                    append = parts.append
                    continue
                if run_kind is not None:
                    self._flush(run_kind, run_id, "".join(parts), out)
                    run_kind = None
                self._update(params, out)
                continue
            if run_kind is not None:
                self._flush(run_kind, run_id, "".join(parts), out)
                run_kind = None
            self._handle(kind, item, out)
            live = self._chunks_live()  # a handler may have ended the turn or opened one
            sid = self.session_id
        if run_kind is not None:
            self._flush(run_kind, run_id, "".join(parts), out)
        return out

    def _translate_updates(self, items: f.SessionBlock) -> list[Output]:
        """:meth:`_translate` for a read of nothing but this session's notifications while
        chunks are live (a :class:`.frames.SessionBlock`).

        The same rules with less to ask of each line: every item is a
        notification of this session (the decoder checked), and nothing in
        the read can end the turn or change the session (no handler runs), so
        the runs are joined in one call (:mod:`.runs`, C when built) and the
        other updates go straight to the mapper: :meth:`_update`'s checks hold
        for the whole read.
        """
        out: list[Output] = []
        mapped, turn_id = self.updates.map, f"turn_{self._turn}"
        flush = self._flush
        for entry in join_runs(items, self._session_decoder[3]):  # type: ignore[index]
            if type(entry) is tuple:
                flush(*entry, out)
            else:
                out += mapped(entry, turn_id)
        return out

    def _chunks_live(self) -> bool:
        """Text chunks become events now (a turn runs; no history is being replayed)."""
        return self._prompt is not None and not self._loading and self.session_id is not None

    def _flush(self, kind: type, message_id: Any, text: str, out: list[Output]) -> None:
        if not text:
            return  # claude-code-acp opens every message with an empty chunk
        mid = message_id if isinstance(message_id, str) else f"turn_{self._turn}"
        event = TextChunk if kind is f.MessageChunkView else Thought
        out.append(event(message_id=mid, text=text))

    def _decode_block(self, block: bytes) -> list[Any]:
        """The reader's block decoder: once the session is known, its own (a line of any
        other session sends the read line by line, where :meth:`_update` reports it)."""
        sid = self.session_id
        if sid is None:
            return f.decode_updates(block)
        cached = self._session_decoder
        if cached is None or cached[0] != sid:
            message, note, decode = f.session_decoder(sid)
            cached = self._session_decoder = (sid, message, decode, layout(message, note))
        return cached[2](block)  # type: ignore[no-any-return]

    def _message_type(self) -> type:
        """The notification type the block decoder gives now."""
        cached = self._session_decoder
        return f.UpdateMessage if cached is None else cached[1]
