"""CAP extensions seen by an official client: transcript diffs and the workspace diff artifact."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, SystemMessage, query

from trio_cap.actors.bindings.stream_json.agent_transcript import (
    TranscriptGap,
    TranscriptMirror,
    join_fragments,
)
from trio_cap.events.log import FileEventLog

LIMIT = 60.0


async def prompts(*texts: str) -> AsyncIterator[dict[str, Any]]:
    for text in texts:
        yield {"type": "user", "message": {"role": "user", "content": text},
               "parent_tool_use_id": None, "session_id": ""}


def drive(cli: str, cwd: Path, texts: tuple[str, ...], **extra_args: str | None) -> list[Any]:
    """One session through the SDK's ``query()``; every message until the agent exits."""
    opts = ClaudeAgentOptions(cli_path=cli, cwd=str(cwd), permission_mode="acceptEdits",
                              extra_args=extra_args)

    async def go() -> list[Any]:
        return [m async for m in query(prompt=prompts(*texts), options=opts)]

    return asyncio.run(asyncio.wait_for(go(), LIMIT))


def extension_payloads(messages: list[Any], subtype: str) -> list[dict[str, Any]]:
    """The ``cap`` payloads of one extension subtype, fragments joined back."""
    out, parts = [], {}
    for m in messages:
        if not isinstance(m, SystemMessage):
            continue
        if m.subtype == "cap.fragment":
            frag = m.data["cap"]
            parts.setdefault(frag["frame_uuid"], []).append(frag)
            if len(parts[frag["frame_uuid"]]) == frag["count"]:
                frame = json.loads(join_fragments(parts.pop(frag["frame_uuid"])))
                if frame["subtype"] == subtype:
                    out.append(frame["cap"])
        elif m.subtype == subtype:
            out.append(m.data["cap"])
    assert not parts, "a fragmented frame was never completed"
    return out


def test_a_client_rebuilds_the_agents_log_from_diffs_alone(cap_agent, tmp_path):
    log_path = tmp_path / "agent.caplog"
    transcript_path = tmp_path / "transcript.json"
    work = tmp_path / "work"
    work.mkdir()
    messages = drive(cap_agent, work, ("write a.txt: one\nthink: hm\nplan: x; y", "ask: ok?",
                                       "run: echo hi"),
                     log=str(log_path), **{"transcript-diff-every": "4",
                                           "transcript-file": str(transcript_path)})
    diffs = extension_payloads(messages, "cap.transcript_diff")
    assert len(diffs) > 4  # turn ends and the every-4-events cadence
    mirror = TranscriptMirror()
    for diff in diffs:
        mirror.apply(diff)
    log = FileEventLog(log_path, readonly=True)
    assert mirror.envelopes == log.read()  # nothing logged is missing from the diffs
    assert len(mirror.envelopes) == log.last_seq > 20
    kinds = {env.kind for env in mirror.envelopes}
    assert {"cap.session.config", "cap.user_input.inject", "cap.text_chunk", "cap.plan",
            "cap.ask_user", "cap.ask_user.answer", "cap.tool_call.start", "cap.usage",
            "cap.artifact"} <= kinds
    assert sum(isinstance(m, ResultMessage) for m in messages) == 3
    assert isinstance(messages[-1], ResultMessage)  # the session ends with its last result
    # the whole transcript is in --transcript-file, written at exit
    document = json.loads(transcript_path.read_text())
    assert document["session_id"] == messages[0].data["session_id"]
    assert document["events"] == json.loads(msgspec.json.encode(log.read()))
    # any diff but the last lost is detected by the next one
    for lost in range(len(diffs) - 1):
        copy = TranscriptMirror()
        with pytest.raises(TranscriptGap):
            for i, diff in enumerate(diffs):
                if i != lost:
                    copy.apply(diff)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


def test_the_diff_artifact_equals_git_diff_of_a_turn_that_edits_two_files(cap_agent, tmp_path):
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "a.txt").write_text("alpha\nbeta\ngamma\n")
    (repo / "src" / "b.py").write_text("print('b')\n" * 5)
    (repo / "untouched.txt").write_text("same\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
    messages = drive(cap_agent, repo, (
        "write a.txt: alpha\\nBETA\\ngamma\nwrite src/b.py: print('b')\\nprint('c')",
        "nothing to change",
    ))
    diffs = [a for a in extension_payloads(messages, "cap.artifact")
             if a["mime_type"] == "application/vnd.cap.coding.diff.v1+text"]
    assert len(diffs) == 1  # the second turn changed nothing: no artifact
    (artifact,) = diffs
    expected = git(repo, "diff")
    assert expected.count("diff --git") == 2
    assert artifact["content"] == expected
    assert artifact["size"] == len(expected.encode()) and artifact["name"] == "turn-1.diff"


def test_the_diff_artifact_in_a_directory_that_is_not_a_repository(cap_agent, tmp_path):
    (tmp_path / "notes.txt").write_text("old\n")
    messages = drive(cap_agent, tmp_path, ("write notes.txt: new\nwrite fresh.txt: hi",))
    (artifact,) = [a for a in extension_payloads(messages, "cap.artifact")
                   if a["name"] == "turn-1.diff"]
    assert artifact["content"] == (
        "diff --git a/fresh.txt b/fresh.txt\nnew file mode 100644\nindex 0000000..45b983b\n"
        "--- /dev/null\n+++ b/fresh.txt\n@@ -0,0 +1 @@\n+hi\n"
        "diff --git a/notes.txt b/notes.txt\nindex 3367afd..3e75765 100644\n"
        "--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-old\n+new\n")
    assert not (tmp_path / ".git").exists()  # the snapshots live outside the workspace
