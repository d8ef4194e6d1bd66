"""The official TypeScript Claude Agent SDK (npm) drives ``cap-agent --fleet`` through
``pathToClaudeCodeExecutable``: its ``canUseTool`` callback is told which member asks
(``agentID``), and the last message of the turn is the result, the fleet's answer."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.agent_stream_json.conftest import node_sdk
from tests.fleet.helpers import worktree
from tests.fleet_face.helpers import make_fleet
from tests.fleet_face.test_python_sdk import wrapper

__all__ = ["node_sdk"]

SCRIPT = r"""
import { query } from %(sdk)s;
const [cli, cwd] = process.argv.slice(2);
const asked = [];
const messages = [];
for await (const m of query({ prompt: "Add a greeting in two languages", options: {
    pathToClaudeCodeExecutable: cli, cwd,
    canUseTool: async (tool, input, options) => {
        asked.push([tool, input.file_path, options.agentID]);
        return { behavior: "allow", updatedInput: input }; } } }))
  messages.push(m);
process.stdout.write(JSON.stringify({ asked, messages }) + "\n");
"""


def test_typescript_query_drives_a_fleet(node_sdk: Path, cap_agent: str, tmp_path: Path):
    fleet = make_fleet(tmp_path)
    cli = wrapper(cap_agent, fleet, tmp_path)
    repo = tmp_path / "repo"
    script = tmp_path / "drive.mjs"
    script.write_text(SCRIPT % {"sdk": json.dumps(node_sdk.as_uri())})
    node = shutil.which("node")
    assert node, "node is required"
    done = subprocess.run([node, str(script), cli, str(repo)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["asked"] == [["Write", str(worktree(repo, "en") / "hello.txt"), "en"]]
    last = out["messages"][-1]
    assert last["type"] == "result" and last["subtype"] == "success"
    assert last["result"] == "Both greetings are written."
    assert (worktree(repo, "fr") / "hello.txt").read_text() == "bonjour\n"
