"""The official Python Claude Agent SDK drives ``cap-agent`` through ``cli_path``.

The SDK is asyncio-based, so each test is a plain function running its own
event loop (pytest-trio's trio_mode only takes over ``async def`` tests).
Every wait is bounded: a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
    query,
)

from tests.agent_stream_json.conftest import command_lines

LIMIT = 60.0


def run(coro) -> Any:
    return asyncio.run(asyncio.wait_for(coro, LIMIT))


def flag(argv: list[str], name: str) -> str | None:
    """A flag's value as the SDK spelt it: ``--name value`` or ``--name=value``."""
    for k, arg in enumerate(argv):
        if arg == name and k + 1 < len(argv):
            return argv[k + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1:]
    return None


def options(cli: str, cwd: Path, **extra: Any) -> ClaudeAgentOptions:
    return ClaudeAgentOptions(cli_path=cli, cwd=str(cwd), **extra)


async def collect(prompt: str, opts: ClaudeAgentOptions) -> list[Any]:
    return [m async for m in query(prompt=prompt, options=opts)]


def test_query_runs_a_turn_with_tools_and_ignores_the_cap_extensions(recording_agent, tmp_path):
    cli, argv_file = recording_agent
    work = tmp_path / "work"
    work.mkdir()
    messages = run(collect("write a.txt: hello\nrun: cat a.txt",
                           options(cli, work, permission_mode="acceptEdits", model="m-py",
                                   max_turns=9)))
    assert (work / "a.txt").read_text() == "hello\n"
    (argv,) = command_lines(argv_file)
    # the SDK's own command line, in either spelling it has used: `--flag value` (0.2.189)
    # or `--flag=value` (0.2.190, which also passes `--system-prompt=` empty)
    assert flag(argv, "--output-format") == "stream-json"
    assert flag(argv, "--input-format") == "stream-json"
    assert flag(argv, "--max-turns") == "9" and flag(argv, "--model") == "m-py"
    assert flag(argv, "--permission-mode") == "acceptEdits" and "-p" not in argv

    init = messages[0]
    assert isinstance(init, SystemMessage) and init.subtype == "init"
    assert init.data["claude_code_version"] and init.data["model"] == "m-py"
    assert init.data["cwd"] == str(work) and init.data["permissionMode"] == "acceptEdits"
    tool_uses = [b for m in messages if isinstance(m, AssistantMessage) for b in m.content
                 if isinstance(b, ToolUseBlock)]
    assert [(t.name, t.input) for t in tool_uses] == [
        ("Write", {"file_path": str(work / "a.txt"), "content": "hello\n"}),
        ("Bash", {"command": "cat a.txt"}),
    ]
    results = [m for m in messages if isinstance(m, ResultMessage)]
    assert len(results) == 1
    result = results[0]
    assert result.subtype == "success" and not result.is_error
    assert result.session_id == init.data["session_id"]
    # no can_use_tool callback, so no stdio prompts: Bash needed permission and was denied
    assert [d["tool_name"] for d in result.permission_denials] == ["Bash"]
    assert any(isinstance(m, SystemMessage) and m.subtype == "permission_denied"
               for m in messages)
    # the CAP extensions reach the caller as plain system messages and break nothing
    extensions = {m.subtype for m in messages if isinstance(m, SystemMessage)} - {
        "init", "permission_denied"}
    assert extensions == {"cap.artifact", "cap.transcript_diff"}  # the workspace diff, before
    assert messages[-1] is result  # nothing after the result, as with real Claude Code


def test_client_multi_turn_with_rewritten_and_denied_permissions(cap_agent, tmp_path):
    asked: list[tuple[str, dict]] = []

    async def can_use_tool(tool: str, tool_input: dict, _context) -> Any:
        asked.append((tool, tool_input))
        if tool == "Bash":
            return PermissionResultAllow(updated_input={"command": "echo rewritten"})
        return PermissionResultDeny(message="no writes today")

    async def conversation() -> list[list[Any]]:
        turns = []
        opts = options(cap_agent, tmp_path, can_use_tool=can_use_tool,
                       include_partial_messages=True)
        async with ClaudeSDKClient(options=opts) as client:
            for prompt in ("run: echo original", "write b.txt: nope", "thanks"):
                await client.query(prompt)
                turns.append([m async for m in client.receive_response()])
        return turns

    first, second, third = run(conversation())
    assert asked == [("Bash", {"command": "echo original"}),
                     ("Write", {"file_path": str(tmp_path / "b.txt"), "content": "nope\n"})]
    # allow with updatedInput: the rewritten command ran, the original did not
    (bash_result,) = [b for m in first if isinstance(m, UserMessage) for b in m.content
                      if isinstance(b, ToolResultBlock)]
    assert bash_result.content == "rewritten\n" and not bash_result.is_error
    assert "`echo rewritten` exited 0" in first[-1].result
    # deny: an error tool result, a permission denial, nothing written
    (write_result,) = [b for m in second if isinstance(m, UserMessage) for b in m.content
                       if isinstance(b, ToolResultBlock)]
    assert (write_result.content, write_result.is_error) == ("no writes today", True)
    assert [d["tool_name"] for d in second[-1].permission_denials] == ["Write"]
    assert not (tmp_path / "b.txt").exists()
    # partial messages: text deltas that add up to the assistant text
    deltas = "".join(m.event["delta"]["text"] for m in third if isinstance(m, StreamEvent)
                     and m.event.get("delta", {}).get("type") == "text_delta")
    (text,) = [b.text for m in third if isinstance(m, AssistantMessage) for b in m.content
               if isinstance(b, TextBlock)]
    assert deltas == text and text.startswith('You said: "thanks"')
    for turn in (first, second, third):
        assert isinstance(turn[-1], ResultMessage) and turn[-1].subtype == "success"
        assert sum(isinstance(m, ResultMessage) for m in turn) == 1
    assert [t[-1].total_cost_usd for t in (first, second, third)] == [0.0, 0.0, 0.0]


