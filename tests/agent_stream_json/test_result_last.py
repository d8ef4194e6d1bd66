"""A turn ends with its result (issue 10 §4), seen through the official Python SDK.

Real Claude Code writes nothing after a turn's ``result`` but the next turn;
``query()`` users take the last message as the outcome and a
``ClaudeSDKClient``'s ``receive_response()`` reads from where the previous
one stopped.  So every way a turn or a session can end is driven here —
stdin closing before the turn, after it, between turns of a stream; an error
turn, an interrupt, a budget refusal, a mode change between turns, a core
that dies — and checked for: the result is the last message, and the next
turn's messages start with its own ``system/init``.

Plain functions running their own asyncio loop, every wait bounded.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    query,
)
from claude_agent_sdk._errors import ResultError

LIMIT = 60.0


def run(coro) -> Any:
    return asyncio.run(asyncio.wait_for(coro, LIMIT))


async def allow(_tool: str, tool_input: dict, _context) -> Any:
    return PermissionResultAllow(updated_input=tool_input)


async def stream(*texts: str) -> AsyncIterator[dict[str, Any]]:
    for text in texts:
        yield {"type": "user", "message": {"role": "user", "content": text},
               "parent_tool_use_id": None, "session_id": ""}


async def collect(prompt: Any, opts: ClaudeAgentOptions) -> list[Any]:
    return [m async for m in query(prompt=prompt, options=opts)]


def assert_turn(messages: list[Any], subtype: str = "success") -> ResultMessage:
    """One turn's messages: its own init first, exactly one result, and it is last."""
    assert isinstance(messages[0], SystemMessage) and messages[0].subtype == "init", messages[0]
    assert isinstance(messages[-1], ResultMessage), messages[-1]
    assert sum(isinstance(m, ResultMessage) for m in messages) == 1
    assert messages[-1].subtype == subtype, messages[-1]
    return messages[-1]


@pytest.mark.parametrize("callback", [False, True], ids=["eof-before-turn", "eof-after-result"])
def test_query_ends_with_a_successful_result(cap_agent: str, tmp_path: Path, callback: bool):
    """Without a callback the SDK closes stdin right after the prompt; with one, only after
    the result: both ways the last message is the result."""
    opts = ClaudeAgentOptions(cli_path=cap_agent, cwd=str(tmp_path),
                              permission_mode="acceptEdits",
                              can_use_tool=allow if callback else None)
    messages = run(collect("write a.txt: x\nthink: done", opts))
    result = assert_turn(messages)
    assert not result.is_error and (tmp_path / "a.txt").read_text() == "x\n"
    # what used to trail the result (a workspace diff artifact made by this turn) is before it
    assert any(isinstance(m, SystemMessage) and m.subtype == "cap.artifact" for m in messages)


def test_a_multi_turn_stream_ends_with_the_last_turns_result(cap_agent: str, tmp_path: Path):
    opts = ClaudeAgentOptions(cli_path=cap_agent, cwd=str(tmp_path))
    messages = run(collect(stream("one", "fail: rate_limit", "three"), opts))
    starts = [i for i, m in enumerate(messages)
              if isinstance(m, SystemMessage) and m.subtype == "init"]
    turns = [messages[a:b] for a, b in zip(starts, [*starts[1:], len(messages)], strict=True)]
    for turn, subtype in zip(turns, ["success", "error_during_execution", "success"],
                             strict=True):
        assert_turn(turn, subtype)
    assert messages[-1].result.startswith('You said: "three"')


def test_an_error_result_is_last_and_the_exit_is_clean(cap_agent: str, tmp_path: Path):
    opts = ClaudeAgentOptions(cli_path=cap_agent, cwd=str(tmp_path))
    messages = run(collect("fail: rate_limit", opts))
    result = assert_turn(messages, "error_during_execution")
    assert result.is_error and result.errors == ["rate_limit: scripted failure: rate_limit"]


