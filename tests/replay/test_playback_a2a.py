"""A recorded A2A agent served on a port (``cap replay --serve a2a --listen``): the driver
gets the events the original a2a-sdk server gave it, with that server gone."""

from __future__ import annotations

import select
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import trio

from tests.driver_a2a.conftest import SECONDS
from tests.driver_a2a.servers import A2aServer, CapAsk, Chunks, Echo
from tests.replay.helpers import CAP, NO_AGENTS, assert_clean, cap, read_log
from trio_cap.actors.orchestrator import Session, open_orchestrator
from trio_cap.events.kinds import AgentRaw, AskUser, SessionCreated, TextChunk
from trio_cap.events.log import FileEventLog


def _agent_side(envs: list) -> list[Any]:
    return [msgspec.to_builtins(e.event) for e in envs
            if e.stream and (e.event.direction == "in" or e.kind == "agent.raw")]


def _session(envs: list) -> str:
    return next(e.stream for e in envs if type(e.event) is SessionCreated)


@contextmanager
def played_back(log: Path, session: str) -> Iterator[str]:
    """``cap replay LOG --agent SESSION --serve a2a --listen 127.0.0.1:0``; its URL."""
    proc = subprocess.Popen([*CAP, "replay", str(log), "--agent", session, "--serve", "a2a",
                             "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=NO_AGENTS)
    try:
        shown, _, _ = select.select([proc.stdout], [], [], 30)  # bounded: it prints at once
        assert shown, "cap replay --serve a2a printed no address within 30 s"
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert " at http://" in line, (line, proc.stderr.read())  # type: ignore[union-attr]
        yield line.split(" at ")[1].split()[0]
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
        assert "Traceback" not in proc.stderr.read()  # type: ignore[union-attr]


Scenario = Callable[[Session, Any], Awaitable[None]]


async def _run(url: str, log_path: Path, cwd: Path, scenario: Scenario) -> list:
    async with FileEventLog(log_path) as log, open_orchestrator(log, grace=5.0) as orch:
        orch.record = "frames"
        with trio.fail_after(SECONDS):
            session = await orch.start_session(f"a2a:{url}", cwd=cwd, human=True)
            await scenario(session, orch)
            await session.close()
    return read_log(log_path)


async def _ask_answered(session: Session, orch: Any) -> None:
    await session.inject("paint it")
    await session.wait_status("input_required")
    (ask,) = [e.event for e in orch.log.read(1, session.id) if type(e.event) is AskUser]
    await session.answer(ask.ask_id, "blue")
    await session.wait_status("ready")


async def _cut_stream(session: Session, orch: Any) -> None:
    await session.run_turn("a long story")


async def test_a_played_back_a2a_agent_with_an_ask_and_a_cut_stream(tmp_path: Path) -> None:
    for name, make, scenario, kw in (
            ("ask", CapAsk, _ask_answered, {"cap_extension": True}),
            ("cut", lambda: Chunks(8), _cut_stream, {"drop_after": 3})):
        with A2aServer(make(), **kw).running() as srv:
            original = await _run(srv.base, tmp_path / f"{name}.caplog", tmp_path, scenario)
        with played_back(tmp_path / f"{name}.caplog", _session(original)) as url:
            again = await _run(url, tmp_path / f"{name}-again.caplog", tmp_path, scenario)
        assert _agent_side(again) == _agent_side(original), name
        texts = "".join(e.event.text for e in again if type(e.event) is TextChunk)
        if name == "cut":
            assert texts == "".join(f"chunk{i} " for i in range(8))
            assert any(type(e.event) is AgentRaw and e.event.reason == "a2a_stream_dropped"
                       for e in again)
        else:
            assert texts == "I need to know a colour.colour is blue"


def test_cap_run_against_a_played_back_a2a_agent(tmp_path: Path) -> None:
    task = ["--task", "hi", "--next", "again", "--headless"]
    with A2aServer(Echo()).running() as srv:
        assert_clean(cap("run", "--agent", f"a2a:{srv.base}", *task, "--log", "o.caplog",
                         cwd=tmp_path), 0)
    original = read_log(tmp_path / "o.caplog")
    sid = _session(original)
    with played_back(tmp_path / "o.caplog", sid) as url:
        assert_clean(cap("run", "--agent", f"a2a:{url}", *task, "--log", "n.caplog",
                         cwd=tmp_path, env=NO_AGENTS), 0, "echo: again")
        # past the recording: a JSON-RPC error, not a hang
        late = cap("run", "--agent", f"a2a:{url}", "--task", "more", "--headless",
                   "--log", "late.caplog", cwd=tmp_path, env=NO_AGENTS)
    assert _agent_side(read_log(tmp_path / "n.caplog")) == _agent_side(original)
    assert late.returncode == 1 and "the recording ends before this request" in late.stdout
    assert sys  # the CLI runs on this interpreter


def test_cap_run_agent_replay_serves_a_recorded_a2a_agent_for_the_run(tmp_path: Path) -> None:
    """``cap run --agent replay:LOG#SESSION`` of a session recorded over a2a: the run serves
    the recording on 127.0.0.1 itself, drives it over A2A and stops it when it ends."""
    task = ["--task", "hi", "--next", "again", "--headless"]
    with A2aServer(Echo()).running() as srv:
        assert_clean(cap("run", "--agent", f"a2a:{srv.base}", *task, "--log", "o.caplog",
                         cwd=tmp_path), 0)
    original = read_log(tmp_path / "o.caplog")
    sid = _session(original)
    again = cap("run", "--agent", f"replay:o.caplog#{sid}", *task, "--log", "n.caplog",
                cwd=tmp_path, env=NO_AGENTS)
    assert_clean(again, 0, "echo: again")
    replayed = read_log(tmp_path / "n.caplog")
    assert _agent_side(replayed) == _agent_side(original)
    assert [e["text"] for e in _agent_side(replayed) if e["kind"] == "cap.text_chunk"] == [
        "echo: hi", "echo: again"]
    (starting,) = [e.event for e in replayed if e.kind == "session.starting"]
    assert starting.binding == "a2a"
    # the played-back agent's card named a 127.0.0.1 port of the run, now closed
    (card,) = [e.event for e in replayed if e.kind == "frame.in" and e.event.signal == "card"]
    url = card.frame["card_url"]
    assert url.startswith("http://127.0.0.1:") and not url.startswith("http://127.0.0.1:1/")
    port = int(url.split(":")[2].split("/")[0])
    import socket

    with socket.socket() as probe:  # torn down with the run: nothing listens there now
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    assert_clean(cap("run", "--agent", "replay:o.caplog#sess_nope", *task, cwd=tmp_path), 2,
                 "no session 'sess_nope'")
    with A2aServer(Echo()).running() as srv:
        assert_clean(cap("run", "--agent", f"a2a:{srv.base}", "--task", "hi", "--headless",
                         "--record", "off", "--log", "off.caplog", cwd=tmp_path), 0)
    unrecorded = _session(read_log(tmp_path / "off.caplog"))
    assert_clean(cap("run", "--agent", f"replay:off.caplog#{unrecorded}", *task, "--log",
                     "m.caplog", cwd=tmp_path, env=NO_AGENTS), 2, "nothing to play back")


def test_serve_a2a_failure_paths(tmp_path: Path) -> None:
    import socket

    with A2aServer(Echo()).running() as srv:
        assert_clean(cap("run", "--agent", f"a2a:{srv.base}", "--task", "hi", "--headless",
                         "--log", "o.caplog", cwd=tmp_path), 0)
    sid = _session(read_log(tmp_path / "o.caplog"))
    serve = ("replay", "o.caplog", "--agent", sid, "--serve", "a2a", "--listen")
    assert_clean(cap(*serve, "127.0.0.1:99999", cwd=tmp_path), 2, "out of range")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert_clean(cap(*serve, f"127.0.0.1:{port}", cwd=tmp_path), 2,
                     f"cannot listen on 127.0.0.1:{port}")
    assert_clean(cap("replay", "o.caplog", "--agent", sid, "--serve", "pty", cwd=tmp_path), 2,
                 "the session was recorded over a2a, not pty")
