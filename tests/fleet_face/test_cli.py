"""The fleet face's failure paths as real processes: a fleet file with a problem (broken,
an unknown agent, missing) is exit 2 with one line naming the file and the problem, for
every command that takes ``--fleet``; a fleet that fails is the turn's error result (the
last line of stdout), never a traceback."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fleet_face.helpers import CAP, FAILS, make_fleet

BOUND = 90
CAP_AGENT = str(Path(sys.executable).with_name("cap-agent"))
_EXCEPTION_LINE = re.compile(r"^\s*(\w+\.)*\w*(Error|Exception|ExceptionGroup)\b[:(]",
                             re.MULTILINE)

COMMANDS = {
    "stream-json": [*CAP, "agent", "--cap-speak", "stream-json"],
    "acp": [*CAP, "agent", "--cap-speak", "acp"],
    "cap-agent": [CAP_AGENT],
    "serve-a2a": [*CAP, "serve", "a2a", "--listen", "127.0.0.1:0"],
}
FILES = {
    "broken": ('name = "x"\n[[session]\n', "not valid TOML"),
    "unknown-agent": ('name = "x"\n[[session]]\nid = "a"\nagent = "no-such-agent"\n',
                      "session[0].agent: no manifest found for 'no-such-agent'"),
    "missing": (None, "cannot read it"),
}


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    everything = result.stdout + result.stderr
    assert "Traceback" not in everything and not _EXCEPTION_LINE.search(everything), everything


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("problem", FILES)
def test_a_fleet_file_with_a_problem_is_exit_2_in_one_line(tmp_path: Path, command: str,
                                                           problem: str) -> None:
    content, needle = FILES[problem]
    path = tmp_path / "fleet.toml"
    if content is not None:
        path.write_text(content)
    result = subprocess.run([*COMMANDS[command], "--fleet", str(path)], capture_output=True,
                            text=True, timeout=BOUND, cwd=tmp_path, stdin=subprocess.DEVNULL)
    no_traceback(result)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.splitlines()
    assert str(path) in line and needle in line, line
    assert result.stdout == ""  # nothing on the protocol's stream
    assert not (tmp_path / ".cap").exists()  # refused before any log was made


@pytest.mark.parametrize("other", [["--bridge", "cap-agent"], ["--script", "s.toml"]])
def test_fleet_with_another_brain_is_bad_usage(tmp_path: Path, other: list[str]) -> None:
    result = subprocess.run([*COMMANDS["stream-json"], "--fleet", "f.toml", *other],
                            capture_output=True, text=True, timeout=BOUND, cwd=tmp_path,
                            stdin=subprocess.DEVNULL)
    no_traceback(result)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert "--fleet" in line and other[0] in line


def test_a_fleet_that_fails_ends_the_turn_with_an_error_result(tmp_path: Path) -> None:
    fleet = make_fleet(tmp_path, en_permissions="allow", fr_script=FAILS)
    result = subprocess.run([*COMMANDS["stream-json"], "--input-format", "text", "--fleet",
                             str(fleet)], input="greet", capture_output=True, text=True,
                            timeout=BOUND, cwd=tmp_path)
    no_traceback(result)
    assert result.returncode == 0  # the session ended well; its one turn failed
    (line,) = result.stderr.splitlines()  # where the fleet's runs are logged
    assert line.startswith("cap agent: fleet face logs to ") and line.endswith(".caplog")
    last = json.loads(result.stdout.splitlines()[-1])
    assert last["type"] == "result" and last["is_error"]
    # the member's own error, named, then why the fleet failed
    assert last["errors"] == ["model_unavailable: fr: the model is down",
                              "fleet_failed: fr: turn ended with error"]
