"""A fleet of three real agents over three bindings, on the scripted model server: Claude Code
over stream-json as the lead, opencode over ACP and aider over PTY as workers.

Each worker edits a file of its own in its own git worktree (opencode with its ``write``
tool, aider with a whole-file listing in its reply), once in a fan-out/join and once in a
pipeline; opencode's reply carries an ``@cap://lead …`` line that the fleet delivers to the
lead as a mediated message.  One model server answers all three: a rule tells them apart
by API (Claude Code speaks Anthropic's) and by system prompt (opencode names itself,
aider's asks for a *file listing*).  A missing or broken agent fails the test, never skips.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.fleet.helpers import git
from tests.harness.conftest import PeerFactory, model_server, peer  # noqa: F401 - fixtures
from trio_cap.actors.bindings.acp.connector import AcpConnector
from trio_cap.actors.bindings.pty.connector import PtyConnector
from trio_cap.actors.bindings.stream_json.connector import StreamJsonConnector
from trio_cap.actors.fleet import load_fleet, run_fleet
from trio_cap.actors.fleet.runner import FleetOutcome
from trio_cap.actors.model_server import ModelServer, script_from_obj
from trio_cap.actors.orchestrator import Orchestrator, open_orchestrator
from trio_cap.events.kinds import FleetMessageDelivered, FleetMessageQueued

pytestmark = pytest.mark.peers

SECONDS = 150
"""Bound on one whole fleet run: three real agents started one after another, five turns
(each run takes about 25 s on 2 cores)."""

MEMBERS = '''\
permissions = "allow"

[[session]]
id = "lead"
agent = "claude-code"
binding = "stream-json"

[[session]]
id = "oc"
agent = "opencode"
binding = "acp"

[[session]]
id = "ad"
agent = "aider"
binding = "pty"
'''

FAN = f'''\
name = "mixfan"
task = "zzsplit the greetings"
{MEMBERS}
[[route]]
fan_out = {{ from = "lead", to = ["oc", "ad"] }}
rounds = 1

[[route]]
join = {{ from = ["oc", "ad"], to = "lead" }}
'''

PIPE = f'''\
name = "mixpipe"
task = "zzchain the greetings"
{MEMBERS}
[[route]]
pipeline = ["lead", "oc", "ad"]
rounds = 1
'''

BINDINGS = {"lead": ("claude-code", "stream-json"), "oc": ("opencode", "acp"),
            "ad": ("aider", "pty")}


@pytest.fixture
async def mixed(peer: PeerFactory, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
                ) -> AsyncIterator[Orchestrator]:
    """An orchestrator whose three connectors start the pinned agents, each in its own
    isolated environment on the one scripted model server; PATH finds all three."""
    envs = {name: peer(name)[0] for name in ("claude-code", "opencode", "aider")}
    monkeypatch.setenv("PATH", os.pathsep.join(e.env["PATH"] for e in envs.values()))
    async with open_orchestrator(grace=10.0) as orch:
        orch.connectors["stream-json"] = StreamJsonConnector(env=envs["claude-code"].env,
                                                             inherit_env=False)
        orch.connectors["acp"] = AcpConnector(env=envs["opencode"].env, inherit_env=False)
        orch.connectors["pty"] = PtyConnector(env=envs["aider"].env, inherit_env=False)
        yield orch


def new_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q",
        "--allow-empty", "-m", "first")
    return repo


def tree(repo: Path, fleet: str, member: str) -> Path:
    return repo / ".cap-worktrees" / fleet / "r1" / member


def script(repo: Path, fleet: str, lead_says: dict[str, str]) -> Any:
    """The lead's replies by what its prompt contains; opencode writes ``oc.txt`` with its
    ``write`` tool and messages the lead; aider lists ``ad.txt`` whole (it applies that)."""
    oc_target = tree(repo, fleet, "oc") / "oc.txt"
    rules: list[dict[str, Any]] = [
        {"api": "anthropic", "match": pattern, "text": text}
        for pattern, text in lead_says.items()]
    rules += [
        {"api": "openai-chat", "system": "(?i)opencode", "match": "Result from",
         "text": "Writing oc.txt.",
         "tool_calls": [{"name": "write", "arguments": {"filePath": str(oc_target),
                                                        "content": "hello from opencode\n"}}],
         "then": {"text": "oc.txt is written.\n@cap://lead oc.txt holds the greeting"}},
        {"api": "openai-chat", "system": r"file listing", "match": "Result from",
         "text": "ad.txt\n```\nhello from aider\n```\n"},
    ]
    return script_from_obj({"rules": rules})


async def run(orch: Orchestrator, path: Path) -> FleetOutcome:
    fleet = load_fleet(path)
    outcome = None
    with trio.move_on_after(SECONDS):
        outcome = await run_fleet(orch, fleet, run_id="r1")
        await orch.caught_up()
    assert outcome is not None, f"no end in {SECONDS} s:\n{dump(orch, fleet.name)}"
    return outcome


def dump(orch: Orchestrator, fleet: str) -> str:
    """The run's events in short (but the agents' raw lines), for a failure's message."""
    streams = (f"{fleet}.", f"fleet:{fleet}")
    return "\n".join(f"{env.seq} {env.stream} {env.kind}: {str(env.event)[:240]}"
                     for env in orch.log.read(1)
                     if env.stream.startswith(streams) and env.kind != "agent.raw")


