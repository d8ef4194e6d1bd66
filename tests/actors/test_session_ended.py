"""A session that has ended answers every command at once with SessionEnded, never a wait;
and turn/idle timeouts cancel a hung turn, log a typed error and fail the turn."""

from contextlib import asynccontextmanager

import pytest
import trio

from tests.actors.helpers import of_kind
from trio_cap.actors.bindings.base import AgentBatch
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import open_orchestrator
from trio_cap.actors.session.actor import SessionEnded
from trio_cap.events.kinds import CapSessionReady, SessionConfig

NO_BINDING = "acp:/nonexistent/agent-program"  # this build cannot start it: fails at once


async def _commands(session):
    return [
        lambda: session.inject("hello"),
        lambda: session.run_turn("hello"),
        lambda: session.answer("ask_1", "x"),
        lambda: session.decide("perm_1", "allow_once"),
        lambda: session.cancel(),
        lambda: session.wait_status("ready"),
    ]


async def test_every_command_to_a_session_that_could_not_start_raises_promptly(tmp_path):
    async with open_orchestrator(ids=SequentialIds()) as orch:
        for _ in range(25):  # the race between the actor ending and the command, many times
            session = await orch.start_session(NO_BINDING, cwd=tmp_path)
            for command in await _commands(session):
                with trio.fail_after(5), pytest.raises(SessionEnded) as info:
                    await command()
                assert info.value.view is not None and info.value.view.status == "failed"
            with trio.fail_after(5):
                view = await session.close()  # closing an ended session is harmless
            assert view.status == "failed"


async def test_a_command_racing_the_end_of_the_session_never_hangs(tmp_path):
    """Send at every moment of the actor's short life: the answer is a reply or SessionEnded."""
    async with open_orchestrator(ids=SequentialIds()) as orch:
        for delay_steps in range(40):
            session = await orch.start_session(NO_BINDING, cwd=tmp_path)
            for _ in range(delay_steps % 8):
                await trio.lowlevel.checkpoint()
            with trio.fail_after(5):
                try:
                    await session.inject("now?")
                except SessionEnded:
                    pass
                result = None
                try:
                    result = await session.run_turn("and now?")
                except SessionEnded:
                    pass
                assert result is None or result.stop_reason is None
            assert session.gone.is_set()


async def test_commands_to_a_closed_session_raise_and_close_again_returns_the_view(tmp_path):
    async with open_orchestrator() as orch:
        session = await orch.start_session(cwd=tmp_path)
        await session.run_turn("hi")
        view = await session.close()
        assert view.status == "completed"
        for command in await _commands(session):
            with trio.fail_after(5), pytest.raises(SessionEnded):
                await command()
        assert (await session.close()).status == "completed"
        stranger = orch.session("sess-never-existed")
        with trio.fail_after(5), pytest.raises(SessionEnded):
            await stranger.inject("anyone?")


# ---- timeouts ---------------------------------------------------------------------------


async def test_the_idle_timeout_cancels_a_silent_turn_and_the_turn_fails(tmp_path, autojump_clock):
    async with open_orchestrator() as orch:
        session = await orch.start_session(cwd=tmp_path, idle_timeout=30)
        result = await session.run_turn("think: about to go quiet\nwait 3600")
        assert trio.current_time() < 100  # cancelled after 30 s of silence, not an hour
        assert result.stop_reason == "error"
        (error,) = [e.event for e in of_kind(orch.log, "cap.error")]
        assert error.code == "idle_timeout" and "30 s" in error.message
        kinds = [env.kind for env in orch.log.read(1, session.id)]
        assert kinds.index("cap.error") < kinds.index("cap.cancel") < kinds.index(
            "session.turn_ended")
        view = await session.close()
        assert view.status == "failed" and view.last_error.startswith("idle_timeout")


async def test_the_turn_timeout_from_the_manifest_applies_and_the_caller_wins(
    tmp_path, autojump_clock
):
    from trio_cap.actors.manifest import load_manifest
    from trio_cap.actors.manifest.resolve import bundled_dir

    text = (bundled_dir() / "cap-agent.toml").read_text()
    text = text.replace("[capabilities]\n", "[capabilities]\nx-turn-timeout-seconds = 20\n", 1)
    path = tmp_path / "cap-agent.toml"
    path.write_text(text)
    assert load_manifest(path).capabilities.x_turn_timeout_seconds == 20
    async with open_orchestrator() as orch:
        chatty = "\n".join(["think: still here\nwait 5"] * 20)  # never silent, runs 100 s
        session = await orch.start_session(str(path), "inproc", cwd=tmp_path, idle_timeout=0)
        result = await session.run_turn(chatty)
        assert result.stop_reason == "error" and 20 <= trio.current_time() < 40
        assert of_kind(orch.log, "cap.error")[0].event.code == "turn_timeout"
        await session.close()
        start = trio.current_time()
        longer = await orch.start_session(str(path), "inproc", cwd=tmp_path, turn_timeout=0)
        result = await longer.run_turn(chatty)
        assert result.stop_reason == "end_turn" and trio.current_time() - start >= 100
        await longer.close()


class _Deaf:
    """An agent that starts, then ignores everything, cancel included: the hard path."""

    binding = "inproc"

    def __init__(self) -> None:
        self.closed = trio.Event()

    @asynccontextmanager
    async def open(self, spec, deliver):
        outer = self

        class Conn:
            async def send(self, frames):
                if any(isinstance(f, SessionConfig) for f in frames):
                    await deliver.send(AgentBatch([CapSessionReady(session_id="deaf")]))

            async def cancel(self, scope):
                pass  # never ends the turn

        try:
            yield Conn()
        finally:
            outer.closed.set()


async def test_an_agent_that_ignores_the_cancel_is_cut_off_after_the_grace(
    tmp_path, autojump_clock
):
    deaf = _Deaf()
    async with open_orchestrator() as orch:
        orch.connectors["inproc"] = deaf
        session = await orch.start_session(cwd=tmp_path, turn_timeout=60)
        result = await session.run_turn("never answered")
        assert result.stop_reason is None  # the turn never ended: the session did
        view = await session.wait_terminal()
        assert deaf.closed.is_set()  # the connection (and so the process) was ended
        assert view.status == "failed" and view.last_error.startswith("turn_timeout")
        assert "did not end the turn within 5 s" in view.last_error
        assert 65 <= trio.current_time() < 70
        assert [e.event.code for e in of_kind(orch.log, "cap.error")] == ["turn_timeout"]


class _NeverConnects:
    binding = "inproc"

    def __init__(self) -> None:
        self.connecting = trio.Event()

    @asynccontextmanager
    async def open(self, spec, deliver):
        self.connecting.set()
        await trio.sleep_forever()  # a handshake that never completes
        yield None


async def test_leaving_the_orchestrator_abandons_a_connect_at_once(tmp_path, autojump_clock):
    async with open_orchestrator(grace=5.0) as orch:
        never = orch.connectors["inproc"] = _NeverConnects()
        orch.shutdown_reason = "the owner left"
        session = await orch.start_session(cwd=tmp_path)
        await never.connecting.wait()  # leave while the session is connecting
        left = trio.current_time()
    assert trio.current_time() - left < 1  # not the 5 s grace
    (cancelled,) = of_kind(orch.log, "session.cancelled")
    assert cancelled.event.reason == "the owner left"
    assert session.gone.is_set()
