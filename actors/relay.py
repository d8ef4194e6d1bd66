"""Questions of driven sessions, renumbered for the one client that answers them.

The bridge (one driven session) and the fleet face (a session per member) both put
sessions trio-cap drives behind one agent face; the client answering the face sees
one agent, so the permission requests and asks of every driven session are
renumbered here (``perm_N``, ``ask_N``): each driven agent's ids are its own
(Claude Code's are control-request uuids, two members may both say ``perm_1``) and
the client must never see two namespaces.  Claude Code's ``Write``/``Edit`` inputs
(``file_path`` …) are put in the brain's CAP shape (``path`` …) on the way out, which
the agent side translates for its client, and back in the wire shape on the way in,
so a driven Claude Code's file paths survive the round trip.

With ``absolute=True`` (the fleet face, whose members work in worktrees of their own,
not in the face's directory) the paths the client sees are absolute, and an
answer's rewritten path is made relative to the member's directory again.

Pure: no I/O, no Trio, no clock — a value in, a value out.
"""

from __future__ import annotations

import posixpath
from typing import Any

import attrs

from trio_cap.actors.bindings.base import REFUSAL_MESSAGE, UPDATED_INPUT
from trio_cap.actors.bindings.stream_json import agent_policy
from trio_cap.events.kinds import (
    AskUser,
    AskUserAnswer,
    Decision,
    PermissionRequest,
    PermissionResponse,
    ToolCallStart,
)

WIRE_SHAPED = ("Write", "Edit")


@attrs.frozen
class Pending:
    """What a local id stands for: who asked (a session id), its own id, and how to
    put an answer back in the shape it asked in."""

    source: str
    remote: str
    cwd: str
    wire_tool: str | None = None
    """The tool, when the request came in Claude Code's shape (an answer's rewritten
    input goes back in that shape)."""


@attrs.frozen
class Verdict:
    """A client's permission answer, addressed to the session that asked."""

    to: Pending
    decision: Decision
    reason: str
    updated_input: dict[str, Any] | None


class Relay:
    def __init__(self, *, absolute: bool = False) -> None:
        self.absolute = absolute
        self.face_cwd = ""
        """The face's own directory (its session config's cwd): where the client takes a
        relative path to be."""
        self.permissions: dict[str, Pending] = {}
        self.asks: dict[str, Pending] = {}
        self._counters: dict[str, int] = {}

    def _id(self, prefix: str) -> str:
        n = self._counters.get(prefix, 0) + 1
        self._counters[prefix] = n
        return f"{prefix}_{n}"

    # ---- out: the driven session's question, as the client sees it ----------------------
    def shape(self, tool: str, data: dict[str, Any], cwd: str) -> tuple[dict[str, Any], bool]:
        """``data`` in the brain's CAP shape, and whether it came in Claude Code's."""
        wire_shaped = tool in WIRE_SHAPED and "file_path" in data
        if wire_shaped:
            data = agent_policy.from_wire(tool, data, cwd)
        if self.absolute and tool in WIRE_SHAPED and isinstance(data.get("path"), str):
            data = {**data, "path": posixpath.normpath(posixpath.join(cwd, data["path"]))}
        return data, wire_shaped

    def tool_start(self, event: ToolCallStart, cwd: str, *, call_id: str | None = None,
                   meta: dict[str, Any] | None = None) -> ToolCallStart:
        return ToolCallStart(call_id=call_id or event.call_id, name=event.name,
                             input=self.shape(event.name, event.input, cwd)[0],
                             meta=meta if meta is not None else event.meta)

    def permission(self, event: PermissionRequest, source: str, cwd: str, *,
                   meta: dict[str, Any] | None = None) -> PermissionRequest:
        local = self._id("perm")
        intent, wire_shaped = self.shape(event.tool, event.intent, cwd)
        self.permissions[local] = Pending(source, event.req_id, cwd,
                                          event.tool if wire_shaped else None)
        return PermissionRequest(req_id=local, tool=event.tool, intent=intent,
                                 scope=event.scope, risk_level=event.risk_level,
                                 meta=meta if meta is not None else event.meta)

    def ask(self, event: AskUser, source: str, cwd: str, *,
            meta: dict[str, Any] | None = None) -> AskUser:
        local = self._id("ask")
        self.asks[local] = Pending(source, event.ask_id, cwd)
        return AskUser(ask_id=local, prompt=event.prompt, form=event.form,
                       timeout_seconds=event.timeout_seconds,
                       meta=meta if meta is not None else event.meta)

    # ---- in: the client's answer, addressed to the session that asked -------------------
    def decision(self, frame: PermissionResponse) -> Verdict | None:
        """None: nothing waits on that id (the caller reports it)."""
        pending = self.permissions.pop(frame.req_id, None)
        if pending is None:
            return None
        meta = frame.meta or {}
        updated = meta.get(UPDATED_INPUT)
        if isinstance(updated, dict):
            updated = self._back(pending, updated)
        reason = str(meta.get(REFUSAL_MESSAGE) or meta.get("cap.decided_by") or "")
        return Verdict(pending, frame.decision, reason,
                       updated if isinstance(updated, dict) else None)

    def answer(self, frame: AskUserAnswer) -> Pending | None:
        return self.asks.pop(frame.ask_id, None)

    def forget(self, source: str) -> None:
        """``source`` has ended: nothing it asked can be answered any more."""
        for table in (self.permissions, self.asks):
            for local in [k for k, p in table.items() if p.source == source]:
                del table[local]

    def _back(self, pending: Pending, updated: dict[str, Any]) -> dict[str, Any]:
        tool = pending.wire_tool
        if self.absolute and isinstance(updated.get("path"), str):
            # the client's path is relative to the face's directory, the member's to its own
            path = posixpath.normpath(posixpath.join(self.face_cwd or pending.cwd,
                                                     updated["path"]))
            if tool is None:
                path = _inside(path, pending.cwd)
            updated = {**updated, "path": path}
        if tool is not None:
            return agent_policy.to_wire(tool, updated, pending.cwd)
        return updated


def _inside(path: str, cwd: str) -> str:
    """``path`` relative to ``cwd`` when inside it (the scripted brain's scope check refuses
    the others, which is right)."""
    base = posixpath.normpath(cwd)
    if path == base or path.startswith(base.rstrip("/") + "/"):
        return posixpath.relpath(path, base)
    return path
