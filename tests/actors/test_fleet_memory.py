"""An ended fleet run's detail leaves the live state (issue 16): a long-lived fleet face runs
one fleet per prompt, and its orchestrator must not keep every routed message, audit row
and ask of every run; the detail is folded back from the log on demand
(``Orchestrator.fleet_state``), equal to what a replay of the whole log gives."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import msgspec
import trio

from tests.fleet.helpers import copy_examples
from trio_cap.actors.fleet import load_fleet, run_fleet
from trio_cap.actors.ids import SequentialIds
from trio_cap.actors.orchestrator import Orchestrator, open_orchestrator
from trio_cap.events.log import FileEventLog
from trio_cap.events.projections import forget_finished
from trio_cap.events.replay import replay

RUNS = 3


def _texts(log: FileEventLog, name: str) -> list[str]:
    """Every routed message's text of one run: what its detail holds and its summary not."""
    return [env.event.text for env in log.read(1, f"fleet:{name}")
            if env.kind == "fleet.message.queued"]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.items():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _holds(orch: Orchestrator, text: str) -> bool:
    """Whether the live fleets projection holds ``text`` anywhere, whole or in part."""
    return any(text in s for s in _strings(msgspec.to_builtins(orch.state.fleets)))


async def _runs(tmp_path: Path, keep_last: bool) -> tuple[Orchestrator, FileEventLog]:
    fleet = load_fleet(copy_examples(tmp_path) / "pipeline.toml")
    log_path = tmp_path / "runs.caplog"
    async with open_orchestrator(log_path, ids=SequentialIds()) as orch:
        orch.keep_last_fleet = keep_last
        with trio.fail_after(120):
            for n in range(RUNS):  # each run's texts its own, to find them in the state
                task = f"Run {n}: write notes.md with a title, then have it reviewed."
                outcome = await run_fleet(orch, attrs.evolve(fleet, name=f"p{n}", task=task))
                assert outcome.completed, outcome.reason
            await orch.caught_up()
        return orch, FileEventLog(log_path, readonly=True)


async def test_ended_runs_keep_no_message_text_and_fold_back_as_a_replay(tmp_path):
    orch, log = await _runs(tmp_path, keep_last=False)
    rebuilt = replay(log).fleets.fleets
    for n in range(RUNS):
        name = f"p{n}"
        texts = _texts(log, name)
        assert len(texts) == 2 and all(t and not _holds(orch, t) for t in texts)
        live = orch.state.fleets.fleets[name]
        assert live.forgotten and not (live.messages or live.audit or live.asks or live.plan)
        # the summary stays: what `cap fleet status` prints first
        full = rebuilt[name]
        assert (live.status, live.spent_usd, live.budget_usd) == (
            "completed", full.spent_usd, full.budget_usd) and live.spent_usd > 0
        assert {m: v.status for m, v in live.members.items()} == {
            m: v.status for m, v in full.members.items()} == {
            "writer": "done", "reviewer": "done"}
        # the detail, folded from the log on demand, is what a replay of the whole log has
        again = orch.fleet_state(name)
        assert again is not None and not again.forgotten and len(again.messages) == 2
        assert msgspec.to_builtins(again) == msgspec.to_builtins(full)
    assert orch.fleet_state("never-ran") is None
    # forget_finished on a replay keeps what the live state kept
    assert msgspec.to_builtins(forget_finished(replay(log)).fleets) == \
        msgspec.to_builtins(orch.state.fleets)


async def test_by_default_only_the_last_ended_run_is_held(tmp_path):
    orch, log = await _runs(tmp_path, keep_last=True)
    for n in range(RUNS - 1):
        first, handed = _texts(log, f"p{n}")
        assert f"Run {n}:" in first and not _holds(orch, first)  # in no run's view
        view = msgspec.to_builtins(orch.state.fleets.fleets[f"p{n}"])
        assert not any(handed in s for s in _strings(view))
    last = f"p{RUNS - 1}"
    assert all(_holds(orch, t) for t in _texts(log, last))
    assert msgspec.to_builtins(orch.state.fleets.fleets[last]) == \
        msgspec.to_builtins(replay(log).fleets.fleets[last])


async def test_keep_finished_keeps_every_run(tmp_path):
    fleet = load_fleet(copy_examples(tmp_path) / "pipeline.toml")
    async with open_orchestrator(tmp_path / "k.caplog", ids=SequentialIds()) as orch:
        orch.keep_finished, orch.keep_last_fleet = True, False
        with trio.fail_after(120):
            for n in range(2):
                await run_fleet(orch, attrs.evolve(fleet, name=f"k{n}"))
            await orch.caught_up()
        live = msgspec.to_builtins(orch.state.fleets)
    assert live == msgspec.to_builtins(replay(FileEventLog(tmp_path / "k.caplog",
                                                           readonly=True)).fleets)
