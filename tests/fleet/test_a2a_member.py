"""An A2A agent as a fleet member (issue 14: every binding works in fleets): a published
trio-cap session (``cap serve a2a``'s publisher, in-process, on cap-agent) is the ``a2a:URL``
member of a pipeline and of a fan-out/join next to scripted members, and an agent on the
official a2a-sdk the middle stage of a pipeline.

The fleet drives it through the A2A driver like any other binding: the member is woken with
the routed message, its whole final text goes on to the next stage, and both routed messages
are in the fleet's audit trail.
"""

from __future__ import annotations

from pathlib import Path

from tests.driver_a2a.servers import A2aServer, Echo
from tests.fleet.helpers import EXAMPLES, events, run_file
from tests.serve_a2a.conftest import publish
from trio_cap.events.log import FileEventLog
from trio_cap.events.replay import replay

SCRIPTS = EXAMPLES / "scripts"


def _inputs(log: FileEventLog, stream: str) -> list[str]:
    return [env.event.text for env in events(log, "input.injected", stream)]


def _said(log: FileEventLog, stream: str) -> str:
    return "".join(env.event.text for env in events(log, "cap.text_chunk", stream))


def _one_line(text: str) -> str:
    """How cap-agent quotes a text of several lines back."""
    return text.replace("\n", " / ")


def _scripted(member: str, script: str) -> str:
    return f'[[session]]\nid = "{member}"\nbinding = "inproc"\nscript = "{SCRIPTS / script}"\n'


def _remote(member: str, url: str) -> str:
    return f'[[session]]\nid = "{member}"\nagent = "a2a:{url}"\n'


async def _run(tmp_path: Path, name: str, task: str, *parts: str):
    """(outcome, the log) of a fleet file of ``parts`` (sessions, then routes) run with
    every member allowed, in plain directories."""
    path = tmp_path / "fleet.toml"
    path.write_text(f'name = "{name}"\ntask = "{task}"\nworktrees = "dirs"\n'
                    'permissions = "allow"\n\n' + "\n".join(parts))
    outcome, log, _ = await run_file(path)
    return outcome, log


async def test_a_published_session_as_the_second_stage_of_a_pipeline(tmp_path: Path) -> None:
    async with publish(tmp_path) as pub:
        outcome, log = await _run(
            tmp_path, "a2apipe", "Write notes.md with a title.",
            _scripted("writer", "writer.toml"), _remote("remote", pub.url),
            '[[route]]\npipeline = ["writer", "remote"]\n')
        published = [e.event for sid in pub.orch.state.sessions.sessions
                     for e in pub.orch.log.read(1, sid)]
    assert outcome.completed, outcome.reason
    handed = f"Result from writer:\n{_said(log, 'a2apipe.writer')}"
    assert handed.endswith("I wrote notes.md with a title.")
    assert _inputs(log, "a2apipe.remote") == [handed]
    # the agent behind the publisher got the writer's whole text, and its answer came back
    assert [e.text for e in published if type(e).__name__ == "InputInjected"] == [handed]
    assert _said(log, "a2apipe.remote").startswith(f'You said: "{_one_line(handed)}".')
    (joined,) = events(log, "fleet.member", "fleet:a2apipe")[1:]
    assert joined.event.member == "remote"
    (queued,) = [e for e in events(log, "fleet.message.queued") if e.event.target == "remote"]
    assert (queued.event.source, queued.event.target, queued.event.text) == (
        "writer", "remote", handed)
    audit = replay(log).fleets.fleets["a2apipe"].audit
    assert [(r.kind, r.source, r.target) for r in audit
            if r.kind.startswith("fleet.message") and r.source == "writer"] == [
        ("fleet.message.queued", "writer", "remote"),
        ("fleet.message.delivered", "writer", "remote"),
        ("fleet.message.consumed", "writer", "remote")]
    assert {m: v.status for m, v in replay(log).fleets.fleets["a2apipe"].members.items()} == \
        {"writer": "done", "remote": "done"}


async def test_fan_out_to_a_published_session_and_a_scripted_one_then_join(
        tmp_path: Path) -> None:
    async with publish(tmp_path) as pub:
        outcome, log = await _run(
            tmp_path, "a2afan", "Add a greeting in two languages, one file each.",
            _scripted("lead", "lead.toml"), _remote("en", pub.url),
            _scripted("fr", "worker_fr.toml"),
            '[[route]]\nfan_out = { from = "lead", to = ["en", "fr"] }\nrounds = 1\n',
            '[[route]]\njoin = { from = ["en", "fr"], to = "lead" }\n')
    assert outcome.completed, outcome.reason
    lead_first = "English greeting to en, French greeting to fr."
    assert _inputs(log, "a2afan.en") == [f"Result from lead:\n{lead_first}"]
    remote_said = _said(log, "a2afan.en")
    assert remote_said.startswith(f'You said: "Result from lead: / {lead_first}".')
    joined = _inputs(log, "a2afan.lead")
    assert len(joined) == 2
    assert f"Result from en:\n{remote_said}" in joined[1]
    assert "Result from fr:\n" in joined[1]
    rebuilt = replay(log).fleets.fleets["a2afan"]
    routed = {(m.source, m.target, m.state) for m in rebuilt.messages.values()}
    assert routed == {("fleet", "lead", "consumed"), ("lead", "en", "consumed"),
                      ("lead", "fr", "consumed"), ("en,fr", "lead", "consumed")}
    assert any(r.kind == "fleet.message.queued" and r.source == "en,fr" and r.target == "lead"
               and remote_said in r.text for r in rebuilt.audit)


async def test_an_agent_on_the_official_a2a_sdk_in_the_middle_of_a_pipeline(
        tmp_path: Path) -> None:
    """An ordinary a2a-sdk ``AgentExecutor`` (no CAP extension) between two scripted stages:
    its artifact text is its whole result, handed on to the next stage."""
    executor = Echo()
    with A2aServer(executor).running() as srv:
        outcome, log = await _run(
            tmp_path, "sdkpipe", "Write notes.md with a title.",
            _scripted("writer", "writer.toml"), _remote("sdk", srv.base),
            _scripted("reviewer", "reviewer.toml"),
            '[[route]]\npipeline = ["writer", "sdk", "reviewer"]\n')
    assert outcome.completed, outcome.reason
    handed = f"Result from writer:\n{_said(log, 'sdkpipe.writer')}"
    assert _inputs(log, "sdkpipe.sdk") == [handed]
    assert [c.get_user_input() for c in executor.contexts] == [handed]
    assert _said(log, "sdkpipe.sdk") == f"echo: {handed}"
    (to_reviewer,) = _inputs(log, "sdkpipe.reviewer")  # (then the turn's artifacts, if listed)
    assert to_reviewer.startswith(f"Result from sdk:\necho: {handed}")
    rebuilt = replay(log).fleets.fleets["sdkpipe"]
    assert [(m.source, m.target, m.state) for m in rebuilt.messages.values()] == [
        ("fleet", "writer", "consumed"), ("writer", "sdk", "consumed"),
        ("sdk", "reviewer", "consumed")]
    assert {m: v.status for m, v in rebuilt.members.items()} == {
        "writer": "done", "sdk": "done", "reviewer": "done"}
