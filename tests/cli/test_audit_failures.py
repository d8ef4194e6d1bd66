"""Failure paths found by a robustness audit of the whole CLI, each run as a real process:
the documented exit code, exactly one line on stderr, no traceback, nothing left behind."""

import os
import stat
import subprocess

import pytest

from tests.cli.test_failure_paths import CAP, ENV, assert_clean, cap

DEEP_TOML = "a = " + "[" * 100_000 + "]" * 100_000 + "\n"
DEEP_YAML = "a: " + "[" * 50_000 + "]" * 50_000 + "\n"


def one_line(result: subprocess.CompletedProcess, code: int, message: str) -> None:
    assert_clean(result, code, message)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr


@pytest.fixture
def a_log(tmp_path):
    result, _ = cap("run", "--task", "hi", "--log", "ok.caplog", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return tmp_path / "ok.caplog"


def test_log_copy_never_replaces_an_existing_fifo_or_device(tmp_path, a_log):
    # an empty non-regular DST (here a FIFO; /dev/null as root) was renamed over
    os.mkfifo(tmp_path / "dst")
    result, _ = cap("log", "copy", str(a_log), "dst", cwd=tmp_path)
    one_line(result, 2, "dst already exists; copy into a new file")
    assert stat.S_ISFIFO(os.stat(tmp_path / "dst").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst", "ok.caplog"]
    (tmp_path / "empty").touch()  # an empty regular file is still a new log to copy into
    copied, _ = cap("log", "copy", str(a_log), "empty", cwd=tmp_path)
    assert copied.returncode == 0, copied.stderr


@pytest.mark.parametrize(("name", "text"), [("deep.toml", DEEP_TOML), ("deep.yaml", DEEP_YAML)])
@pytest.mark.parametrize("command", [("fleet", "validate"), ("fleet", "run"),
                                     ("serve", "a2a", "--listen", "127.0.0.1:0", "--fleet")])
def test_a_fleet_file_nested_too_deeply_is_a_usage_error(tmp_path, name, text, command):
    (tmp_path / name).write_text(text)
    result, _ = cap(*command, name, cwd=tmp_path)
    one_line(result, 2, f"{name}: not a fleet file: arrays or tables nested too deeply")


@pytest.mark.parametrize(("rules", "message"), [
    (DEEP_TOML, "arrays or tables nested too deeply to read"),
    ("rule = 5\n", "rule must be an array of tables ([[rule]])"),
    ('[[rule]]\ndecision = "allow"\nrisk = 5\n', "rule 1: risk must name low, medium or high"),
])
def test_policy_rules_of_the_wrong_shape_are_a_usage_error(tmp_path, a_log, rules, message):
    (tmp_path / "rules.toml").write_text(rules)
    result, _ = cap("policy", "check", "--rules", "rules.toml", str(a_log), cwd=tmp_path)
    one_line(result, 2, f"--rules rules.toml: {message}")


@pytest.mark.parametrize(("args", "message"), [
    (("--home", "a-file"), "a-file: a file is in the way of a directory"),
    (("--home", "a-file/home"), "a-file/home: a file is in the way of a directory"),
    (("--model-url", "127.0.0.1:8080"), "--model-url '127.0.0.1:8080': give the model server"),
])
def test_peers_env_with_an_unusable_home_or_url_is_a_usage_error(tmp_path, args, message):
    (tmp_path / "a-file").write_text("x")
    result, _ = cap("peers", "env", "claude-code", "--model-url", "http://127.0.0.1:9",
                    "--dir", "peers", *args, cwd=tmp_path)
    one_line(result, 2, message)


LOG_COMMANDS = [
    ("run", "--task", "hi"),
    ("agent", "--cap-speak", "stream-json"),
    ("agent", "--cap-speak", "acp"),
    ("serve", "a2a", "--listen", "127.0.0.1:0", "--agent", "cap-agent"),
]


@pytest.mark.parametrize("command", LOG_COMMANDS, ids=[" ".join(c[:2]) for c in LOG_COMMANDS])
@pytest.mark.parametrize(("target", "message"), [
    ("http://127.0.0.1:1", "only a postgresql://USER@HOST/DB URL names a shared log"),
    ("a-dir", "--log a-dir: is a directory, not a log file"),
])
def test_a_log_that_is_another_url_or_a_directory_is_refused_first(tmp_path, command, target,
                                                                   message):
    (tmp_path / "a-dir").mkdir()
    result, _ = cap(*command, "--log", target, cwd=tmp_path)
    one_line(result, 2, message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-dir"]  # no http:/ directory


def test_cap_agent_refuses_a_directory_log_in_one_line(tmp_path):
    result = subprocess.run([*CAP[:1], "-m", "trio_cap.actors.cli.cap_agent",
                             "--output-format", "stream-json", "--log", str(tmp_path)],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL, env=ENV,
                            timeout=60)
    one_line(result, 2, "is a directory, not a log file")


@pytest.mark.parametrize(("args", "message"), [
    (("--max-budget-usd", "nan"), "--max-budget-usd nan: give a number >= 0"),
    (("--max-budget-usd", "-1"), "--max-budget-usd -1.0: give a number >= 0"),
    (("--transcript-diff-every", "-1"), "--transcript-diff-every -1: give a number >= 0"),
    (("--max-turns", "-2"), "--max-turns -2: give a number >= 0"),
])
@pytest.mark.parametrize("speak", ["stream-json", "acp"])
def test_cap_agent_refuses_negative_and_nan_numbers(tmp_path, speak, args, message):
    result, _ = cap("agent", "--cap-speak", speak, *args, cwd=tmp_path)
    one_line(result, 2, message)


def test_cap_agent_with_claude_flags_refuses_a_nan_budget(tmp_path):
    result = subprocess.run([*CAP[:1], "-m", "trio_cap.actors.cli.cap_agent",
                             "--output-format", "stream-json", "--max-budget-usd", "nan"],
                            capture_output=True, text=True, stdin=subprocess.DEVNULL, env=ENV,
                            cwd=tmp_path, timeout=60)
    one_line(result, 2, "--max-budget-usd: expected a number, got 'nan'")


@pytest.mark.parametrize("speak", ["stream-json", "acp", "pty"])
def test_cap_agent_refuses_a_database_log_instead_of_making_a_file_of_it(tmp_path, speak):
    # the URL was taken as a file path: a postgresql: directory appeared in the cwd
    url = "postgresql://me:secret@127.0.0.1:1/db"
    result, _ = cap("agent", "--cap-speak", speak, "--log", url, cwd=tmp_path)
    one_line(result, 2, "cap agent writes its transcript to a file; give a file path")
    assert "secret" not in result.stderr
    assert list(tmp_path.iterdir()) == []
    claude_flags = subprocess.run([*CAP[:1], "-m", "trio_cap.actors.cli.cap_agent",
                                   "--output-format", "stream-json", "--log", url],
                                  capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                  env=ENV, cwd=tmp_path, timeout=60)
    one_line(claude_flags, 2, "cap agent writes its transcript to a file")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("extra", [("--task", "new"), ("--cwd", "."), ("--model", "m")])
def test_resume_refuses_options_it_would_ignore(tmp_path, a_log, extra):
    before = a_log.read_bytes()
    result, _ = cap("run", "--resume", str(a_log), *extra, cwd=tmp_path)
    one_line(result, 2, f"drop {extra[0]} (a new task is a new cap run)")
    assert a_log.read_bytes() == before  # refused before the log was opened for writing


@pytest.mark.parametrize("speak", ["stream-json", "acp"])
def test_cap_agent_refuses_an_unknown_bridged_agent_at_start(tmp_path, speak):
    # it used to start, and fail only at the first turn a client sent
    result, _ = cap("agent", "--cap-speak", speak, "--bridge", "no-such-agent-xyz",
                    cwd=tmp_path)
    assert_clean(result, 2, "no-such-agent-xyz")
    offered, _ = cap("agent", "--cap-speak", speak, "--bridge", "cap-agent", "--binding",
                     "a2a", cwd=tmp_path)
    one_line(offered, 2, "--binding a2a")


@pytest.mark.parametrize("rule", ["Bash(", "Bash(rm -rf", "(rm)", "Bash(a))", "Ba$h"])
@pytest.mark.parametrize("flag", ["--allowedTools", "--disallowedTools"])
def test_a_malformed_tool_rule_is_refused_not_ignored(tmp_path, flag, rule):
    # a deny rule that does not parse denied nothing: the tool it meant ran unasked
    result, _ = cap("agent", "--cap-speak", "acp", flag, rule, cwd=tmp_path)
    one_line(result, 2, f"{flag}: {rule!r} is not a rule")
    claude_flags = subprocess.run([*CAP[:1], "-m", "trio_cap.actors.cli.cap_agent",
                                   "--output-format", "stream-json", flag, rule],
                                  capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                  env=ENV, cwd=tmp_path, timeout=60)
    one_line(claude_flags, 2, f"{flag}: {rule!r} is not a rule")


def test_well_formed_tool_rules_still_parse():
    from trio_cap.actors.bindings.stream_json.agent_argv import checked_rules

    assert checked_rules("--allowedTools", "Bash(git status:*),Write  mcp__fs__read "
                         "Bash(echo (a, b))") == (
        "Bash(git status:*)", "Write", "mcp__fs__read", "Bash(echo (a, b))")
