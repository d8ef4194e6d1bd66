"""A recorded agent played back as a live one: the driver gets the events the original gave."""

from __future__ import annotations

import subprocess

import pytest

from tests.replay.helpers import CAP, NO_AGENTS, assert_clean, cap, read_log
from trio_cap.actors.recording import frame_bytes
from trio_cap.events.kinds import CapSessionReady, FrameIn, FrameOut

TASK = "write f.txt: hi\nplan: a; b\nthink: hmm\nsome words"
NEXT = "run: ls"


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("playback")
    assert_clean(cap("run", "--binding", "stream-json", "--task", TASK, "--next", NEXT,
                     "--permissions", "allow", "--headless", "--log", "o.caplog", cwd=cwd), 0)
    envs = read_log(cwd / "o.caplog")
    return cwd, envs[1].stream, envs


def _agent_side(envs, session_id=None):
    """What the agent gave the driver: the agent's events (its own session id named once)."""
    ready = next(e.event.session_id for e in envs if type(e.event) is CapSessionReady)
    out = []
    for env in envs:
        ev = env.event
        if env.stream and (ev.direction == "in" or env.kind == "agent.raw"):
            text = repr(ev).replace(ready, "AGENT-SESSION")
            out.append(text)
    return out


def test_cap_run_against_the_played_back_agent_gets_the_same_events(original):
    cwd, sid, envs = original
    result = cap("run", "--agent", f"replay:o.caplog#{sid}", "--task", TASK, "--next", NEXT,
                 "--permissions", "allow", "--headless", "--log", "n.caplog", cwd=cwd,
                 env=NO_AGENTS)
    assert_clean(result, 0)
    again = read_log(cwd / "n.caplog")
    assert _agent_side(again) == _agent_side(envs)
    assert len(_agent_side(envs)) > 10


def test_the_serve_command_writes_the_recorded_bytes_in_answer(original):
    cwd, sid, envs = original
    frames = [e.event for e in envs if e.stream == sid and type(e.event) in (FrameIn, FrameOut)]
    stdin = b"".join(frame_bytes(f) or b"" for f in frames if type(f) is FrameOut)
    expected = b"".join(frame_bytes(f) or b"" for f in frames
                        if type(f) is FrameIn and not f.signal)
    played = subprocess.run([*CAP, "replay", "o.caplog", "--agent", sid, "--serve",
                             "stream-json"], cwd=cwd, input=stdin, capture_output=True,
                            timeout=60, env=NO_AGENTS)
    assert played.returncode == 0, played.stderr
    assert played.stdout == expected


def test_serve_failure_paths(original, tmp_path):
    cwd, sid, _ = original
    assert_clean(cap("replay", "o.caplog", "--agent", sid, "--serve", "grpc", cwd=cwd), 2,
                 "--serve grpc: this build plays a recorded agent back over stream-json, acp, "
                 "pty or a2a only")
    assert_clean(cap("replay", "o.caplog", "--agent", sid, "--serve", "a2a", cwd=cwd), 2,
                 "--serve a2a needs --listen HOST:PORT")
    assert_clean(cap("replay", "o.caplog", "--agent", sid, "--serve", "a2a", "--listen",
                     "127.0.0.1:0", cwd=cwd), 2, "the session was recorded over stream-json, "
                 "not a2a")
    assert_clean(cap("replay", "o.caplog", "--agent", sid, "--serve", "acp", cwd=cwd), 2,
                 "the session was recorded over stream-json, not acp")
    assert_clean(cap("run", "--agent", "replay:o.caplog#sess-nope", "--task", "hi",
                     "--headless", cwd=cwd), 2, "no session 'sess-nope' in")
    assert_clean(cap("replay", "o.caplog", "--agent", "sess-nope", "--serve", "stream-json",
                     cwd=cwd), 2, "no session 'sess-nope'")
    assert_clean(cap("run", "--task", "hi", "--headless", "--record", "off", "--log",
                     "off.caplog", cwd=tmp_path), 0)
    off_sid = read_log(tmp_path / "off.caplog")[1].stream
    assert_clean(cap("replay", "off.caplog", "--agent", off_sid, "--serve", "stream-json",
                     cwd=tmp_path), 2, "no recorded frames")
    assert_clean(cap("run", "--agent", "replay:missing.caplog#x", "--task", "hi",
                     "--headless", cwd=tmp_path), 2, "no log file 'missing.caplog'")