def test_interrupt_ends_the_running_turn_and_the_session_goes_on(cap_agent, tmp_path):
    async def conversation() -> tuple[list[Any], list[Any], float]:
        opts = options(cap_agent, tmp_path, include_partial_messages=True)
        async with ClaudeSDKClient(options=opts) as client:
            await client.query("think: working on it\nwait 30")
            started = time.monotonic()
            before: list[Any] = []
            async for message in client.receive_messages():
                before.append(message)
                if isinstance(message, StreamEvent) and \
                        message.event.get("delta", {}).get("type") == "thinking_delta":
                    break  # the turn is running: its thought streamed out before the wait
            await client.interrupt()
            before += [m async for m in client.receive_response()]
            elapsed = time.monotonic() - started
            await client.query("hello again")
            after = [m async for m in client.receive_response()]
        return before, after, elapsed

    before, after, elapsed = run(conversation())
    result = before[-1]
    assert isinstance(result, ResultMessage)
    assert result.subtype == "error_during_execution" and result.is_error
    assert elapsed < 20  # the 30 s wait did not run out
    notices = [b.text for m in before if isinstance(m, UserMessage) and isinstance(m.content, list)
               for b in m.content if isinstance(b, TextBlock)]
    assert notices == ["[Request interrupted by user]"]
    assert isinstance(after[-1], ResultMessage) and after[-1].subtype == "success"
    assert after[-1].result.startswith('You said: "hello again"')


BUDGET_SCRIPT = """
[pricing]
input_per_mtok = 0.0
output_per_mtok = 0.0

[[rule]]
match = "."
steps = [ { say = "spent" }, { usage = { cost_usd = 0.006 } } ]
"""


def test_a_turn_that_would_start_over_budget_is_refused(cap_agent, tmp_path):
    script = tmp_path / "script.toml"
    script.write_text(BUDGET_SCRIPT)

    async def conversation() -> list[ResultMessage]:
        opts = options(cap_agent, tmp_path, max_budget_usd=0.01,
                       extra_args={"script": str(script)})
        results = []
        async with ClaudeSDKClient(options=opts) as client:
            for prompt in ("one", "two", "three"):
                await client.query(prompt)
                results.append([m async for m in client.receive_response()][-1])
        return results

    one, two, three = run(conversation())
    assert (one.subtype, one.total_cost_usd) == ("success", 0.006)
    assert (two.subtype, two.total_cost_usd) == ("success", 0.012)  # started under budget
    assert three.subtype == "error_max_budget_usd" and three.is_error
    assert three.total_cost_usd == 0.012 and three.num_turns == 0
    assert three.errors and three.errors[0].startswith("cap_budget_exceeded")


def test_an_ask_is_answered_through_ask_user_question(cap_agent, tmp_path):
    seen: list[dict] = []

    async def can_use_tool(tool: str, tool_input: dict, _context) -> Any:
        assert tool == "AskUserQuestion"
        seen.append(tool_input)
        (question,) = tool_input["questions"]
        return PermissionResultAllow(updated_input={
            **tool_input, "answers": {question["question"]: question["options"][1]["label"]}})

    async def ask() -> list[Any]:
        opts = options(cap_agent, tmp_path, can_use_tool=can_use_tool)
        async with ClaudeSDKClient(options=opts) as client:
            await client.query("ask: Which database? [postgres|sqlite]")
            return [m async for m in client.receive_response()]

    messages = run(ask())
    assert [o["label"] for o in seen[0]["questions"][0]["options"]] == ["postgres", "sqlite"]
    assert messages[-1].result == "You answered sqlite."
