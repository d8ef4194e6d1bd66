"""trio-cap's own ACP driver drives trio-cap's own ACP agent, end to end, as a user runs it:
``cap run --agent 'acp:cap agent --cap-speak acp'``.

The driver advertises fs and terminals, so the agent's Write goes back to the driver as
``fs/write_text_file`` and its command as ``terminal/create`` (a plain command line as its
own argv, which the driver's risk rating can read), both vetted by ``--permissions allow``.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import trio

from tests.agent_acp.sdk_client import CAP


async def test_cap_run_drives_cap_agent_over_acp(tmp_path: Path) -> None:
    log = tmp_path / "run.caplog"
    task = "write e2e.txt: via the driver\nrun: cat e2e.txt"
    agent = "acp:" + shlex.join([CAP, "agent", "--cap-speak", "acp"])
    with trio.fail_after(120):
        result = await trio.run_process(
            [CAP, "run", "--agent", agent, "--permissions", "allow", "--task", task,
             "--log", str(log)], cwd=str(tmp_path), capture_stdout=True, capture_stderr=True,
            check=False, stdin=subprocess.DEVNULL)
    out = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 0, out
    assert (tmp_path / "e2e.txt").read_text() == "via the driver\n"
    assert "Wrote 15 bytes to e2e.txt." in out
    assert "`cat e2e.txt` exited 0:\nvia the driver" in out
    shown = await trio.run_process([CAP, "log", "show", "--json", str(log)],
                                   capture_stdout=True, check=False, stdin=subprocess.DEVNULL)
    ends = {e["call_id"]: e for e in map(json.loads, shown.stdout.decode().splitlines())
            if e["kind"] == "cap.tool_call.end"}
    # the driver saw the real diff of the write and ran the command in its own terminal
    (diff,) = ends["call_1"]["_meta"]["acp"]["diffs"]
    assert (diff["path"], diff["newText"]) == (str(tmp_path / "e2e.txt"), "via the driver\n")
    assert ends["call_2"]["_meta"]["acp"]["terminals"]


async def test_the_cap_agent_manifest_offers_acp_and_cap_run_uses_it(tmp_path: Path) -> None:
    bindir = str(Path(CAP).parent)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ.get('PATH', '')}",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}  # a fresh probe of --cap-manifest
    with trio.fail_after(120):
        result = await trio.run_process(
            [CAP, "run", "--agent", "cap-agent", "--binding", "acp", "--permissions", "allow",
             "--task", "write m.txt: over the manifest", "--log", str(tmp_path / "m.caplog")],
            cwd=str(tmp_path), env=env, capture_stdout=True, capture_stderr=True, check=False,
            stdin=subprocess.DEVNULL)
    out = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 0, out
    assert "via acp" in out
    assert (tmp_path / "m.txt").read_text() == "over the manifest\n"
