"""``cap model serve``: a deterministic, scripted model endpoint for headless agent tests.

It speaks the four API shapes the real agents call (OpenAI chat completions,
OpenAI Responses, Anthropic Messages, Gemini generateContent), streamed and
not, and replies from a TOML script.  The decision of what to say is a pure
function (:mod:`.planner`); one renderer per API turns it into that API's JSON
or SSE frames; :mod:`.app` is the thin ASGI shell served by hypercorn on Trio.
"""

from trio_cap.actors.model_server.script import (
    Fault,
    Reply,
    Rule,
    Script,
    ScriptError,
    ToolCall,
    default_script,
    load_script,
    script_from_obj,
)
from trio_cap.actors.model_server.server import ModelServer, open_model_server

__all__ = [
    "Fault",
    "ModelServer",
    "Reply",
    "Rule",
    "Script",
    "ScriptError",
    "ToolCall",
    "default_script",
    "load_script",
    "open_model_server",
    "script_from_obj",
]
