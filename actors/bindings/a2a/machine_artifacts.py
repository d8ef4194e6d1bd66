"""The driver's artifact rules (``machine.py`` D2–D4): chunks in, text / tool output / one
``cap.artifact`` out.  A mixin of :class:`~.machine.A2aDriver`, apart only to keep each file
about one thing; it uses the driver's books (``artifacts``, ``calls``, ``turn_text``).
"""

from __future__ import annotations

from typing import Any

from trio_cap.actors.bindings.a2a.machine_io import ArtifactState
from trio_cap.actors.bindings.a2a.machine_parts import (
    DATA,
    FILE,
    TEXT,
    file_size,
    json_text,
    part_cap_kind,
    part_view,
)
from trio_cap.actors.bindings.base import Output
from trio_cap.events.kinds import Artifact, TextChunk, ToolCallDelta, ToolCallEnd


class ArtifactRules:
    artifacts: dict[str, ArtifactState]
    calls: set[str]
    turn_text: list[str]

    def _artifact_update(self, u: Any, out: list[Output]) -> None:
        self._learn(u.task_id, u.context_id)
        art = u.artifact
        state = self.artifacts.get(art.artifact_id)
        if state is None or (not u.append and state.parts != art.parts):
            state = self._new_artifact(art)
        elif not u.append:
            return  # the same artifact again (a re-sent replace): already taken
        self._artifact_parts(art.artifact_id, state, art.parts, out)
        if u.last_chunk:
            self._close_artifact(art.artifact_id, state, out)

    def _new_artifact(self, art: Any) -> ArtifactState:
        call = (art.metadata or {}).get("cap.call_id")
        if not isinstance(call, str):
            call = art.artifact_id if art.artifact_id in self.calls else None
        state = ArtifactState(name=art.name or "", call_id=call, parts=art.parts)
        self.artifacts[art.artifact_id] = state
        return state

    def _artifact_parts(self, aid: str, state: ArtifactState, parts: tuple[Any, ...],
                        out: list[Output]) -> None:
        state.count += len(parts)
        state.closed = False
        views = [part_view(part) for part in parts]
        if any(k == DATA and part_cap_kind(p, v) is not None
               for p, (k, v) in zip(parts, views, strict=True)):
            state.cap = True
        elif not state.text_bytes and self.turn_text and all(k == TEXT for k, _ in views) \
                and "".join(v for _, v in views) == "".join(self.turn_text):
            state.quiet = True  # e.g. a publisher's final "response" artifact of the turn
        for part, (kind, value) in zip(parts, views, strict=True):
            if kind == TEXT:
                if not value:
                    continue
                state.text_bytes += len(value.encode())
                if state.cap or state.quiet:
                    continue
                if state.call_id is not None:
                    state.output.append(value)
                    out.append(ToolCallDelta(call_id=state.call_id, output_chunk=value))
                else:
                    out.append(TextChunk(message_id=aid, text=value))
            elif kind == DATA and (cap := part_cap_kind(part, value)) is not None:
                self._cap_part(cap, value, out)
            elif kind in (DATA, FILE):
                state.other.append((kind, value))

    def _close_artifact(self, aid: str, state: ArtifactState, out: list[Output]) -> None:
        if state.closed:
            return
        state.closed = True
        if state.call_id is not None:
            self.calls.discard(state.call_id)
            out.append(ToolCallEnd(call_id=state.call_id, output="".join(state.output)))
            return
        if state.cap:
            return  # its own cap.artifact (or other CAP events) already said it
        if not state.other:
            if state.text_bytes:
                out.append(Artifact(artifact_id=aid, mime_type="text/plain",
                                    name=state.name or aid, size=state.text_bytes))
            return
        kind, value = state.other[0]
        if kind == FILE and len(state.other) == 1:
            uri, b64, fname, mime = value
            out.append(Artifact(artifact_id=aid, mime_type=mime or "application/octet-stream",
                                name=fname or state.name or aid, size=file_size(b64), uri=uri,
                                content=b64, meta={"cap.encoding": "base64"} if b64 else None))
            return
        content = json_text([v for _, v in state.other] if len(state.other) > 1 else value)
        out.append(Artifact(artifact_id=aid, mime_type="application/json",
                            name=state.name or aid, size=len(content.encode()), content=content))
