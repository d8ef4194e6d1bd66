"""``cap-agent`` and ``cap agent`` as processes: stdio, exit codes, signals, the log."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from trio_cap.actors.manifest import parse_manifest
from trio_cap.events.log import FileEventLog

BASE = ["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"]


def user(text: str) -> str:
    return json.dumps({"type": "user", "message": {"role": "user", "content": text}}) + "\n"


def test_stdout_is_only_json_lines_and_eof_finishes_every_queued_turn(cap_agent, tmp_path):
    frames = "".join(user(t) for t in ("think: a\nwait 0.2", "run: echo hi", "plan: x; y"))
    done = subprocess.run([cap_agent, *BASE, "--dangerously-skip-permissions"], input=frames,
                          capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    frames_out = [json.loads(line) for line in lines]  # every line is one JSON object
    results = [f for f in frames_out if f["type"] == "result"]
    assert [r["subtype"] for r in results] == ["success"] * 3
    assert [f["subtype"] for f in frames_out if f["type"] == "system"].count("init") == 3
    assert frames_out[-1]["type"] == "result"  # a session ends with its last result
    assert frames_out[-2]["subtype"] == "cap.transcript_diff" and frames_out[-2]["cap"]["final"]


def test_a_prompt_on_the_command_line_with_text_input(cap_agent, tmp_path):
    done = subprocess.run([cap_agent, "-p", "--output-format=stream-json", "--verbose",
                           "hello", "there"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    (result,) = [json.loads(x) for x in done.stdout.splitlines()
                 if json.loads(x)["type"] == "result"]
    assert result["result"].startswith('You said: "hello there"')


def test_version_manifest_and_bad_usage(cap_agent, tmp_path):
    version = subprocess.run([cap_agent, "-v"], capture_output=True, text=True, check=True)
    assert version.stdout.split()[0].count(".") == 2 and "(Claude Code" in version.stdout
    manifest = subprocess.run([cap_agent, "--cap-manifest"], capture_output=True, text=True,
                              check=True)
    assert parse_manifest(manifest.stdout, "cap-agent --cap-manifest").agent.name == "cap-agent"
    for argv in (["--output-format", "json"], ["--script", str(tmp_path / "none.toml")],
                 ["--max-turns", "lots"]):
        bad = subprocess.run([cap_agent, *argv], capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, timeout=30, check=False)
        assert bad.returncode == 2 and bad.stdout == "", argv
        assert "error" in bad.stderr


def test_sigterm_mid_turn_closes_the_log_cleanly(cap_agent, tmp_path):
    log = tmp_path / "agent.caplog"
    proc = subprocess.Popen([cap_agent, *BASE, "--log", str(log)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    assert proc.stdin and proc.stdout
    proc.stdin.write(user("think: long\nwait 60").encode())
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["subtype"] == "init"  # the turn has started
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    proc.stdin.close()
    proc.stdout.close()
    proc.stderr.close()
    reopened = FileEventLog(log, readonly=True)
    assert reopened.recovered is None
    assert [e.kind for e in reopened.read()][:2] == ["cap.session.config",
                                                     "cap.user_input.inject"]


CAP_AGENT_CMD = """
import argparse, sys
from trio_cap.actors.cli import agent_cmd
parser = argparse.ArgumentParser(prog="cap")
agent_cmd.register(parser.add_subparsers())
args = parser.parse_args(sys.argv[1:])
sys.exit(args.func(args))
"""


def test_cap_agent_speaks_stream_json_with_its_own_flags(tmp_path):
    """``cap agent`` (the subcommand) through its own parser, as ``cap`` will register it."""
    log = tmp_path / "agent.caplog"
    done = subprocess.run(
        [sys.executable, "-c", CAP_AGENT_CMD, "agent", "--cap-speak", "stream-json",
         "--log", str(log), "--model", "cap-m", "--permission-mode", "acceptEdits",
         "--include-partial-messages", "--session-id", "s-1"],
        input=user("write x.txt: y"), capture_output=True, text=True, cwd=tmp_path,
        timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert out[0]["session_id"] == "s-1" and out[0]["model"] == "cap-m"
    assert any(f["type"] == "stream_event" for f in out)
    assert (tmp_path / "x.txt").read_text() == "y\n"
    assert FileEventLog(log, readonly=True).last_seq > 5
    manifest = subprocess.run([sys.executable, "-c", CAP_AGENT_CMD, "agent", "--cap-manifest"],
                              capture_output=True, text=True, check=True)
    assert parse_manifest(manifest.stdout, "cap agent").fast_path.stream_json
    no_wire = subprocess.run([sys.executable, "-c", CAP_AGENT_CMD, "agent"],
                             capture_output=True, text=True, check=False)
    assert no_wire.returncode != 0


def test_the_package_runs_as_a_module(tmp_path):
    done = subprocess.run([sys.executable, "-m", "trio_cap.actors.cli.cap_agent", "-v"],
                          capture_output=True, text=True, check=True, cwd=Path.cwd())
    assert "trio-cap" in done.stdout


def test_a_cap_session_config_first_frame_sets_up_the_session(cap_agent, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = {"type": "cap.session.config", "cwd": str(elsewhere), "model": "from-config",
              "permission_mode": "none", "max_turns": 4}
    late = {"type": "cap.session.config", "cwd": str(tmp_path)}
    frames = json.dumps(config) + "\n" + user("write f.txt: here") + json.dumps(late) + "\n"
    done = subprocess.run([cap_agent, *BASE], input=frames, capture_output=True, text=True,
                          cwd=tmp_path, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = [json.loads(line) for line in done.stdout.splitlines()]
    init = out[0]
    assert (init["cwd"], init["model"]) == (str(elsewhere), "from-config")
    assert (elsewhere / "f.txt").read_text() == "here\n"  # permission_mode none: no prompt
    errors = [f["cap"] for f in out if f.get("subtype") == "cap.error"]
    assert [e["code"] for e in errors] == ["cap_session_config_missing"]


def test_transcript_diffs_go_out_during_a_long_turn(cap_agent, tmp_path):
    proc = subprocess.Popen([cap_agent, *BASE, "--transcript-diff-interval", "0.1"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp_path)
    assert proc.stdin and proc.stdout
    proc.stdin.write(user("think: started\nwait 60").encode())
    proc.stdin.flush()
    kinds: list[str] = []
    while "cap.thought" not in kinds:  # a 60 s turn: a diff before its result can only come
        frame = json.loads(proc.stdout.readline())  # from the timer (the first may go out
        assert frame["type"] != "result"            # before the thought, on a loaded box)
        if frame.get("subtype") == "cap.transcript_diff":
            kinds += [e[4]["kind"] for e in frame["cap"]["events"]]
    assert "cap.usage" not in kinds  # mid-turn
    interrupt = {"type": "control_request", "request_id": "r1",
                 "request": {"subtype": "interrupt"}}
    proc.stdin.write((json.dumps(interrupt) + "\n").encode())
    proc.stdin.close()
    rest = [json.loads(line) for line in proc.stdout.read().splitlines()]
    assert proc.wait(timeout=30) == 0
    (result,) = [f for f in rest if f["type"] == "result"]
    assert result["subtype"] == "error_during_execution"


def test_cap_agent_accepts_a_stream_json_drivers_command_line(tmp_path):
    """What trio-cap's driver appends to the manifest's ``cap agent --cap-speak stream-json``."""
    driver_flags = ["--output-format", "stream-json", "--verbose", "--include-partial-messages",
                    "--permission-prompt-tool", "stdio", "--permission-mode",
                    "bypassPermissions", "--model", "m-drv", "--max-turns", "3",
                    "--append-system-prompt", "Be kind.",
                    "--session-id=0b5c3b4e-7c55-4d4e-9a51-000000000001",
                    "--input-format", "stream-json"]
    done = subprocess.run(
        [sys.executable, "-c", CAP_AGENT_CMD, "agent", "--cap-speak", "stream-json",
         *driver_flags], input=user("write d.txt: driven"), capture_output=True, text=True,
        cwd=tmp_path, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    out = [json.loads(line) for line in done.stdout.splitlines()]
    init = out[0]
    assert (init["model"], init["permissionMode"]) == ("m-drv", "bypassPermissions")
    assert init["session_id"] == "0b5c3b4e-7c55-4d4e-9a51-000000000001"
    thoughts = [b["thinking"] for f in out if f["type"] == "assistant"
                for b in f["message"]["content"] if b["type"] == "thinking"]
    assert thoughts == ["System prompt: Be kind."]
    assert (tmp_path / "d.txt").read_text() == "driven\n"


def test_files_named_on_the_command_line_are_read_by_the_shell(cap_agent, tmp_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Be a pirate.")
    done = subprocess.run([cap_agent, *BASE, "--system-prompt-file", str(prompt)],
                          input=user("hi"), capture_output=True, text=True, cwd=tmp_path,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    thoughts = [b["thinking"] for f in map(json.loads, done.stdout.splitlines())
                if f["type"] == "assistant" for b in f["message"]["content"]
                if b["type"] == "thinking"]
    assert thoughts == ["System prompt: Be a pirate."]


def test_bad_files_on_the_command_line_exit_2_with_one_line(cap_agent, tmp_path):
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe\x00prompt")
    cases = [
        ("--system-prompt-file", str(tmp_path / "missing.txt")),
        ("--system-prompt-file", str(binary)),
        ("--append-system-prompt-file", str(tmp_path)),
        ("--transcript-file", str(tmp_path / "no" / "such" / "dir" / "t.json")),
        ("--transcript-file", str(tmp_path)),
    ]
    for flag, path in cases:
        done = subprocess.run([cap_agent, *BASE, flag, path], input=user("hi"),
                              capture_output=True, text=True, cwd=tmp_path, timeout=30,
                              check=False)
        assert done.returncode == 2, (flag, path, done.stderr)
        assert done.stdout == "", (flag, path)  # refused before any session started
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and flag in lines[0] and "Traceback" not in done.stderr, lines


def test_the_transcript_file_is_written_at_exit_even_on_sigterm(cap_agent, tmp_path):
    log, transcript = tmp_path / "agent.caplog", tmp_path / "transcript.json"
    proc = subprocess.Popen([cap_agent, *BASE, "--log", str(log), "--transcript-file",
                             str(transcript)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path)
    assert proc.stdin and proc.stdout and proc.stderr
    proc.stdin.write(user("think: long\nwait 60").encode())
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["subtype"] == "init"
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(timeout=30) == 143
    finally:
        proc.kill()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
    document = json.loads(transcript.read_text())
    assert document["agent"] == "cap-agent" and document["session_id"]
    events = FileEventLog(log, readonly=True).read()
    assert [e[0] for e in document["events"]] == [e.seq for e in events]
    assert document["events"][0][4]["kind"] == "cap.session.config"
