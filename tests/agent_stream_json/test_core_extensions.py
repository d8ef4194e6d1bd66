"""What the stream-json mode needed from AgentCore: rewritten inputs, max_turns, the system
prompt, a cancel that beats its turn's start, turn hooks — and the workspace diff hook."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import trio
import trio.testing

from trio_cap.actors.agent.brain import ScriptedBrain
from trio_cap.actors.agent.core import AgentCore, Emitted
from trio_cap.actors.agent.workspace import WorkspaceDiffs
from trio_cap.actors.bindings.base import UPDATED_INPUT, TurnEnded
from trio_cap.events.kinds import (
    Artifact,
    Cancel,
    ContentBlock,
    Event,
    PermissionRequest,
    PermissionResponse,
    SessionConfig,
    Thought,
    ToolCallEnd,
    Usage,
    UserInputInject,
)


def inject(text: str) -> UserInputInject:
    return UserInputInject(content=(ContentBlock(text=text),))


class Driver:
    """Feeds frames to a core and answers its permission requests with ``answer``."""

    def __init__(self, config: SessionConfig, answer=None, hooks=None) -> None:
        self.events: list[Emitted] = []
        self.send, receive = trio.open_memory_channel[Event](64)
        self.answer = answer
        self.core = AgentCore(ScriptedBrain(), self.emit, turn_hooks=hooks)
        self.receive = receive
        self.config = config
        self.turn_ended = trio.Event()

    async def emit(self, batch: Sequence[Emitted]) -> None:
        self.events.extend(batch)
        for item in batch:
            if isinstance(item, PermissionRequest) and self.answer is not None:
                await self.send.send(self.answer(item))
            if isinstance(item, TurnEnded):
                self.turn_ended.set()

    async def turn(self, text: str) -> list[Emitted]:
        start = len(self.events)
        self.turn_ended = trio.Event()
        await self.send.send(inject(text))
        await self.turn_ended.wait()
        return self.events[start:]


async def serve(driver: Driver, *texts: str) -> list[list[Emitted]]:
    turns = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(driver.core.run, driver.receive)
        await driver.send.send(driver.config)
        for text in texts:
            turns.append(await driver.turn(text))
        nursery.cancel_scope.cancel()
    return turns


async def test_an_allow_with_an_updated_input_runs_that_input(tmp_path):
    def rewrite(req: PermissionRequest) -> PermissionResponse:
        return PermissionResponse(req_id=req.req_id, decision="allow_once",
                                  meta={UPDATED_INPUT: {"command": "echo rewritten"}})

    driver = Driver(SessionConfig(cwd=str(tmp_path)), rewrite)
    (turn,) = await serve(driver, "run: echo original")
    (end,) = [e for e in turn if isinstance(e, ToolCallEnd)]
    assert end.output == "rewritten\n"
    assert "`echo rewritten` exited 0" in "".join(getattr(e, "text", "") for e in turn)


async def test_a_rewritten_input_missing_fields_is_a_tool_error_not_a_crash(tmp_path):
    def broken(req: PermissionRequest) -> PermissionResponse:
        return PermissionResponse(req_id=req.req_id, decision="allow_once",
                                  meta={UPDATED_INPUT: {"nothing": 1}})

    def wrong_type(req: PermissionRequest) -> PermissionResponse:
        return PermissionResponse(req_id=req.req_id, decision="allow_once",
                                  meta={UPDATED_INPUT: {"path": "a.txt", "content": None}})

    for answer in (broken, wrong_type):
        driver = Driver(SessionConfig(cwd=str(tmp_path)), answer)
        (turn,) = await serve(driver, "write a.txt: x")
        (end,) = [e for e in turn if isinstance(e, ToolCallEnd)]
        assert end.is_error and "invalid input for Write" in end.output
        assert not (tmp_path / "a.txt").exists()


async def test_max_turns_stops_after_that_many_tool_results(tmp_path):
    driver = Driver(SessionConfig(cwd=str(tmp_path), max_turns=2, permission_mode="none"))
    (turn,) = await serve(driver, "write a: 1\nwrite b: 2\nwrite c: 3")
    assert [e.call_id for e in turn if isinstance(e, ToolCallEnd)] == ["call_1", "call_2"]
    assert turn[-1] == TurnEnded("tool_use")
    assert not (tmp_path / "c").exists()


async def test_the_system_prompt_shows_as_the_first_turns_thought(tmp_path):
    driver = Driver(SessionConfig(cwd=str(tmp_path), system_prompt="Be brief."))
    first, second = await serve(driver, "hi", "again")
    assert [e.text for e in first if isinstance(e, Thought)] == ["System prompt: Be brief."]
    assert [e for e in second if isinstance(e, Thought)] == []


async def test_a_cancel_that_arrives_before_its_turn_starts_still_cancels_it(tmp_path):
    started = trio.Event()
    release = trio.Event()

    class SlowHook:
        async def before_turn(self, cwd: str, turn: int) -> None:
            started.set()
            await release.wait()

        async def after_turn(self, cwd: str, turn: int) -> list[Event]:
            return []

    driver = Driver(SessionConfig(cwd=str(tmp_path), permission_mode="none"), hooks=SlowHook())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(driver.core.run, driver.receive)
        await driver.send.send(driver.config)
        await driver.send.send(inject("write a.txt: x"))
        await started.wait()  # the turn is between its prompt and its start
        await driver.send.send(Cancel(scope="current_turn"))
        await trio.testing.wait_all_tasks_blocked()
        release.set()
        await driver.turn_ended.wait()
        nursery.cancel_scope.cancel()
    assert driver.events[-1] == TurnEnded("cancelled")
    assert [e.stop_reason for e in driver.events if isinstance(e, Usage)] == ["cancelled"]
    assert not (tmp_path / "a.txt").exists()


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


async def test_turn_hooks_add_the_workspace_diff_before_the_usage(tmp_path):
    hooks = WorkspaceDiffs()
    driver = Driver(SessionConfig(cwd=str(tmp_path), permission_mode="none"), hooks=hooks)
    first, second = await serve(driver, "write a.txt: x", "hello")
    hooks.close()
    kinds = [type(e).__name__ for e in first]
    assert kinds[-3:] == ["Artifact", "Usage", "TurnEnded"]
    assert not [e for e in second if isinstance(e, Artifact)]


async def test_without_git_the_snapshot_diff_has_gits_layout(tmp_path):
    repo = tmp_path / "r"
    repo.mkdir()
    (repo / "a.txt").write_text("1\n2\n3\n")
    (repo / "b.txt").write_text("b\n")
    (repo / "gone.txt").write_text("bye\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "s")
    hooks = WorkspaceDiffs(use_git=False, exclude=[str(repo / "agent.caplog")])
    await hooks.before_turn(str(repo), 1)
    (repo / "a.txt").write_text("1\ntwo\n3\n")
    (repo / "b.txt").write_text("b\nc\n")
    (repo / "gone.txt").unlink()
    (repo / "agent.caplog").write_bytes(b"\0log")
    (artifact,) = await hooks.after_turn(str(repo), 1)
    assert artifact.content == _git(repo, "diff")


async def test_the_agents_own_log_and_run_state_stay_out_of_the_diff(tmp_path):
    hooks = WorkspaceDiffs(exclude=[str(tmp_path / "agent.caplog")])
    await hooks.before_turn(str(tmp_path), 1)
    (tmp_path / "agent.caplog").write_bytes(b"x")
    (tmp_path / ".cap" / "runs").mkdir(parents=True)
    (tmp_path / ".cap" / "runs" / "r.caplog").write_bytes(b"x")
    (tmp_path / "real.txt").write_text("r\n")
    (artifact,) = await hooks.after_turn(str(tmp_path), 1)
    hooks.close()
    assert artifact.content.count("diff --git") == 1 and "real.txt" in artifact.content