def check_members(orch: Orchestrator, repo: Path, fleet: str) -> None:
    """Each member on the agent and binding the file gave it (it became ready); each
    worker's file in its own worktree only, and in that worker's diff artifact."""
    for member, (agent, binding) in BINDINGS.items():
        stream = f"{fleet}.{member}"
        (created,) = [env.event for env in orch.log.read(1, stream)
                      if env.kind == "session.created"]
        assert (created.agent, created.binding) == (agent, binding), created
        assert [env for env in orch.log.read(1, stream) if env.kind == "cap.session.ready"]
    diffs = {env.event.meta["cap.member"]: env.event.content
             for env in orch.log.read(1, f"fleet:{fleet}") if env.kind == "cap.artifact"}
    for member, name, text in (("oc", "oc.txt", "hello from opencode"),
                               ("ad", "ad.txt", "hello from aider")):
        assert (tree(repo, fleet, member) / name).read_text() == text + "\n", dump(orch, fleet)
        assert f"+++ b/{name}" in diffs[member] and f"+{text}" in diffs[member], diffs
        others = [m for m in BINDINGS if m != member]
        assert not any((tree(repo, fleet, m) / name).exists() for m in others)
        assert not (repo / name).exists()
    assert "+++ b/" not in diffs["lead"], diffs["lead"]


def check_message(orch: Orchestrator, fleet: str) -> None:
    """opencode's ``@cap://lead`` line went to the lead through the fleet, and was taken."""
    events = [env for env in orch.log.read(1, f"fleet:{fleet}")]
    (queued,) = [env.event for env in events if type(env.event) is FleetMessageQueued
                 and env.event.via == "message"]
    assert (queued.source, queued.target) == ("oc", "lead"), queued
    assert queued.text == "Message from oc: oc.txt holds the greeting"
    (delivered,) = [env.event for env in events if type(env.event) is FleetMessageDelivered
                    and env.event.message_id == queued.message_id]
    (injected,) = [env for env in orch.log.read(delivered.input_seq, until=delivered.input_seq)]
    assert injected.stream == f"{fleet}.lead" and injected.event.text == queued.text
    assert [env for env in events if env.kind == "fleet.message.consumed"
            and env.event.message_id == queued.message_id]
    replies = [env.event.text for env in orch.log.read(1, f"{fleet}.lead")
               if env.kind == "cap.text_chunk" and env.cause == delivered.input_seq]
    assert "".join(replies) == "Noted: the greeting is in oc.txt.", dump(orch, fleet)


