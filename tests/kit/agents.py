"""Tiny misbehaving "agents" for the kit's tests: real processes, written on the spot.

Each one starts a grandchild first (as a real agent's tool would) and writes
its pid to ``child.pid``, so a test can check that the *whole group* died, and
writes its own argv to ``argv.json``.  What it then does is its ``mode``:

* ``silent``: reads the first line and never answers (a hung ``initialize``);
* ``dies``: prints a reason on stderr and exits 3 — while the grandchild
  keeps stdout open, as orphaned tool processes do;
* ``refuses``: answers ``initialize`` with an error;
* ``ready``: answers ``initialize``, then reads stdin until EOF and exits 0;
* ``crash``: answers ``initialize``, reads one prompt, dies with a reason on
  stderr (exit 5) while the grandchild keeps stdout open;
* ``stubborn``: ignores SIGTERM (so does its grandchild) and sleeps;
* ``eof``: exits 0 at stdin EOF;
* ``stderr``: writes ~100 KiB to stderr, then a last line, and exits 3.
"""

from __future__ import annotations

import os
import select
import sys
from pathlib import Path

TEMPLATE = r'''
import json, os, signal, subprocess, sys
MODE = {mode!r}
HERE = {here!r}
if MODE == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def hang():
    while True:  # until a signal it does not ignore ends it
        signal.pause()


with open(os.path.join(HERE, "argv.json"), "w") as f:
    json.dump(sys.argv[1:], f)
child = subprocess.Popen([sys.executable, "-c", "import signal\nwhile True: signal.pause()"])
with open(os.path.join(HERE, "child.pid"), "w") as f:
    f.write(str(child.pid))
print("started", flush=True) if MODE in ("stubborn", "eof") else None
if MODE == "dies":
    sys.stderr.write("boom: no API key configured\n")
    sys.stderr.flush()
    os._exit(3)
if MODE == "stderr":
    sys.stderr.write("x" * 100_000 + "\nFATAL: out of cheese\n")
    sys.stderr.flush()
    os._exit(3)
if MODE in ("stubborn", "eof"):
    sys.stdin.read() if MODE == "eof" else hang()
    os._exit(0)
request = json.loads(sys.stdin.readline())
if MODE == "silent":
    hang()
if MODE == "refuses":
    body = {{"subtype": "error", "request_id": request["request_id"],
             "error": "unsupported client"}}
else:
    body = {{"subtype": "success", "request_id": request["request_id"],
             "response": {{"pid": os.getpid()}}}}
print(json.dumps({{"type": "control_response", "response": body}}), flush=True)
if MODE == "crash":
    sys.stdin.readline()
    sys.stderr.write("segfault in the model client\n")
    sys.stderr.flush()
    os._exit(5)
sys.stdin.read()
hang() if MODE == "refuses" else None
'''


def write_agent(where: Path, mode: str) -> list[str]:
    """The argv of a fake agent in ``mode``; its files go to ``where``."""
    where.mkdir(parents=True, exist_ok=True)
    script = where / f"agent_{mode}.py"
    script.write_text(TEMPLATE.format(mode=mode, here=str(where)))
    return [sys.executable, str(script)]


def child_pid(where: Path) -> int:
    return int((where / "child.pid").read_text())


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie nobody reaped yet counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = stat.rpartition(")")[2].split()[0]
    return state not in ("Z", "X")



def gone(pid: int, within: float = 30.0) -> bool:
    """Wait until ``pid`` has ended (it need not be our child): a pidfd turns readable."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        poller = select.poll()  # not select(): the fd may be above 1024 in a long test run
        poller.register(fd, select.POLLIN)
        ready = poller.poll(within * 1000)
    finally:
        os.close(fd)
    return bool(ready) or not alive(pid)
