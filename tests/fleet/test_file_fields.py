"""What a fleet file says of the task and of each session reaches the sessions: the task
read from ``task_file``, and a member's ``model`` and ``role`` (its system prompt)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.fleet.helpers import EXAMPLES, cap, events, run_file
from trio_cap.events.log import FileEventLog

FLEET = """\
name = "fields"
task_file = "task.md"
worktrees = "dirs"
permissions = "allow"

[[session]]
id = "writer"
agent = "cap-agent"
binding = "inproc"
script = "scripts/writer.toml"
model = "m-writer"
role = "You write the notes."

[[session]]
id = "reviewer"
agent = "cap-agent"
binding = "inproc"
script = "scripts/reviewer.toml"

[[route]]
pipeline = ["writer", "reviewer"]
"""

TASK = "Write notes.md with a title.\nKeep it short: one line.\n"


async def test_the_task_file_the_model_and_the_role_reach_the_sessions(tmp_path: Path):
    shutil.copytree(EXAMPLES / "scripts", tmp_path / "scripts")
    (tmp_path / "task.md").write_text(TASK)
    (tmp_path / "fleet.toml").write_text(FLEET)
    outcome, log, _ = await run_file(tmp_path / "fleet.toml")
    assert outcome.completed, outcome
    # the first member's first input is the task file's text, whole
    (first, *_) = [env.event.text for env in events(log, "input.injected", "fields.writer")]
    assert first == TASK
    created = {env.stream: env.event for env in events(log, "session.created")}
    assert created["fields.writer"].model == "m-writer"
    assert created["fields.reviewer"].model is None  # the agent's own default
    configs = {env.stream: env.event for env in events(log, "cap.session.config")}
    assert configs["fields.writer"].system_prompt == "You write the notes."
    assert configs["fields.writer"].model == "m-writer"
    assert configs["fields.reviewer"].system_prompt is None


def test_cap_fleet_run_task_replaces_the_files_task(tmp_path: Path):
    """``--task TEXT`` on the command line wins over the file's ``task_file``: the first
    member's first input is that text, as a real process exiting 0."""
    shutil.copytree(EXAMPLES / "scripts", tmp_path / "scripts")
    (tmp_path / "task.md").write_text(TASK)
    (tmp_path / "fleet.toml").write_text(FLEET)
    done = cap("fleet", "run", "fleet.toml", "--task", "Write the outro.", "--headless",
               "--log", "run.caplog", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    log = FileEventLog(tmp_path / "run.caplog", readonly=True)
    (first, *_) = [env.event.text for env in events(log, "input.injected", "fields.writer")]
    assert first == "Write the outro."
