"""trio-cap's own file tools confine writes to the workspace after resolving symlinks.

This is the point-of-use check: it holds even when a request was approved by hand
(``--allow-high-risk``) or the filesystem changed between the rating and the write.
"""

import os

import pytest
import trio

from tests.actors.helpers import of_kind
from trio_cap.actors.agent import tools
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.events.clock import StepClock


@pytest.fixture
def ws(tmp_path):
    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (workspace / "link").symlink_to(outside)
    (workspace / "filelink").symlink_to(outside / "target.txt")
    return workspace, outside


@pytest.mark.parametrize("path", ["link/x.txt", "filelink", "../outside/x.txt",
                                  "sub/../../outside/x.txt", "/etc/cap-test-x", "link"])
def test_writes_that_leave_the_workspace_are_refused(ws, path):
    workspace, outside = ws
    with pytest.raises(tools.ScopeViolation) as info:
        tools.write_file(str(workspace), path, "owned")
    assert str(info.value).startswith("cap_scope_violation (-32020): ")
    assert info.value.number == -32020 and info.value.code == "cap_scope_violation"
    assert list(outside.iterdir()) == []


def test_the_refusal_does_not_reveal_whether_the_outside_path_exists(ws):
    workspace, outside = ws
    with pytest.raises(tools.ScopeViolation) as missing:
        tools.edit_file(str(workspace), "filelink", "a", "b")
    (outside / "target.txt").write_text("a secret")
    with pytest.raises(tools.ScopeViolation) as present:
        tools.edit_file(str(workspace), "filelink", "a", "b")
    assert str(missing.value) == str(present.value)
    assert (outside / "target.txt").read_text() == "a secret"


def test_a_symlink_loop_is_refused_not_a_crash(ws):
    workspace, _ = ws
    (workspace / "loop").symlink_to(workspace / "loop")
    with pytest.raises(tools.ToolError):
        tools.write_file(str(workspace), "loop/x", "data")


def test_a_symlink_swapped_in_after_the_check_is_not_followed(ws, monkeypatch):
    workspace, outside = ws
    real = tools.resolve_inside
    calls = []

    def swap_after_check(cwd, path):
        checked = real(cwd, path)
        calls.append(path)
        if len(calls) == 2:  # after the last check, before the open: the race, made certain
            os.symlink(outside / "swapped.txt", checked)
        return checked

    monkeypatch.setattr(tools, "resolve_inside", swap_after_check)
    with pytest.raises(tools.ScopeViolation):
        tools.write_file(str(workspace), "new.txt", "owned")
    assert len(calls) == 2
    assert not (outside / "swapped.txt").exists()


def test_writes_inside_still_work(ws):
    workspace, _ = ws
    assert tools.write_file(str(workspace), "a/b.txt", "hi") == "wrote 2 bytes to a/b.txt"
    assert tools.edit_file(str(workspace), str(workspace / "a" / "b.txt"), "hi", "yo")
    assert (workspace / "a" / "b.txt").read_text() == "yo"


async def test_approved_by_hand_the_tool_still_refuses(ws):
    workspace, outside = ws
    async with open_orchestrator(clock=StepClock(), ids=SequentialIds()) as orch:
        with trio.fail_after(30):
            session = await orch.start_session(cwd=workspace, permissions="allow",
                                               allow_high_risk=True)
            await session.run_turn("write link/x.txt: owned")
            await session.close()
    (decision,) = [env.event for env in of_kind(orch.log, "permission.decided")]
    assert decision.decision == "allow_once" and decision.risk == "high"
    (end,) = [env.event for env in of_kind(orch.log, "cap.tool_call.end")]
    assert end.is_error and end.output.startswith("cap_scope_violation (-32020)")
    assert list(outside.iterdir()) == []
