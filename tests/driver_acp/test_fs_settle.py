"""A write the agent sent as its turn ended belongs to that turn's diff.

An agent may send its prompt response before our answer to its last
``fs/write_text_file``; the turn's diff then waits (bounded) for writes in flight.
The write is held in its worker thread by the test, so nothing here races the clock.
"""

from __future__ import annotations

import threading

import trio
import trio.testing

from trio_cap.actors.bindings.acp import frames as f
from trio_cap.actors.bindings.acp import fs_service


def held_writes(monkeypatch) -> threading.Event:
    release = threading.Event()
    real = fs_service.write_file

    def write_file(root: str, path: str, content: str) -> object:
        release.wait(30)
        return real(root, path, content)

    monkeypatch.setattr(fs_service, "write_file", write_file)
    return release


async def test_a_write_in_flight_as_the_turn_ends_is_in_that_turns_diff(tmp_path, monkeypatch):
    release = held_writes(monkeypatch)
    fs = fs_service.FsService(str(tmp_path))
    params = f.WriteTextFileParams(session_id="s", path=str(tmp_path / "a.txt"),
                                   content="hi from the agent\n")
    diffs = []

    async def turn_end() -> None:
        await fs.settled()
        diffs.append(fs.turn_diff(1))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fs.write, params)
        await trio.testing.wait_all_tasks_blocked()  # the write waits in its thread
        nursery.start_soon(turn_end)
        await trio.testing.wait_all_tasks_blocked()
        assert diffs == []  # the turn's end waits for the write …
        release.set()
    assert diffs[0] is not None and "+hi from the agent" in (diffs[0].content or "")


async def test_the_wait_for_writes_in_flight_is_bounded(tmp_path, monkeypatch, autojump_clock):
    release = held_writes(monkeypatch)
    fs = fs_service.FsService(str(tmp_path))
    params = f.WriteTextFileParams(session_id="s", path=str(tmp_path / "b.txt"), content="x")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(fs.write, params)
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        await fs.settled(bound=5.0)  # a write that never answers does not hold the turn
        assert trio.current_time() - start == 5.0
        release.set()
    await fs.settled()  # none in flight: at once
