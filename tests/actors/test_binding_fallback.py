"""Resolution and binding fallback inside a real session: the log tells the story."""

import pytest

from tests.actors.helpers import of_kind
from trio_cap.actors.bindings.inproc import InprocConnector
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import UnknownAgent, open_orchestrator

MANIFEST = """
[agent]
name = "flaky-agent"
binary = "/nonexistent/flaky-agent"
profiles = []

[startup]
command = {command}
ready_when = {{ pattern = "^\\\\$ $" }}

[fast_path]
stream_json = ["/nonexistent/flaky-agent", "--stream"]

[pty]
cols = 80
rows = 24

[capabilities]
streaming_output = true
"""


def manifest(tmp_path, command: str = '["bash", "-i"]'):
    path = tmp_path / "flaky.toml"
    path.write_text(MANIFEST.format(command=command))
    return str(path)


async def test_a_missing_stream_json_binary_falls_back_and_all_failing_fails_the_session(
    tmp_path,
):
    async with open_orchestrator(ids=SequentialIds()) as orch:
        # both bindings name a program that is not there (a PTY one that exists would start)
        flaky = manifest(tmp_path, '["/nonexistent/flaky-agent"]')
        session = await orch.start_session(flaky, cwd=tmp_path)
        view = await session.wait_terminal()
    assert view.status == "failed"
    (fallback,) = of_kind(orch.log, "binding.fallback")
    assert (fallback.event.failed, fallback.event.next) == ("stream-json", "pty")
    assert "/nonexistent/flaky-agent" in fallback.event.reason
    (failed,) = of_kind(orch.log, "session.failed")
    assert failed.event.code == "cap_binding_unavailable"
    assert "pty" in failed.event.message and "stream-json" in failed.event.message
    assert of_kind(orch.log, "cap.session.config") == []  # nothing reached any agent


async def test_the_session_runs_on_the_binding_it_fell_back_to(tmp_path):
    async with open_orchestrator(ids=SequentialIds()) as orch:
        orch.connectors["pty"] = InprocConnector()  # stands in for a working pty driver
        session = await orch.start_session(manifest(tmp_path), cwd=tmp_path)
        result = await session.run_turn("hello")
        assert result.stop_reason == "end_turn"
        await session.close()
    kinds = [env.kind for env in orch.log.read()]
    assert kinds.index("binding.fallback") < kinds.index("session.starting")
    (starting,) = of_kind(orch.log, "session.starting")
    assert starting.event.binding == "pty"
    assert orch.state.sessions.sessions[session.id].binding == "pty"


async def test_unknown_agents_and_bindings_not_offered_are_refused_up_front(tmp_path):
    async with open_orchestrator() as orch:
        with pytest.raises(UnknownAgent, match="no-such-agent"):
            await orch.start_session("no-such-agent", cwd=tmp_path)
        with pytest.raises(UnknownAgent, match="a2a"):
            await orch.start_session("cap-agent", "a2a", cwd=tmp_path)
        assert orch.log.last_seq == 0
