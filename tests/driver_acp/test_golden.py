"""The official Python SDK's golden wire samples decode and re-encode through our frames.

The samples ship only in the SDK's sdist (``tests/golden/*.json``), which the
``acp-python-sdk`` peer unpacks; a missing peer fails.  Each file is decoded
with the frame type it is a sample of and encoded back: the JSON must be the
same value, and every sample file must be covered here.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from tests.driver_acp.conftest import sdk_sdist
from trio_cap.actors.bindings.acp import frames as f

pytestmark = pytest.mark.peers  # the official SDKs' peers (cap peers install)

TYPES: dict[str, object] = {
    "cancel_notification": f.SessionIdParams,
    "initialize_request": f.InitializeParams,
    "initialize_response": f.InitializeResult,
    "new_session_request": f.NewSessionParams,
    "new_session_response": f.NewSessionResult,
    "prompt_request": f.PromptParams,
    "fs_read_text_file_request": f.ReadTextFileParams,
    "fs_read_text_file_response": f.ReadTextFileResult,
    "fs_write_text_file_request": f.WriteTextFileParams,
    "permission_outcome_cancelled": f.PermissionOutcome,
    "permission_outcome_selected": f.PermissionOutcome,
    "request_permission_request": f.RequestPermissionParams,
    "request_permission_response_selected": f.RequestPermissionResult,
    "set_session_config_option_request": f.SetConfigOptionParams,
    "set_session_config_option_response": f.SetConfigOptionResult,
}
PREFIXES = {"session_update_": f.SessionUpdate, "content_": f.ContentBlock,
            "tool_content_": f.ToolCallContent}


def frame_type(name: str) -> object:
    if name in TYPES:
        return TYPES[name]
    for prefix, kind in PREFIXES.items():
        if name.startswith(prefix):
            return kind
    raise AssertionError(f"golden sample {name} has no frame type here: add it")


def samples() -> list[Path]:
    return sorted((sdk_sdist() / "tests" / "golden").glob("*.json"))


def test_the_sdist_ships_the_samples() -> None:
    assert len(samples()) >= 30


@pytest.mark.parametrize("name", [
    "initialize_response", "session_update_tool_call_update_more_fields",
    "session_update_config_option_update", "content_resource_blob", "tool_content_diff_no_old",
    "request_permission_request", "prompt_request"])
def test_named_samples_present(name: str) -> None:
    assert name in {p.stem for p in samples()}


def test_every_sample_round_trips() -> None:
    checked = 0
    for path in samples():
        raw = path.read_bytes()
        value = msgspec.json.decode(raw, type=frame_type(path.stem))
        assert json.loads(f.encode(value)) == json.loads(raw), path.stem
        checked += 1
    assert checked == len(samples())


def test_session_update_samples_decode_on_the_hot_path() -> None:
    """Wrapped as notifications, the update samples go through the block decoder too."""
    lines = [json.dumps({"jsonrpc": "2.0", "method": "session/update",
                         "params": {"sessionId": "s", "update": json.loads(p.read_bytes())}})
             for p in samples() if p.stem.startswith("session_update_")]
    decoded = f.decode_updates(("[" + ",".join(lines) + "]").encode())
    assert len(decoded) == len(lines) >= 10
