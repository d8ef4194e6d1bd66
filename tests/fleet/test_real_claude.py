"""A fleet with real Claude Code (the pinned peer, over stream-json, on the scripted model
server) as a worker: it edits a file in its own git worktree and its whole final text goes
down the pipeline to trio-cap's scripted agent."""

from __future__ import annotations

import pytest
import trio

from tests.driver_stream_json.conftest import claude  # noqa: F401 - the fixture
from tests.fleet.helpers import git, worktree
from tests.harness.conftest import peer  # noqa: F401 - the fixture
from trio_cap.actors.fleet import load_fleet, run_fleet
from trio_cap.actors.model_server import script_from_obj
from trio_cap.events.kinds import FleetMessageQueued

pytestmark = pytest.mark.peers

FLEET = '''\
name = "real"
task = "create hello.txt"
permissions = "allow"

[[session]]
id = "coder"
agent = "claude-code"
binding = "stream-json"

[[session]]
id = "reviewer"
binding = "inproc"
script = "reviewer.toml"

[[route]]
pipeline = ["coder", "reviewer"]
'''


async def test_claude_code_as_a_pipeline_worker_in_its_own_worktree(
        claude, model_server, tmp_path):  # noqa: F811
    orch, _workdir = claude
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q",
        "--allow-empty", "-m", "first")
    (repo / "fleet.toml").write_text(FLEET)
    (repo / "reviewer.toml").write_text('[[turn]]\nsteps = [ { say = "looks good" } ]\n')
    target = repo / ".cap-worktrees" / "real" / "r1" / "coder" / "hello.txt"
    model_server.set_script(script_from_obj({"rules": [
        {"match": "create hello", "text": "On it.",
         "tool_calls": [{"name": "Write", "arguments": {"file_path": str(target),
                                                         "content": "hi from claude\n"}}],
         "then": {"text": "Finished: hello.txt is written."}}]}))
    with trio.fail_after(240):
        outcome = await run_fleet(orch, load_fleet(repo / "fleet.toml"), run_id="r1")
    assert outcome.completed, outcome.reason
    (created,) = [env.event for env in orch.log.read(1, "real.coder")
                  if env.kind == "session.created"]
    assert (created.agent, created.binding) == ("claude-code", "stream-json")
    assert [env for env in orch.log.read(1, "real.coder") if env.kind == "cap.session.ready"]
    assert target.read_text() == "hi from claude\n"
    assert not (repo / "hello.txt").exists()
    handed = [env.event for env in orch.log.read(1, "fleet:real")
              if type(env.event) is FleetMessageQueued and env.event.target == "reviewer"]
    assert len(handed) == 1 and handed[0].text.startswith("Result from coder:\n")
    assert "Finished: hello.txt is written." in handed[0].text
    diffs = [env.event for env in orch.log.read(1, "fleet:real") if env.kind == "cap.artifact"]
    coder_diff = next(d for d in diffs if d.meta["cap.member"] == "coder")
    assert "+hi from claude" in coder_diff.content


LEAD_FLEET = '''\
name = "reallead"
task = "split the greeting work"
worktrees = "dirs"
permissions = "allow"

[[session]]
id = "lead"
agent = "claude-code"
binding = "stream-json"

[[session]]
id = "en"
binding = "inproc"
script = "en.toml"

[[session]]
id = "fr"
binding = "inproc"
script = "fr.toml"

[[route]]
fan_out = { from = "lead", to = ["en", "fr"] }
rounds = 1

[[route]]
join = { from = ["en", "fr"], to = "lead" }
'''


async def test_claude_code_as_the_lead_of_a_fan_out_and_join(
        claude, model_server, tmp_path):  # noqa: F811
    orch, _workdir = claude
    (tmp_path / "fleet.toml").write_text(LEAD_FLEET)
    for member, word in (("en", "hello"), ("fr", "bonjour")):
        (tmp_path / f"{member}.toml").write_text(
            f'[[turn]]\nsteps = [ {{ write = "hello.txt", content = "{word}\\n" }}, '
            f'{{ say = "wrote {word}" }} ]\n')
    model_server.set_script(script_from_obj({"turns": [
        {"text": "English to en, French to fr."},
        {"text": "Both greetings are in: merged."},
    ]}))
    with trio.fail_after(240):
        outcome = await run_fleet(orch, load_fleet(tmp_path / "fleet.toml"))
    assert outcome.completed, outcome.reason
    inputs = [env.event.text for env in orch.log.read(1, "reallead.lead")
              if env.kind == "input.injected"]
    assert inputs[0] == "split the greeting work"
    assert inputs[1] == ("Result from en:\nWrote 6 bytes to hello.txt.\nwrote hello\n\n"
                         "Result from fr:\nWrote 8 bytes to hello.txt.\nwrote bonjour")
    for member in ("en", "fr"):
        (got,) = [env.event.text for env in orch.log.read(1, f"reallead.{member}")
                  if env.kind == "input.injected"]
        assert got == "Result from lead:\nEnglish to en, French to fr."
    last_text = "".join(env.event.text for env in orch.log.read(1, "reallead.lead")
                        if env.kind == "cap.text_chunk" and env.cause == [
                            e.seq for e in orch.log.read(1, "reallead.lead")
                            if e.kind == "input.injected"][1])
    assert last_text == "Both greetings are in: merged."
    assert (worktree(tmp_path, "fr") / "hello.txt").read_text() == "bonjour\n"
