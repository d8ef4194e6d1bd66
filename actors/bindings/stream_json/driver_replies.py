"""What the driver writes to the agent's stdin: prompts and answers, as stream-json lines.

Pure functions of a CAP frame and what the driver remembered of the request
it answers, so each wire shape is testable alone and the machine keeps only
the bookkeeping (which requests are pending, which prompts run).
"""

from __future__ import annotations

from typing import Any

import msgspec

from trio_cap.actors.bindings.base import REFUSAL_MESSAGE, UPDATED_INPUT
from trio_cap.actors.bindings.stream_json import frames as f
from trio_cap.actors.bindings.stream_json.driver_asks import answered_input
from trio_cap.actors.bindings.stream_json.driver_blocks import PendingPermission
from trio_cap.events.kinds import AskUserAnswer, PermissionResponse, UserInputInject


def prompt_line(frame: UserInputInject, uuid: str) -> bytes:
    """A user frame carrying ``uuid``, so the ``result`` that ends its turn can name it."""
    blocks = frame.content
    content: str | list[f.ContentBlock]
    if all(b.type == "text" for b in blocks):
        content = "".join(b.text for b in blocks)
    else:
        content = [f.TextBlock(text=b.text) for b in blocks if b.type == "text"]
    return f.encode_line(f.Prompt(message=f.PromptMessage(content=content), uuid=uuid))


def permission_line(frame: PermissionResponse, pending: PendingPermission) -> bytes:
    """The ``can_use_tool`` answer: deny with the reason, or allow with the input that runs."""
    meta = frame.meta or {}
    result: f.PermissionResult
    if frame.decision == "deny":
        why = meta.get(REFUSAL_MESSAGE)
        result = f.PermissionDeny(message=str(why) if why else
                                  "The user denied this tool call (trio-cap).")
    else:
        updates = None
        if frame.decision == "allow_always" and pending.suggestions:
            # Keep "always" to this session; never write the user's settings files.
            updates = [{**s, "destination": "session"} for s in pending.suggestions
                       if isinstance(s, dict)]
        # the decider may rewrite the call's input (cap.updated_input); else it runs as asked
        updated = meta.get(UPDATED_INPUT)
        result = f.PermissionAllow(
            updated_input=updated if isinstance(updated, dict) else pending.input,
            updated_permissions=updates or None)
    return answer_line(frame.req_id, result)


def ask_line(frame: AskUserAnswer, asked: dict[str, Any]) -> bytes:
    """The answer to an AskUserQuestion call: its input with ``answers``, or a refusal."""
    result: f.PermissionResult
    if frame.value is None:
        result = f.PermissionDeny(message="The user declined to answer.")
    else:
        result = f.PermissionAllow(updated_input=answered_input(asked, frame.value))
    return answer_line(frame.ask_id, result)


def answer_line(request_id: str, result: f.PermissionResult) -> bytes:
    body = f.ResponseBody(subtype="success", request_id=request_id,
                          response=msgspec.to_builtins(result))
    return f.encode_line(f.ControlResponse(response=body))


def refusal_line(request_id: str, subtype: str) -> bytes:
    """The error answer to a control request trio-cap does not serve (R14)."""
    body = f.ResponseBody(subtype="error", request_id=request_id,
                          error=f"trio-cap does not serve {subtype!r} requests")
    return f.encode_line(f.ControlResponse(response=body))


def request_line(request_id: str, subtype: str, **fields: Any) -> bytes:
    return f.encode_line(f.ControlRequest(request_id=request_id,
                                          request={"subtype": subtype, **fields}))
