"""The official TypeScript Claude Agent SDK (npm) drives ``cap-agent`` via
``pathToClaudeCodeExecutable``: flags in ``--flag=value`` form, the system
prompt in ``initialize`` rather than on the command line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.agent_stream_json.conftest import command_lines
from trio_cap.actors.bindings.stream_json.agent_transcript import TranscriptMirror

SCRIPT = r"""
import { query } from %(sdk)s;
const [cli, cwd] = process.argv.slice(2);
const out = (m) => process.stdout.write(JSON.stringify(m) + "\n");
// one: query() with the system prompt, model, turns and mode as options
for await (const m of query({ prompt: "write a.txt: from node\nthink: fine", options: {
    pathToClaudeCodeExecutable: cli, cwd, systemPrompt: "Answer like a pirate.",
    model: "cap-node", maxTurns: 7, permissionMode: "acceptEdits",
    includePartialMessages: true } })) out({ run: 1, m });
// two: canUseTool, which the SDK turns into --permission-prompt-tool=stdio
const asked = [];
for await (const m of query({ prompt: "run: echo original", options: {
    pathToClaudeCodeExecutable: cli, cwd,
    canUseTool: async (tool, input) => { asked.push([tool, input]);
        return { behavior: "allow", updatedInput: { command: "echo from-callback" } }; } } }))
  out({ run: 2, m });
out({ asked });
"""


def test_typescript_query_drives_cap_agent(node_sdk: Path, recording_agent, tmp_path):
    cli, argv_file = recording_agent
    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "drive.mjs"
    script.write_text(SCRIPT % {"sdk": json.dumps(node_sdk.as_uri())})
    node = shutil.which("node")
    assert node, "node is required"
    done = subprocess.run([node, str(script), cli, str(work)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    runs = {1: [], 2: []}
    for line in lines[:-1]:
        runs[line["run"]].append(line["m"])
    assert lines[-1] == {"asked": [["Bash", {"command": "echo original"}]]}

    # the command lines the SDK wrote: --flag=value, no --system-prompt
    one, two = command_lines(argv_file)
    assert {"--model=cap-node", "--max-turns=7", "--permission-mode=acceptEdits"} <= set(one)
    assert "--permission-prompt-tool=stdio" in two
    assert not any(a.startswith("--system-prompt") for a in one + two)

    first = runs[1]
    init = first[0]
    assert init["type"] == "system" and init["subtype"] == "init"
    assert (init["model"], init["permissionMode"]) == ("cap-node", "acceptEdits")
    (result,) = [m for m in first if m["type"] == "result"]
    assert result["subtype"] == "success" and result["is_error"] is False
    assert (work / "a.txt").read_text() == "from node\n"
    # the system prompt came in initialize and reached the brain (its first thought)
    thoughts = [b["thinking"] for m in first if m["type"] == "assistant"
                for b in m["message"]["content"] if b["type"] == "thinking"]
    assert thoughts == ["System prompt: Answer like a pirate.", "fine"]
    assert any(m["type"] == "stream_event" for m in first)
    # the config the agent logged, read back from its transcript diffs: --flag=value parsed
    assert first[-1]["type"] == "result"  # query()'s last message is its result
    mirror = TranscriptMirror()
    for m in first:
        mirror.feed(m)  # the TS SDK passes frames through whole: _meta included
    mirror.check_closed()
    config = mirror.envelopes[0].event
    assert (config.model, config.max_turns, config.system_prompt) == (
        "cap-node", 7, "Answer like a pirate.")

    second = runs[2]
    tool_results = [b for m in second if m["type"] == "user" and
                    isinstance(m["message"]["content"], list)
                    for b in m["message"]["content"] if b["type"] == "tool_result"]
    assert [b["content"] for b in tool_results] == ["from-callback\n"]
    assert second[-1]["type"] == "result" and second[-1]["subtype"] == "success"
    assert sum(m["type"] == "result" for m in second) == 1
