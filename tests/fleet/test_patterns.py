"""Each routing pattern end to end, from the example files, on trio-cap's scripted agent."""

from __future__ import annotations

from tests.fleet.helpers import copy_examples, events, run_file, worktree


def _inputs(log, stream: str) -> list[str]:
    return [env.event.text for env in events(log, "input.injected", stream)]


async def test_pipeline_hands_the_whole_final_text_to_the_next_stage(tmp_path):
    where = copy_examples(tmp_path)
    outcome, log, _ = await run_file(where / "pipeline.toml")
    assert outcome.completed, outcome.reason
    writer_text = "".join(env.event.text for env in events(log, "cap.text_chunk",
                                                           "pipeline.writer"))
    assert _inputs(log, "pipeline.writer") == [
        "Write notes.md with a title, then have it reviewed."]
    assert _inputs(log, "pipeline.reviewer") == [f"Result from writer:\n{writer_text}"]
    assert (worktree(where, "writer") / "notes.md").read_text() == "# Notes\n"
    assert not (worktree(where, "reviewer") / "notes.md").exists()
    assert [e.kind for e in log.read(1, "fleet:pipeline")][-1] == "fleet.completed"
    assert outcome.spent_usd == 0.015


async def test_the_same_pipeline_in_yaml(tmp_path):
    where = copy_examples(tmp_path)
    outcome, log, _ = await run_file(where / "pipeline.yaml")
    assert outcome.completed, outcome.reason
    assert _inputs(log, "pipeline-yaml.reviewer")[0].startswith("Result from writer:\n")


async def test_fan_out_then_join_back_to_the_lead(tmp_path):
    where = copy_examples(tmp_path)
    outcome, log, live = await run_file(where / "fan_out_join.toml")
    assert outcome.completed, outcome.reason
    lead_first = "English greeting to en, French greeting to fr."
    for worker in ("en", "fr"):
        assert _inputs(log, f"fanout.{worker}") == [f"Result from lead:\n{lead_first}"]
    assert (worktree(where, "en") / "hello.txt").read_text() == "hello\n"
    assert (worktree(where, "fr") / "hello.txt").read_text() == "bonjour\n"
    joined = _inputs(log, "fanout.lead")
    assert len(joined) == 2  # the task, then both results at once (rounds = 1: no second fan)
    assert "Result from en:\n" in joined[1] and "Result from fr:\n" in joined[1]
    assert "hello.txt says hello." in joined[1] and "hello.txt says bonjour." in joined[1]
    patterns = [env.event.pattern for env in events(log, "fleet.route")]
    assert patterns == ["fan_out", "join"]
    assert {m: v.status for m, v in live.fleets["fanout"].members.items()} == \
        {"lead": "done", "en": "done", "fr": "done"}


async def test_race_first_done_wins_and_the_others_are_cancelled(tmp_path):
    where = copy_examples(tmp_path)
    outcome, log, _ = await run_file(where / "race.toml")
    assert outcome.completed, outcome.reason
    (route,) = events(log, "fleet.route")
    assert route.event.sources == ("quick",) and route.event.cancelled == ("slow",)
    (cancel,) = events(log, "fleet.cancel")
    assert cancel.event.members == ("slow",) and cancel.event.reason == "race_lost"
    (slow_end,) = events(log, "session.turn_ended", "race.slow")
    assert slow_end.event.stop_reason == "cancelled"
    slow_text = "".join(e.event.text for e in events(log, "cap.text_chunk", "race.slow"))
    assert "41" not in slow_text  # cut before its answer
    assert _inputs(log, "race.judge") == ["Result from quick:\nThe answer is 42."]


async def test_by_subtask_dispatches_each_plan_entry_once_its_dependencies_completed(tmp_path):
    where = copy_examples(tmp_path)
    outcome, log, live = await run_file(where / "by_subtask.toml")
    assert outcome.completed, outcome.reason
    plans = events(log, "cap.plan", "fleet:subtasks")
    first, last = plans[0].event.entries, plans[-1].event.entries
    assert [(e.id, e.status) for e in first] == [
        ("draft", "pending"), ("check", "pending"), ("polish", "pending")]
    assert first[1].meta == {"cap.assigned_to": "cap://subtasks.checker",
                             "cap.depends_on": ["draft"]}
    assert [e.status for e in last] == ["completed"] * 3
    # each entry is delivered only after the one it depends on was consumed
    seq = {}
    for env in log.read(1, "fleet:subtasks"):
        if env.kind == "fleet.message.queued":
            seq[env.event.message_id] = env.event.entry
        if env.kind == "fleet.message.consumed":
            seq[seq[env.event.message_id] + ".done"] = env.seq
        if env.kind == "fleet.message.delivered":
            seq[seq[env.event.message_id] + ".delivered"] = env.seq
    assert seq["draft.done"] < seq["check.delivered"] < seq["check.done"] \
        < seq["polish.delivered"]
    assert _inputs(log, "subtasks.writer") == ["Subtask draft:\nwrite index.md",
                                               "Subtask polish:\npolish index.md"]
    assert (worktree(where, "writer") / "index.md").read_text() == "# The docs\n"
    assert [e.status for e in live.fleets["subtasks"].plan] == ["completed"] * 3


async def test_by_subtask_from_the_leads_own_plan(tmp_path):
    (tmp_path / "lead.toml").write_text(
        '[[turn]]\nsteps = [ { plan = ["w1: write a.txt: A", "w2: write b.txt: B", "tidy up"] },'
        ' { say = "planned" } ]\n')
    (tmp_path / "fleet.toml").write_text(
        'name = "dyn"\ntask = "go"\nworktrees = "dirs"\npermissions = "allow"\n'
        '[[session]]\nid = "lead"\nbinding = "inproc"\nscript = "lead.toml"\n'
        '[[session]]\nid = "w1"\nbinding = "inproc"\n'
        '[[session]]\nid = "w2"\nbinding = "inproc"\n'
        '[[route]]\nby_subtask = { from = "lead" }\n')
    outcome, log, _ = await run_file(tmp_path / "fleet.toml")
    assert outcome.completed, outcome.reason
    assert _inputs(log, "dyn.w1") == ["Subtask lead.p1:\nwrite a.txt: A"]
    assert _inputs(log, "dyn.w2") == ["Subtask lead.p2:\nwrite b.txt: B"]
    # the built-in command language ran each subtask: the files are in their own dirs
    assert (worktree(tmp_path, "w1") / "a.txt").read_text() == "A\n"
    assert (worktree(tmp_path, "w2") / "b.txt").read_text() == "B\n"
    last = events(log, "cap.plan", "fleet:dyn")[-1].event.entries
    assert [(e.id, e.status) for e in last] == [("lead.p1", "completed"),
                                                ("lead.p2", "completed")]
