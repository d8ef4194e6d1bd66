"""``cap replay --check`` of A2A sessions: recorded against real a2a-sdk servers (both
spellings), then re-run through the A2A driver machine with the server gone."""

from __future__ import annotations

import json
import select
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from tests.driver_a2a.conftest import SECONDS, SPELLINGS
from tests.driver_a2a.servers import A2aServer, CapAsk, Chunks, Echo, Slow
from tests.replay.helpers import (
    CAP,
    NO_AGENTS,
    WITH_CAP,
    assert_clean,
    cap,
    read_log,
    sessions_of,
)
from trio_cap.actors.orchestrator import Orchestrator, open_orchestrator
from trio_cap.actors.replay.check import check_sessions, group_sessions
from trio_cap.events.kinds import AgentRaw, AskUser, FrameIn, FrameOut, TextChunk


def _of(orch: Orchestrator, sid: str, kind: type) -> list:
    return [e.event for e in orch.log.read(1, sid) if type(e.event) is kind]


async def _until(orch: Orchestrator, predicate) -> None:
    await orch.wait_until(lambda _state: predicate())


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
async def test_asks_cancels_and_a_resubscribe_replay_through_the_a2a_machine(
        tmp_path: Path, spelling: str) -> None:
    """A CAP ask answered by a person, a cancelled task, and a stream cut mid-way that the
    driver resubscribes to: every exchange's frames, re-run offline."""
    versions = SPELLINGS[spelling]
    chunks = Chunks(6, pause_at=3)
    async with open_orchestrator(grace=5.0) as orch:
        orch.record = "frames"
        with A2aServer(CapAsk(), versions=versions, cap_extension=True).running() as srv, \
                trio.fail_after(SECONDS):
            asked = await orch.start_session(f"a2a:{srv.base}", cwd=tmp_path, human=True)
            await asked.inject("paint it")
            await asked.wait_status("input_required")
            (ask,) = _of(orch, asked.id, AskUser)
            await asked.answer(ask.ask_id, "blue")
            await asked.wait_status("ready")
            await asked.close()
        slow = Slow()
        with A2aServer(slow, versions=versions).running() as srv, trio.fail_after(SECONDS):
            cancelled = await orch.start_session(f"a2a:{srv.base}", cwd=tmp_path)
            await cancelled.inject("work forever")
            await _until(orch, lambda: any(c.text == "started"
                                           for c in _of(orch, cancelled.id, TextChunk)))
            await cancelled.cancel()
            await cancelled.wait_status("ready")
            await cancelled.close()
        with A2aServer(chunks, versions=versions, drop_after=3).running() as srv, \
                trio.fail_after(SECONDS):
            cut = await orch.start_session(f"a2a:{srv.base}", cwd=tmp_path)
            await cut.inject("a long story")
            await _until(orch, lambda: any(r.reason == "a2a_stream_dropped"
                                           for r in _of(orch, cut.id, AgentRaw)))
            assert await trio.to_thread.run_sync(srv.resubscribe_seen.wait, SECONDS)
            chunks.gate.set()
            await cut.wait_status("ready")
            await cut.close()
    envs = orch.log.read()
    assert "".join(c.text for c in _of(orch, cut.id, TextChunk)) == "".join(
        f"chunk{i} " for i in range(6))
    posts = [e.event.frame["method"] for e in envs if type(e.event) is FrameOut
             and isinstance(e.event.frame, dict) and "post" in e.event.frame]
    assert len(posts) >= 5  # sends, the answer, the cancel, the resubscribe
    result = check_sessions(group_sessions([envs]))
    assert result.sessions == 3 and not result.undecoded
    assert result.events == sum(1 for e in envs if e.stream)


def test_cap_run_against_an_sdk_server_then_check_with_it_gone(tmp_path):
    with A2aServer(Echo()).running() as srv:
        run = cap("run", "--agent", f"a2a:{srv.base}", "--task", "hi", "--next", "again",
                  "--headless", "--log", "a.caplog", cwd=tmp_path)
    assert_clean(run, 0, "echo: again")
    (recorded,) = sessions_of(tmp_path / "a.caplog").values()
    assert sum(type(e.event) is FrameIn for e in recorded) > 4
    checked = cap("replay", "a.caplog", "--check", cwd=tmp_path, env=NO_AGENTS)
    assert_clean(checked, 0, f"checked {len(recorded)} events of 1 session(s)")
    assert "no replay machine" not in checked.stdout + checked.stderr


PATCH = """
import sys
import msgspec
from trio_cap.actors.bindings.a2a import machine
from trio_cap.events.kinds import TextChunk
real = machine.A2aDriver.receive_frame
def patched(self, frame):
    return [msgspec.structs.replace(o, text=o.text.upper()) if type(o) is TextChunk else o
            for o in real(self, frame)]
machine.A2aDriver.receive_frame = patched
from trio_cap.actors.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_check_with_a_patched_a2a_machine_fails_at_its_first_text_readably(tmp_path):
    with A2aServer(Echo()).running() as srv:
        assert_clean(cap("run", "--agent", f"a2a:{srv.base}", "--task", "low", "--headless",
                         "--log", "a.caplog", cwd=tmp_path), 0)
    envs = read_log(tmp_path / "a.caplog")
    first_text = next(e for e in envs if type(e.event) is TextChunk)
    result = subprocess.run([sys.executable, "-c", PATCH, "replay", "a.caplog", "--check"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60,
                            env=NO_AGENTS)
    assert_clean(result, 1, f"first divergence at seq {first_text.seq}")
    assert json.dumps(first_text.event.text)[1:-1] in result.stdout
    assert json.dumps(first_text.event.text.upper())[1:-1] in result.stdout
    assert result.stderr.strip().splitlines() == [
        f"cap: replay check failed: session {first_text.stream} diverges at seq "
        f"{first_text.seq}"]


def test_cap_run_against_cap_serve_a2a_then_check(tmp_path):
    """trio-cap's own A2A server (cap-agent behind it, with the CAP extension: plans,
    thoughts, tool calls and permission asks as data parts) as the recorded peer."""
    serve = subprocess.Popen([*CAP, "serve", "a2a", "--listen", "127.0.0.1:0", "--agent",
                              "cap-agent", "--permissions", "allow", "--log", "srv.caplog"],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=WITH_CAP)
    try:
        shown, _, _ = select.select([serve.stdout], [], [], 60)  # bounded: it prints once up
        assert shown, "cap serve a2a printed no address within 60 s"
        line = serve.stdout.readline()  # type: ignore[union-attr]
        assert "listening on " in line, (line, serve.stderr.read())  # type: ignore[union-attr]
        url = line.split("listening on ")[1].split()[0]
        run = cap("run", "--agent", f"a2a:{url}", "--task",
                  "plan: a; b\nthink: first\nwrite f.txt: hi\nsome words", "--next", "run: ls",
                  "--permissions", "allow", "--headless", "--log", "a.caplog", cwd=tmp_path)
    finally:
        serve.terminate()
        serve.wait(timeout=30)
    assert_clean(run, 0)
    (recorded,) = sessions_of(tmp_path / "a.caplog").values()
    checked = cap("replay", "a.caplog", "--check", cwd=tmp_path, env=NO_AGENTS)
    assert_clean(checked, 0, f"checked {len(recorded)} events of 1 session(s)")
    assert "no replay machine" not in checked.stdout + checked.stderr
