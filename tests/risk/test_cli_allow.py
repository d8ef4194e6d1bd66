"""`cap run --permissions allow` as a real process, over both bindings this build speaks.

Over stream-json the agent is cap-agent as a real subprocess, answering through the
stream-json driver; whatever it claims, the session's own rating decides.
"""

import json
import os
import sys
from pathlib import Path

import pytest
import trio

CAP = str(Path(sys.executable).with_name("cap"))
SECONDS = 60
COMMANDS = [
    "rm --recursive --force ../victim",
    "find ../victim -delete",
    "python3 -c 'import shutil; shutil.rmtree(\"../victim\")'",
    "'rm' -rf ../victim",
    "X=-rf; rm $X ../victim",
    "echo x > ../victim/precious.txt",
    "echo x > link/precious.txt",
]


@pytest.mark.parametrize("binding", ["inproc", "stream-json"])
async def test_cap_run_under_allow_refuses_deletes_and_writes_outside(tmp_path, binding):
    ws = tmp_path / "ws"
    victim = tmp_path / "victim"
    ws.mkdir()
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me")
    (ws / "link").symlink_to(victim)
    task = "\n".join(f"run: {c}" for c in COMMANDS) + "\nrun: echo fine > inside.txt"
    with trio.fail_after(SECONDS):
        result = await trio.run_process(
            [CAP, "run", "--binding", binding, "--permissions", "allow", "--cwd", str(ws),
             "--log", str(tmp_path / "run.caplog"), "--task", task],
            capture_stdout=True, capture_stderr=True, check=False,
            env={**os.environ, "TERM": "dumb",
                 "PATH": f"{Path(CAP).parent}{os.pathsep}{os.environ.get('PATH', '')}"},
        )
        shown = await trio.run_process(
            [CAP, "log", "show", "--json", str(tmp_path / "run.caplog")], capture_stdout=True,
            capture_stderr=True, check=False)
    out = result.stdout.decode() + result.stderr.decode()
    assert "Traceback" not in out
    assert (victim / "precious.txt").read_text() == "keep me"
    assert sorted(p.name for p in victim.iterdir()) == ["precious.txt"]
    assert (ws / "inside.txt").read_text() == "fine\n"  # allow still approves the contained one
    assert result.returncode == 0, out
    events = [json.loads(line) for line in shown.stdout.decode().splitlines()]
    decided = [e for e in events if e["kind"] == "permission.decided"]
    assert [(e["decision"], e["risk"]) for e in decided] == (
        [("deny", "high")] * len(COMMANDS) + [("allow_once", "medium")])
    (escaped,) = [e for e in events if e["kind"] == "permission.paths_resolved"
                  and e.get("outside")]
    assert escaped["outside"] == [f"{ws}/link/precious.txt"]
    # the agent rated the symlink write by its text (medium); the session saw where it goes
    (overruled,) = [e for e in decided if e["req_id"] == escaped["req_id"]]
    assert overruled["agent_risk"] == "medium"
    assert "agent said medium; trio-cap rates it high" in overruled["reason"]