def test_a_core_that_dies_mid_turn_ends_with_its_error_result_then_exit_1(cap_agent: str,
                                                                        tmp_path: Path):
    """A bridged agent that cannot start: the turn's error result is the last frame and the
    agent exits 1, so the SDK raises ResultError carrying that result, not a bare crash."""
    opts = ClaudeAgentOptions(cli_path=cap_agent, cwd=str(tmp_path),
                              extra_args={"bridge": f"stream-json:{tmp_path / 'no-such-agent'}"})
    seen: list[Any] = []

    async def go() -> None:
        async for m in query(prompt="hello", options=opts):
            seen.append(m)

    with pytest.raises(ResultError) as caught:
        run(go())
    assert caught.value.exit_code == 1
    assert caught.value.data["type"] == "result" and caught.value.data["is_error"]
    assert "no-such-agent" in " ".join(caught.value.data["errors"])
    assert isinstance(seen[-1], ResultMessage) and seen[-1].is_error


BUDGET_SCRIPT = """
[pricing]
input_per_mtok = 0.0
output_per_mtok = 0.0

[[rule]]
match = "."
steps = [ { say = "spent" }, { usage = { cost_usd = 0.006 } } ]

[[rule]]
match = "^slow"
steps = [ { think = "working" }, { wait = 30 } ]
"""


def test_receive_response_never_starts_with_a_leftover(cap_agent: str, tmp_path: Path):
    """Every way a turn can end, one after another on one client; between turns the mode
    changes (which makes a status frame) — each response starts with its own init."""
    script = tmp_path / "script.toml"
    script.write_text(BUDGET_SCRIPT.replace('match = "."', 'match = "^(one|two|three)"'))

    async def conversation() -> list[list[Any]]:
        opts = ClaudeAgentOptions(cli_path=cap_agent, cwd=str(tmp_path), max_budget_usd=0.01,
                                  include_partial_messages=True,
                                  extra_args={"script": str(script)})
        turns: list[list[Any]] = []
        async with ClaudeSDKClient(options=opts) as client:
            await client.query("one")
            turns.append([m async for m in client.receive_response()])
            await client.set_permission_mode("acceptEdits")  # between turns
            await client.query("fail: rate_limit")
            turns.append([m async for m in client.receive_response()])
            await client.query("slow")
            first: list[Any] = []
            async for m in client.receive_messages():
                first.append(m)
                if isinstance(m, StreamEvent) and \
                        m.event.get("delta", {}).get("type") == "thinking_delta":
                    break
            await client.interrupt()
            turns.append(first + [m async for m in client.receive_response()])
            await client.set_model("m-2")  # between turns again
            for prompt in ("two", "three"):  # "three" starts over budget: refused
                await client.query(prompt)
                turns.append([m async for m in client.receive_response()])
        return turns

    one, failed, interrupted, two, refused = run(conversation())
    assert_turn(one)
    assert_turn(failed, "error_during_execution")
    assert_turn(interrupted, "error_during_execution")
    assert_turn(two)
    assert_turn(refused, "error_max_budget_usd")
    assert failed[0].data["permissionMode"] == "acceptEdits"
    assert two[0].data["model"] == "m-2"


def test_stdin_closing_after_the_last_result_adds_nothing(cap_agent: str, tmp_path: Path):
    """As a process: read up to the result, then close stdin — stdout ends, exit 0."""
    proc = subprocess.Popen([cap_agent, "--output-format", "stream-json", "--verbose",
                             "--input-format", "stream-json"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    assert proc.stdin and proc.stdout
    proc.stdin.write(b'{"type":"user","message":{"role":"user","content":"hi"}}\n')
    proc.stdin.flush()
    while json.loads(proc.stdout.readline())["type"] != "result":
        pass
    proc.stdin.close()
    try:
        rest = proc.stdout.read()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.stdout.close()
        assert proc.stderr is not None
        proc.stderr.close()
    assert rest == b""
