"""kill -9 at random points, under every fsync policy: nothing acknowledged is ever lost.

Two targets: a small writer process on the FileEventLog API that prints each
acknowledged seq as ``append`` returns it (tests/faults/writer.py), and a
real ``cap run --json`` whose follower prints events only once the log has
acknowledged them.  Each file goes through several generations — write,
kill -9, reopen for writing (which may cut a torn final append and must
never refuse), check, write again — so recovery itself is also killed.  A third
test kills a writer of 24 MB appends, which leaves real torn final appends
(most kills of small appends land between writes: the kernel finishes them).

What this proves, exactly: after SIGKILL of the writing process, every event
it acknowledged is in the file with its seq and content, under ``always``,
``batch`` and ``never`` alike (the bytes of an acknowledged append are in the
kernel's page cache, which a killed process cannot lose).  It says nothing
about power loss, where only ``always`` keeps what it acknowledged.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from trio_cap.events.kinds import LogRecovered, TextChunk
from trio_cap.events.log import FileEventLog

ROOT = Path(__file__).resolve().parents[2]
WRITER = [sys.executable, "-m", "tests.faults.writer"]
CAP = [sys.executable, "-m", "trio_cap.actors.cli"]
POLICIES = ["always", "batch", "never"]
KILLS = {"writer": 4 * 3, "cap run": 3 * 2, "big": 8}  # 36 + 18 + 8 = 62 kills in all


def kill_after(cmd: list[str], lines_wanted: int, cwd: Path) -> list[str]:
    """Start ``cmd``, read ``lines_wanted`` stdout lines (0: none), kill -9, return all lines."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines: list[str] = []
    try:
        while len(lines) < lines_wanted:
            raw = proc.stdout.readline()
            if not raw:
                break
            lines.append(raw.decode())
    finally:
        proc.kill()
        proc.wait(timeout=20)
    rest, err = proc.stdout.read(), proc.stderr.read()  # the dead process wrote all it will
    proc.stdout.close()
    proc.stderr.close()
    assert b"Traceback" not in err, err.decode()
    lines.extend(rest.decode().splitlines(keepends=True))
    return [ln for ln in lines if ln.endswith("\n")]  # a cut last line was never complete


def reopen_and_read(path: Path, from_seq: int = 1) -> list:
    """Open for writing, as the next run would: it may cut a torn tail, never refuse."""

    async def read() -> list:
        log = await FileEventLog.open(path)
        envs = log.read(from_seq)
        await log.aclose()
        return envs

    return trio.run(read)


@pytest.mark.parametrize("policy", POLICIES)
def test_kill_9_of_a_log_writer_loses_no_acknowledged_event(tmp_path, policy):
    rng = random.Random(f"writer-{policy}")
    path = tmp_path / "w.caplog"
    acknowledged = 0
    missing = 0
    checked = 0  # seqs up to here were checked after an earlier kill
    for generation in range(KILLS["writer"]):
        wanted = rng.choice([0, 1, 2, 5, 30, 80])
        lines = kill_after([*WRITER, str(path), policy, str(generation)], wanted, ROOT)
        acked = [int(ln) for ln in lines if ln.strip().isdigit()]
        acknowledged = max([acknowledged, *acked])
        envs = reopen_and_read(path, checked + 1)
        missing += _missing(envs, checked + 1, acknowledged)
        checked = max(checked, acknowledged)
    missing += _missing(reopen_and_read(path), 1, acknowledged)  # later recoveries cut nothing
    print(f"writer, fsync={policy}: {KILLS['writer']} kills, {acknowledged} events "
          f"acknowledged, {missing} missing")
    assert missing == 0
    assert acknowledged > 100  # the kills landed while events were being acknowledged


def test_kill_9_inside_large_writes_leaves_only_a_torn_tail_that_is_cut(tmp_path):
    """24 MB appends, killed as the writer says a random append has begun: the kill lands
    while that append is encoded or written (the kernel stops a large write at a page
    when SIGKILL arrives)."""
    rng = random.Random("big")
    torn = 0
    for generation in range(KILLS["big"]):
        path = tmp_path / f"big{generation}.caplog"
        proc = subprocess.Popen([*WRITER, str(path), "never", "0", "big"], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        proc.stdout.readline()  # opened
        acked = [0]
        begun = 0
        target = 1 + rng.randrange(3)
        while begun < target:
            line = proc.stdout.readline().strip()
            if line == b"begin":
                begun += 1
            elif line.isdigit():
                acked.append(int(line))
        proc.kill()
        proc.wait(timeout=20)
        acked += [int(ln) for ln in proc.stdout.read().split() if ln.isdigit()]
        proc.stdout.close()
        reader = FileEventLog(path, readonly=True)
        torn += reader.recovered is not None
        reader.close()
        envs = reopen_and_read(path)  # never refused: the worst is a torn final append
        assert _missing(envs, 1, max(acked)) == 0
    print(f"large writes: {KILLS['big']} kills, {torn} left a torn final append, 0 missing")


def _missing(envs: list, from_seq: int, to_seq: int) -> int:
    by_seq = {e.seq: e.event for e in envs}
    for env in envs:  # whatever is there is what was written, at its seq
        assert _is_event(env.event, env.seq), env
    return sum(1 for seq in range(from_seq, to_seq + 1) if not _is_event(by_seq.get(seq), seq))


def _is_event(event, seq: int) -> bool:
    if isinstance(event, LogRecovered):
        return True  # a cut recorded by the reopening writer takes its own seq
    return isinstance(event, TextChunk) and event.text.startswith(f"event {seq} ")


@pytest.mark.parametrize("policy", POLICIES)
def test_kill_9_of_cap_run_loses_no_acknowledged_event(tmp_path, policy):
    rng = random.Random(f"cap-{policy}")
    (tmp_path / "burst.toml").write_text("[[turn]]\nsteps = [{burst = 500000, batch = 64}]\n")
    path = tmp_path / "run.caplog"
    printed: dict[int, dict] = {}
    for _ in range(KILLS["cap run"]):
        wanted = rng.choice([0, 3, 40, 400, 3000])
        lines = kill_after([*CAP, "run", "--json", "--headless", "--task", "go", "--script",
                            "burst.toml", "--log", str(path), "--fsync", policy], wanted, tmp_path)
        for ln in lines:
            obj = json.loads(ln)
            printed[obj["seq"]] = obj
        stored = {e.seq: e for e in reopen_and_read(path)}
        lost = [seq for seq, obj in printed.items()
                if seq not in stored or stored[seq].kind != obj["kind"]
                or stored[seq].stream != obj["stream"]]
        assert lost == [], f"acknowledged and printed, then lost: {lost[:10]}"
    print(f"cap run, fsync={policy}: {KILLS['cap run']} kills, {len(printed)} events "
          "printed (acknowledged), 0 missing")
    assert len(printed) > 100
