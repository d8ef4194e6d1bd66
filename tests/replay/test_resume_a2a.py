"""``cap run --resume`` of a session driven over A2A, against trio-cap's own publisher
(``cap serve a2a`` as a real process, which outlives the killed run): a task still running
is re-attached (``SubscribeToTask``) instead of being sent again; after a finished task the
next input goes on in the recorded context."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.replay.helpers import (
    CAP,
    NO_AGENTS,
    WITH_CAP,
    assert_clean,
    cap,
    read_log,
    until_printed,
)
from tests.replay.test_resume_claude import cut_after
from trio_cap.actors.recording import frame_bytes
from trio_cap.events.kinds import (
    AgentRaw,
    FrameOut,
    RunResumed,
    SessionCompleted,
    SessionTurnEnded,
    TextChunk,
)

SLOW = "part one\nwait 20\npart two"
"""A turn the remote agent is still working on for 20 s (the scripted agent's wait)."""
SAID = 'You also said: "part one / part two".'


@contextmanager
def published(cwd: Path) -> Iterator[str]:
    """``cap serve a2a`` with trio-cap's scripted agent; its URL."""
    proc = subprocess.Popen([*CAP, "serve", "a2a", "--listen", "127.0.0.1:0", "--agent",
                             "cap-agent"], cwd=cwd, env=WITH_CAP, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        said = b""
        while b" listening on " not in said or not said.endswith(b"\n"):  # bounded
            shown, _, _ = select.select([proc.stdout], [], [], deadline - time.monotonic())
            assert shown, "cap serve a2a printed no address within 60 s"
            got = os.read(proc.stdout.fileno(), 65536)  # type: ignore[union-attr]
            assert got, f"cap serve a2a exited before it listened: {said!r}"
            said += got
        yield said.decode().split(" listening on ")[1].split()[0]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def posts(envs: list) -> list[dict]:
    """The JSON-RPC requests the driver posted (method, params)."""
    out = []
    for env in envs:
        ev = env.event
        data = frame_bytes(ev) if type(ev) is FrameOut else None
        if data and data.startswith(b"{") and b'"method"' in data:
            out.append(json.loads(data))
    return out


def context_of(message_post: dict) -> str:
    return message_post["params"]["message"].get("contextId", "")


def until_working(proc: subprocess.Popen) -> None:
    """Until the killed run's log holds the remote task reporting itself working."""
    until_printed(proc, lambda ev: ev["kind"] == "frame.in"
                  and "TASK_STATE_WORKING" in json.dumps(ev),
                  "the remote task reporting itself working (a frame.in)")


def test_a_killed_run_re_attaches_to_the_remote_task_still_running(tmp_path: Path) -> None:
    with published(tmp_path) as url:
        proc = subprocess.Popen([*CAP, "run", "--agent", f"a2a:{url}", "--task", SLOW,
                                 "--next", "second", "--headless", "--json", "--log",
                                 "run.caplog"],
                                cwd=tmp_path, env=WITH_CAP, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        until_working(proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        before = read_log(tmp_path / "run.caplog")
        resumed = cap("run", "--resume", "run.caplog", cwd=tmp_path)
    assert_clean(resumed, 0, "completed after 2 turn(s)")
    after = read_log(tmp_path / "run.caplog")
    assert after[: len(before)] == before
    (event,) = [e.event for e in after if type(e.event) is RunResumed]
    assert (event.how, event.rerun_turns) == ("resumed", (1,))
    assert "re-attaches to the remote task" in event.reason
    tail = after[len(before):]
    sent = posts(tail)
    # the re-run turn subscribed to the task instead of sending its input again …
    assert sent[0]["method"] == "SubscribeToTask"
    assert not any(e.event.reason == "a2a_resubscribe_refused" for e in tail
                   if type(e.event) is AgentRaw)  # … while it still ran
    recorded = next(r["result"]["task"]["contextId"] for r in _sse_results(before)
                    if "task" in r.get("result", {}))
    messages = [p for p in sent if p["method"] == "SendStreamingMessage"]
    assert [m["params"]["message"]["parts"][0]["text"] for m in messages] == ["second"]
    assert context_of(messages[0]) == recorded  # the next turn goes on in the same context
    text = "".join(e.event.text for e in after if type(e.event) is TextChunk)
    assert text.count(SAID) == 1 and text.startswith(SAID)  # the turn's reply, once
    assert [e.event.turn for e in after if type(e.event) is SessionTurnEnded] == [1, 2]
    assert [e.event.turns for e in after if type(e.event) is SessionCompleted] == [2]
    assert_clean(cap("replay", "run.caplog", "--check", cwd=tmp_path, env=NO_AGENTS), 0,
                 "identically")


def test_after_a_finished_task_the_next_input_goes_on_in_the_recorded_context(
        tmp_path: Path) -> None:
    with published(tmp_path) as url:
        assert_clean(cap("run", "--agent", f"a2a:{url}", "--task", "first", "--next",
                         "second", "--headless", "--log", "run.caplog", cwd=tmp_path), 0)
        envs = read_log(tmp_path / "run.caplog")
        ended = next(e for e in envs if type(e.event) is SessionTurnEnded)
        cut_after(tmp_path / "run.caplog", ended.seq)  # killed between the two turns
        before = read_log(tmp_path / "run.caplog")
        resumed = cap("run", "--resume", "run.caplog", cwd=tmp_path)
    assert_clean(resumed, 0, "completed after 2 turn(s)")
    after = read_log(tmp_path / "run.caplog")
    (event,) = [e.event for e in after if type(e.event) is RunResumed]
    assert (event.how, event.rerun_turns) == ("resumed", ())
    assert "keeps its context" in event.reason
    contexts = [e["result"]["task"]["contextId"] for e in _sse_results(before)
                if "task" in e.get("result", {})]
    (message,) = [p for p in posts(after[len(before):]) if p["method"] ==
                  "SendStreamingMessage"]
    assert message["params"]["message"]["parts"][0]["text"] == "second"
    assert context_of(message) == contexts[0]  # the recorded context, no task id
    assert not message["params"]["message"].get("taskId")
    text = "".join(e.event.text for e in after[len(before):] if type(e.event) is TextChunk)
    assert 'You said: "second"' in text
    assert_clean(cap("replay", "run.caplog", "--check", cwd=tmp_path, env=NO_AGENTS), 0,
                 "identically")


def _sse_results(envs: list) -> list[dict]:
    out = []
    for env in envs:
        ev = env.event
        if env.kind == "frame.in" and isinstance(ev.frame, dict) and ev.frame.get("in") == "sse":
            out += [json.loads(d) for d in ev.frame.get("datas") or ()]
    return out