async def test_fan_out_and_join_of_claude_code_opencode_and_aider(
        mixed: Orchestrator, model_server: ModelServer, tmp_path: Path) -> None:  # noqa: F811
    orch = mixed
    repo = new_repo(tmp_path)
    (repo / "fleet.toml").write_text(FAN)
    model_server.set_script(script(repo, "mixfan", {
        "Message from oc": "Noted: the greeting is in oc.txt.",
        "zzsplit": "oc writes oc.txt, ad writes ad.txt.",
        "Result from oc": "Both greetings are in.",
    }))
    outcome = await run(orch, repo / "fleet.toml")
    assert outcome.completed, (outcome.reason, dump(orch, "mixfan"))
    check_members(orch, repo, "mixfan")
    check_message(orch, "mixfan")
    # each worker got the lead's whole result (the lead changed no file: no artifacts);
    # oc, who messaged the lead, also got the lead's reply; the lead got both results in
    # one input
    for member in ("oc", "ad"):
        got = [env.event.text for env in orch.log.read(1, f"mixfan.{member}")
               if env.kind == "input.injected"]
        reply = ["Message from lead (reply): Noted: the greeting is in oc.txt."]
        assert got == ["Result from lead:\noc writes oc.txt, ad writes ad.txt.",
                       *(reply if member == "oc" else [])], got
    joined = [env.event.text for env in orch.log.read(1, "mixfan.lead")
              if env.kind == "input.injected" and env.event.text.startswith("Result from")]
    assert len(joined) == 1 and "Result from oc:\n" in joined[0] \
        and "Result from ad:\n" in joined[0], joined
    assert "oc.txt is written." in joined[0] and "ad.txt" in joined[0].split(
        "Result from ad:\n")[1]
    (join_input,) = [env.seq for env in orch.log.read(1, "mixfan.lead")
                     if env.kind == "input.injected" and env.event.text == joined[0]]
    assert "".join(env.event.text for env in orch.log.read(1, "mixfan.lead")
                   if env.kind == "cap.text_chunk" and env.cause == join_input) \
        == "Both greetings are in."


async def test_pipeline_from_claude_code_through_opencode_to_aider(
        mixed: Orchestrator, model_server: ModelServer, tmp_path: Path) -> None:  # noqa: F811
    orch = mixed
    repo = new_repo(tmp_path)
    (repo / "fleet.toml").write_text(PIPE)
    model_server.set_script(script(repo, "mixpipe", {
        "Message from oc": "Noted: the greeting is in oc.txt.",
        "zzchain": "First oc.txt, then ad.txt.",
    }))
    outcome = await run(orch, repo / "fleet.toml")
    assert outcome.completed, (outcome.reason, dump(orch, "mixpipe"))
    check_members(orch, repo, "mixpipe")
    check_message(orch, "mixpipe")
    handed = [(env.event.source, env.event.target, env.event.text)
              for env in orch.log.read(1, "fleet:mixpipe")
              if type(env.event) is FleetMessageQueued and env.event.via == "pipeline"]
    assert [(s, t) for s, t, _ in handed] == [("lead", "oc"), ("oc", "ad")], handed
    assert handed[0][2] == "Result from lead:\nFirst oc.txt, then ad.txt."
    # opencode's whole final text, its directive line included, went down the pipeline,
    # then that turn's artifacts: its worktree's diff
    text, artifacts = handed[1][2].split("\n\nArtifacts of that turn:")
    assert text.startswith("Result from oc:\n"), handed
    assert "oc.txt is written." in text, handed
    assert text.endswith("\n@cap://lead oc.txt holds the greeting"), handed
    assert "- oc.diff: its worktree's diff" in artifacts and "+++ b/oc.txt" in artifacts, \
        artifacts
    got = [env.event.text for env in orch.log.read(1, "mixpipe.ad")
           if env.kind == "input.injected"]
    assert got == [handed[1][2]], got
