"""FleetCore fed CAP frames directly: the test plays the agent side (no wire), so the
face's rules — the plan, member-named text and questions, answers routed back to the
member that asked, the fleet's answer last — are checked on their own.  Waits are on
emitted events, bounded by ``fail_after``; nothing sleeps."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from tests.fleet.helpers import worktree
from tests.fleet_face.helpers import FAILS, git, make_fleet
from trio_cap.actors.agent.core import Emitted
from trio_cap.actors.bindings.base import TurnEnded
from trio_cap.actors.fleet import load_fleet
from trio_cap.actors.fleet.runner import CLOSE_GRACE
from trio_cap.actors.fleet_face import FLEET, FleetCore
from trio_cap.events.kinds import (
    AskUser,
    AskUserAnswer,
    Cancel,
    CapError,
    CapSessionReady,
    ContentBlock,
    Event,
    PermissionRequest,
    PermissionResponse,
    Plan,
    SessionConfig,
    TextChunk,
    ToolCallStart,
    Usage,
    UserInputInject,
)
from trio_cap.events.log.memory import MemoryEventLog

SECONDS = 60


class Client:
    def __init__(self) -> None:
        self.out: list[Emitted] = []
        self._changed = trio.Event()
        self.send, self.recv = trio.open_memory_channel[Event](64)

    async def emit(self, batch: Sequence[Emitted]) -> None:
        self.out.extend(batch)
        self._changed.set()
        self._changed = trio.Event()

    async def wait(self, predicate: Callable[[list[Emitted]], Any]) -> Any:
        while not (found := predicate(self.out)):
            await self._changed.wait()
        return found

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.out if type(e) is kind]


def spoken(chunks: list[TextChunk]) -> list[tuple[str, str]]:
    """(speaker, what it said) in order, from the ``[member] `` headers of the text."""
    out: list[tuple[str, str]] = []
    for part in "".join(c.text for c in chunks).split("\n\n"):
        if part.startswith("[") and "] " in part:
            who, _, what = part[1:].partition("] ")
            out.append((who, what.strip()))
        elif out and out[-1][0] != "":
            out.append(("", part.strip()))
        else:
            out[-1] = (out[-1][0], out[-1][1] + "\n\n" + part.strip())
    return out


async def _serve(tmp_path: Path, path: Path, answer: str | None = "allow_once"):
    client = Client()
    log = MemoryEventLog()
    core = FleetCore(load_fleet(path), client.emit, session_id="face-1", log=log)
    with trio.fail_after(SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(core.run, client.recv)
            await client.send.send(SessionConfig(cwd=str(tmp_path / "repo")))
            await client.send.send(UserInputInject(content=(ContentBlock(text="greet"),)))
            if answer is not None:
                request = await client.wait(lambda out: next(
                    (e for e in out if isinstance(e, PermissionRequest)), None))
                await client.send.send(PermissionResponse(req_id=request.req_id,
                                                          decision=answer))
            await client.wait(lambda out: any(isinstance(e, TurnEnded) for e in out))
            await client.send.aclose()
    return client, log


async def test_a_fan_out_join_fleet_answers_as_one_agent(tmp_path):
    client, log = await _serve(tmp_path, make_fleet(tmp_path))
    ready = client.out[0]
    assert isinstance(ready, CapSessionReady) and ready.meta[FLEET]["members"] == [
        "lead", "en", "fr"]
    # the permission request is en's, renumbered, with its absolute worktree path
    (request,) = client.of(PermissionRequest)
    en = worktree(tmp_path / "repo", "en")
    assert request.req_id == "perm_1" and request.meta["cap.member"] == "en"
    assert request.intent["path"] == str(en / "hello.txt")
    assert request.meta["acp"]["title"].startswith("en: Write")
    assert request.meta["cap.call_id"] == "en.call_1"
    # both workers ran, in their own worktrees
    assert (en / "hello.txt").read_text() == "hello\n"
    fr = worktree(tmp_path / "repo", "fr") / "hello.txt"
    assert fr.read_text() == "bonjour\n"
    said = spoken(client.of(TextChunk))
    assert said[0] == ("lead", "English greeting to en, French greeting to fr.")
    assert ("en", "Wrote 6 bytes to hello.txt.\nhello.txt says hello.") in said
    assert ("fr", "Wrote 8 bytes to hello.txt.\nhello.txt says bonjour.") in said
    assert said[-2:] == [("lead", "Both greetings are written."),
                         ("", "Both greetings are written.")]  # the answer, unnamed
    members = {e.meta["cap.member"] for e in client.of(ToolCallStart)}
    assert members == {"en", "fr"}
    # the plan: one entry per message a member was given, all completed at the end
    plans = client.of(Plan)
    assert len(plans) > 3
    assert [(e.content.split(":")[0], e.status) for e in plans[-1].entries] == [
        ("lead", "completed"), ("en", "completed"), ("fr", "completed"),
        ("lead", "completed")]
    # the turn ends with the fleet's answer, the usage, then the turn end — last
    *_, answer, usage, end = client.out
    assert isinstance(answer, TextChunk) and answer.text.strip() == (
        "Both greetings are written.")
    assert isinstance(usage, Usage) and end == TurnEnded("end_turn")
    kinds = {env.kind for env in log.read(1, "fleet:face")}
    assert {"fleet.started", "fleet.member", "fleet.route", "fleet.completed",
            "cap.artifact"} <= kinds
    assert git(tmp_path / "repo", "branch", "--list", "cap/face/*/en").strip()


async def test_a_denied_request_goes_back_to_the_member_that_asked(tmp_path):
    _client, log = await _serve(tmp_path, make_fleet(tmp_path), answer="deny")
    assert not (worktree(tmp_path / "repo", "en") / "hello.txt").exists()
    (decided,) = [env.event for env in log.read(1, "face.en") if env.kind ==
                  "permission.decided"]
    assert (decided.decision, decided.by) == ("deny", "human")


async def test_a_fleet_that_fails_ends_the_turn_with_an_error(tmp_path):
    client, _log = await _serve(tmp_path, make_fleet(tmp_path, fr_script=FAILS))
    (error,) = [e for e in client.of(CapError) if e.code == "fleet_failed"]
    assert "fr" in error.message
    assert client.out[-1] == TurnEnded("error")


async def test_a_cancel_stops_the_run_and_closes_its_sessions(tmp_path):
    client = Client()
    log = MemoryEventLog()
    core = FleetCore(load_fleet(make_fleet(tmp_path)), client.emit, session_id="face-1",
                     log=log)
    with trio.fail_after(SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(core.run, client.recv)
            await client.send.send(SessionConfig(cwd=str(tmp_path / "repo")))
            await client.send.send(UserInputInject(content=(ContentBlock(text="greet"),)))
            await client.wait(lambda out: any(isinstance(e, PermissionRequest) for e in out))
            await client.send.send(Cancel())
            await client.wait(lambda out: any(isinstance(e, TurnEnded) for e in out))
            await client.send.aclose()
    assert client.out[-1] == TurnEnded("cancelled")
    assert not (worktree(tmp_path / "repo", "en") / "hello.txt").exists()
    (ended,) = [env.event for env in log.read(1, "fleet:face") if env.kind == "fleet.failed"]
    assert ended.reason == "stopped before it finished"
    for member in ("lead", "en", "fr"):
        kinds = [env.kind for env in log.read(1, f"face.{member}")]
        assert kinds[-1] in ("session.completed", "session.cancelled"), (member, kinds[-1])


async def test_a_second_prompt_is_a_second_run_in_worktrees_of_its_own(tmp_path):
    """One prompt, one run: the next is named face-2 and works in its own worktrees and
    branches while the first run's are kept for review."""
    path = make_fleet(tmp_path, en_permissions="allow")
    client = Client()
    log = MemoryEventLog()
    core = FleetCore(load_fleet(path), client.emit, session_id="face-1", log=log)
    with trio.fail_after(SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(core.run, client.recv)
            await client.send.send(SessionConfig(cwd=str(tmp_path / "repo")))
            for n, prompt in enumerate(("greet", "again"), 1):
                await client.send.send(UserInputInject(content=(ContentBlock(text=prompt),)))
                await client.wait(lambda out, n=n: len(
                    [e for e in out if isinstance(e, TurnEnded)]) == n)
            await client.send.aclose()
    ends = [e for e in client.out if isinstance(e, TurnEnded)]
    assert ends == [TurnEnded("end_turn"), TurnEnded("end_turn")]
    starts = [(env.stream, env.event.task) for env in log.read(1) if env.kind == "fleet.started"]
    assert starts == [("fleet:face", "greet"), ("fleet:face-2", "again")]
    repo = tmp_path / "repo"
    assert (worktree(repo, "en", "face") / "hello.txt").read_text() == "hello\n"
    assert (worktree(repo, "en", "face-2") / "hello.txt").read_text() == "hello\n"
    assert len(git(repo, "branch", "--list", "cap/face*/*/en").splitlines()) == 2


async def test_a_members_own_plan_is_merged_into_the_faces_plan(tmp_path):
    planned = ('[[turn]]\nsteps = [ { plan = [ { content = "write hello.txt", status = '
               '"completed" }, "say bonjour" ] }, { write = "hello.txt", content = '
               '"bonjour\\n" }, { say = "hello.txt says bonjour." } ]\n')
    client, _log = await _serve(tmp_path, make_fleet(tmp_path, fr_script=planned))
    last = client.of(Plan)[-1].entries
    own = [(e.content, e.status, e.meta["cap.member"]) for e in last if e.id.startswith("fr.")]
    assert own == [("fr: write hello.txt", "completed", "fr"), ("fr: say bonjour", "pending",
                                                                "fr")]
    assert [e.content.split(":")[0] for e in last[:4]] == ["lead", "en", "fr", "lead"]


async def test_a_members_ask_is_asked_named_and_its_answer_goes_back(tmp_path):
    asking = ('[[turn]]\nsteps = [ { ask = "Tu or vous?", options = ["tu", "vous"] }, '
              '{ say = "bonjour, as asked." } ]\n')
    path = make_fleet(tmp_path, en_permissions="allow", fr_script=asking)
    client = Client()
    log = MemoryEventLog()
    core = FleetCore(load_fleet(path), client.emit, session_id="face-1", log=log)
    with trio.fail_after(SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(core.run, client.recv)
            await client.send.send(SessionConfig(cwd=str(tmp_path / "repo")))
            await client.send.send(UserInputInject(content=(ContentBlock(text="greet"),)))
            ask = await client.wait(lambda out: next(
                (e for e in out if isinstance(e, AskUser)), None))
            await client.send.send(AskUserAnswer(ask_id=ask.ask_id, value="vous"))
            await client.wait(lambda out: any(isinstance(e, TurnEnded) for e in out))
            await client.send.aclose()
    assert (ask.ask_id, ask.meta["cap.member"]) == ("ask_1", "fr")
    assert ask.prompt == "[fr] Tu or vous?"
    (answered,) = [env.event for env in log.read(1, "face.fr") if env.kind == "ask.answered"]
    assert (answered.value, answered.by) == ("vous", "human")
    assert client.out[-1] == TurnEnded("end_turn")


async def test_the_whole_core_cancelled_still_ends_the_fleet_stream_promptly(tmp_path):
    """SIGTERM of ``cap agent --fleet`` cancels the core and its orchestrator at once: the
    members end with the orchestrator, and the fleet's stream still gets its end — without
    waiting out the close grace for a projection that has stopped."""
    client = Client()
    log = MemoryEventLog()
    core = FleetCore(load_fleet(make_fleet(tmp_path)), client.emit, log=log)
    with trio.fail_after(SECONDS):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(core.run, client.recv)
            await client.send.send(SessionConfig(cwd=str(tmp_path / "repo")))
            await client.send.send(UserInputInject(content=(ContentBlock(text="greet"),)))
            await client.wait(lambda out: any(isinstance(e, PermissionRequest) for e in out))
            nursery.cancel_scope.cancel()
            stopping = trio.current_time()
    assert trio.current_time() - stopping < CLOSE_GRACE / 2
    kinds = [env.kind for env in log.read(1, "fleet:face")]
    assert kinds[-1] == "fleet.failed"
    for member in ("lead", "en", "fr"):
        assert [env.kind for env in log.read(1, f"face.{member}")][-1] == "session.cancelled"
