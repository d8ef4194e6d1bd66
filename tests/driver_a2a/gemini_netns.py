"""One turn through Gemini's real A2A server, run inside a loopback-only network namespace.

``@google/gemini-cli-a2a-server`` listens on every interface and has no option
to bind 127.0.0.1 (peers.md), so ``test_gemini.py`` runs this script under
``unshare -n``: here ``lo`` is the only interface, and everything the turn needs
lives in the namespace with it — ``cap model serve`` (the scripted Gemini
endpoint), the A2A server (pointed at it), and ``cap run`` driving it through
trio-cap's A2A driver.  Prints one JSON line: the run's exit code, stdout,
stderr and the model server's request count.  Every child is ended on the way out.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAP = [sys.executable, "-m", "trio_cap.actors.cli"]
REPLY = "hello from the scripted model via A2A"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, seconds: float, log: Path) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-1500:]
            raise SystemExit(f"the A2A server exited with {proc.returncode}: {tail}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)  # a bounded poll for a port opened by another process
    raise SystemExit(f"the A2A server did not listen on {port} within {seconds:g} s")


def main() -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    sys.path.insert(0, str(ROOT))
    from trio_cap.actors.peers.env import isolated_env

    work = Path(tempfile.mkdtemp(prefix="cap-gemini-a2a-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    children: list[subprocess.Popen] = []
    try:
        model = subprocess.Popen([*CAP, "model", "serve", "--text", REPLY, "--record",
                                  str(work / "requests.jsonl")], env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
        children.append(model)
        line = model.stdout.readline() if model.stdout else ""
        if "listening on" not in line:
            raise SystemExit(f"cap model serve did not start: {line!r}")
        model_url = line.rsplit(" ", 1)[-1].strip()
        workdir = work / "workspace"
        workdir.mkdir()
        penv = isolated_env("gemini-a2a-server", model_url, home=work / "home",
                            workdir=workdir)
        port = free_port()
        server_env = {**penv.env, "CODER_AGENT_PORT": str(port),
                      "CODER_AGENT_WORKSPACE_PATH": str(workdir), "GEMINI_YOLO_MODE": "true"}
        server_log = open(work / "a2a-server.log", "wb")  # noqa: SIM115 - the child's
        server = subprocess.Popen(["gemini-a2a-server"], env=server_env, cwd=workdir,
                                  stdout=server_log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        children.append(server)
        wait_port(port, server, 90, work / "a2a-server.log")
        manifest = work / "gemini-a2a.toml"
        manifest.write_text(f'''
[agent]
name = "gemini-a2a"
binary = "gemini-a2a-server"
profiles = []
[startup]
command = ["gemini-a2a-server"]
ready_when = {{ pattern = "\\\\S" }}
[fast_path]
a2a_serve_at = "http://127.0.0.1:{port}"
x-a2a-metadata = {{ coderAgent = {{ kind = "agent-settings", workspacePath = "${{cwd}}" }} }}
[pty]
cols = 120
rows = 40
[capabilities]
streaming_output = true
''')
        run = subprocess.run([*CAP, "run", "--agent", str(manifest), "--binding", "a2a",
                              "--task", "say hello", "--headless", "--cwd", str(workdir),
                              "--log", str(work / "run.caplog")],
                             env=env, capture_output=True, text=True, timeout=240,
                             stdin=subprocess.DEVNULL)
        records = (work / "requests.jsonl").read_text().splitlines() \
            if (work / "requests.jsonl").exists() else []
        print(json.dumps({"returncode": run.returncode, "stdout": run.stdout,
                          "stderr": run.stderr, "model_requests": len(records),
                          "log": str(work / "run.caplog")}))
    finally:
        for child in reversed(children):
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGTERM)
                try:
                    child.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(child.pid, signal.SIGKILL)
                    child.wait()


if __name__ == "__main__":
    main()
