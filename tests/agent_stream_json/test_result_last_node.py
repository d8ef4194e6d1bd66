"""A turn ends with its result (issue 10 §4), seen through the official TypeScript SDK.

The same rule as ``test_result_last.py`` for the npm client: ``query()``'s last
message is its result whether stdin closed before the turn (no callback) or
after it (``canUseTool``), a multi-turn stream ends with the last turn's
result, an error turn's result is last, and after an interrupt the next turn
starts with its own ``system/init``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

SCRIPT = r"""
import { query } from %(sdk)s;
const [cli, cwd] = process.argv.slice(2);
const out = (run, m) => process.stdout.write(JSON.stringify({ run, m }) + "\n");
const base = { pathToClaudeCodeExecutable: cli, cwd };
const allow = async (tool, input) => ({ behavior: "allow", updatedInput: input });
async function* stream(...texts) {
  for (const t of texts) yield { type: "user", message: { role: "user", content: t },
                                 parent_tool_use_id: null, session_id: "" };
}
for await (const m of query({ prompt: "think: plain", options: base })) out("plain", m);
for await (const m of query({ prompt: "write a.txt: x", options: { ...base,
    permissionMode: "acceptEdits", canUseTool: allow } })) out("callback", m);
for await (const m of query({ prompt: stream("one", "fail: rate_limit", "three"),
    options: base })) out("stream", m);
for await (const m of query({ prompt: "fail: auth_error", options: base })) out("error", m);
// interrupt a running turn, then a second prompt on the same session
let release;
const gate = new Promise((r) => { release = r; });
async function* two() {
  yield { type: "user", message: { role: "user", content: "think: working\nwait 30" },
          parent_tool_use_id: null, session_id: "" };
  await gate;
  yield { type: "user", message: { role: "user", content: "hello again" },
          parent_tool_use_id: null, session_id: "" };
}
const q = query({ prompt: two(), options: { ...base, includePartialMessages: true } });
let interrupted = false;
for await (const m of q) {
  out("interrupt", m);
  if (!interrupted && m.type === "stream_event" && m.event?.delta?.type === "thinking_delta") {
    interrupted = true;
    await q.interrupt();
  }
  if (m.type === "result" && interrupted) release();
}
"""


def turns(messages: list[dict]) -> list[list[dict]]:
    starts = [i for i, m in enumerate(messages)
              if m["type"] == "system" and m["subtype"] == "init"]
    return [messages[a:b] for a, b in zip(starts, [*starts[1:], len(messages)], strict=True)]


def test_typescript_query_ends_every_turn_with_its_result(node_sdk: Path, cap_agent: str,
                                                          tmp_path: Path):
    script = tmp_path / "drive.mjs"
    script.write_text(SCRIPT % {"sdk": json.dumps(node_sdk.as_uri())})
    node = shutil.which("node")
    assert node, "node is required"
    done = subprocess.run([node, str(script), cap_agent, str(tmp_path)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    runs: dict[str, list[dict]] = {}
    for line in done.stdout.splitlines():
        record = json.loads(line)
        runs.setdefault(record["run"], []).append(record["m"])
    expected = {
        "plain": ["success"],
        "callback": ["success"],
        "stream": ["success", "error_during_execution", "success"],
        "error": ["error_during_execution"],
        "interrupt": ["error_during_execution", "success"],
    }
    for run, subtypes in expected.items():
        messages = runs[run]
        assert messages[-1]["type"] == "result", (run, messages[-1])
        got = []
        for turn in turns(messages):
            assert turn[-1]["type"] == "result", (run, turn[-1])  # nothing trails a result
            assert sum(m["type"] == "result" for m in turn) == 1, run
            got.append(turn[-1]["subtype"])
        assert got == subtypes, run
    assert (tmp_path / "a.txt").read_text() == "x\n"
    assert runs["interrupt"][-1]["result"].startswith('You said: "hello again"')
