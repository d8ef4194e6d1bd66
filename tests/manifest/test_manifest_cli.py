"""`cap manifest validate | resolve | list`: exit codes and output."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tests.manifest.helpers import manifest_printer, minimal, write
from trio_cap.actors.cli import manifest_cmd
from trio_cap.actors.cli.main import UsageError
from trio_cap.actors.manifest import resolve as resolve_mod


def cap(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="cap")
    manifest_cmd.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(list(argv))
    return args.func(args)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Empty user and system dirs, a private PATH dir first."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setattr(resolve_mod, "SYSTEM_DIR", tmp_path / "system")
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    return tmp_path


# --------------------------------------------------------------------------
# validate
# --------------------------------------------------------------------------

def test_validate_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write(tmp_path / "a.toml", minimal(name="a", binary="a"))
    acp = "[fast_path]\nacp_stdio = true\n"
    b = write(tmp_path / "b.toml", minimal(name="b", binary="b", extra=acp))
    assert cap("manifest", "validate", str(a), str(b)) == 0
    out = capsys.readouterr()
    assert out.out.splitlines() == [
        f"OK {a}: a (bindings: pty)",
        f"OK {b}: b (bindings: acp, pty)",
    ]
    assert out.err == ""


def test_validate_reports_every_error_of_every_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write(tmp_path / "good.toml", minimal())
    bad = write(tmp_path / "bad.toml", minimal().replace(
        'ready_when = { pattern = "^> $" }', ""
    ).replace('command = ["demo"]', 'command = "demo --go"') + '[parse]\nidle = ["(?!x)"]\n')
    empty = write(tmp_path / "empty.toml", "")
    missing = tmp_path / "missing.toml"
    assert cap("manifest", "validate", str(good), str(bad), str(empty), str(missing)) == 1
    out = capsys.readouterr()
    assert out.out.splitlines() == [f"OK {good}: demo (bindings: pty)"]
    err = out.err.splitlines()
    assert err[:3] == [
        f"{bad}: startup.command: must be an array of strings (argv), not a shell string",
        f"{bad}: startup.ready_when: required",
        f"{bad}: parse.idle[0]: look-around is not supported (RE2 subset): (?!",
    ]
    assert err[3:11] == [
        f"{empty}: {p}: required" for p in (
            "agent.name", "agent.binary", "agent.profiles", "startup.command",
            "startup.ready_when", "pty.cols", "pty.rows", "capabilities.streaming_output",
        )
    ]
    assert err[11].startswith(f"{missing}: cannot read: ")
    assert len(err) == 12


def test_validate_the_bundled_manifests(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in resolve_mod.bundled_dir().glob("*.toml"))
    assert cap("manifest", "validate", *files) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(files) == 9


# --------------------------------------------------------------------------
# resolve
# --------------------------------------------------------------------------

def test_resolve_user_manifest_text(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    extra = '[fast_path]\nstream_json = ["tcap-nope"]\n'
    f = write(env / "cfg" / "cap" / "agents" / "tcap-x.toml",
              minimal(name="tcap-x", binary="sh", extra=extra))
    assert cap("manifest", "resolve", "tcap-x", "--no-probe") == 0
    out = capsys.readouterr().out
    assert "agent: tcap-x\n" in out
    assert f"found by: rule 3 of 6 (user): {f}\n" in out
    assert "  1. stream-json  tcap-nope  [tcap-nope: NOT FOUND]\n" in out
    assert "  2. pty  sh  [sh: /" in out
    assert "would use: pty (program sh: /" in out
    assert "fast paths declared: stream-json)" in out
    assert "warning: stream-json: program 'tcap-nope' not found; it will fail and fall back" in out
    manifest_text = out.split("# manifest with every default applied\n", 1)[1]
    assert 'sigint_cancels_turn = "hard"' in manifest_text  # defaults are shown
    assert 'idle = ["^>\\\\s*$", "^\u276f\\\\s*$"]' in manifest_text


def test_resolve_json_with_probe(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prog = manifest_printer(env / "bin" / "tcap-probed", minimal(name="tcap-probed",
                                                              binary="tcap-probed"))
    assert cap("manifest", "resolve", "tcap-probed", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["source"], data["rule"]) == ("probe", 5)
    assert data["location"] == f"{prog} --cap-manifest"
    assert [t["rule"] for t in data["tried"]][-2:] == ["user", "system"]
    assert data["bindings"]["chosen"] == "pty"
    assert data["bindings"]["candidates"] == [{
        "binding": "pty", "argv": ["tcap-probed"], "url": None, "program": "tcap-probed",
        "program_path": str(prog), "available": True,
    }]
    assert data["manifest"]["pty"]["bracketed_paste"] is False


def test_resolve_bundled_with_forced_binding(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cap("manifest", "resolve", "cap-agent", "--binding", "inproc", "--json",
               "--no-probe") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["source"] == "bundled"
    assert [c["binding"] for c in data["bindings"]["candidates"]] == ["inproc"]
    assert data["bindings"]["chosen"] == "inproc"


def test_resolve_adhoc(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cap("manifest", "resolve", "pty:sh -i", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["source"], data["rule"]) == ("ad-hoc", None)
    assert data["bindings"]["only_binding"] == "pty"
    assert data["manifest"]["startup"]["command"] == ["sh", "-i"]


def test_resolve_not_found_exits_1(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cap("manifest", "resolve", "tcap-absent") == 1
    err = capsys.readouterr().err
    assert err.startswith("cap: cap_manifest_missing: no manifest found for 'tcap-absent'")
    for rule in ("in-package", "user", "system", "probe", "bundled"):
        assert f"\n  {rule}: " in err


def test_resolve_invalid_exits_1(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(env / "x.toml", minimal().replace("rows = 40", "rows = -1"))
    assert cap("manifest", "resolve", str(f)) == 1
    assert capsys.readouterr().err == f"{f}: pty.rows: must be greater than zero\n"


def test_resolve_bad_usage(env: Path) -> None:
    with pytest.raises(UsageError, match="not an agent name"):
        cap("manifest", "resolve", "bad name")
    with pytest.raises(UsageError, match="the command is empty"):
        cap("manifest", "resolve", "pty:")
    with pytest.raises(UsageError, match="does not declare it"):
        cap("manifest", "resolve", "repl", "--binding", "acp", "--no-probe")
    with pytest.raises(UsageError, match="the ad-hoc spec offers only pty"):
        cap("manifest", "resolve", "pty:sh", "--binding", "stream-json")


# --------------------------------------------------------------------------
# list and help
# --------------------------------------------------------------------------

def test_list(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(env / "cfg" / "cap" / "agents" / "aider.toml", minimal(name="aider", binary="aider"))
    assert cap("manifest", "list") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "SOURCE", "LOCATION"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[1:]}
    assert set(rows) == {"aider", "cap-agent", "claude-code", "claude-code-acp", "codex",
                         "codex-acp", "gemini-cli", "opencode", "repl"}
    assert rows["aider"] == ["user", str(f)]
    assert rows["codex"][0] == "bundled"
    assert cap("manifest", "list", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert {d["name"]: d["source"] for d in data}["aider"] == "user"


@pytest.mark.parametrize(("sub", "words"), [
    ("validate", ["every error", "Exit status 0 when all are valid, 1 otherwise"]),
    ("resolve", ["which rule found it", "would be chosen", "--binding", "--no-probe",
                 "Resolution order"]),
    ("list", ["every agent name", "--probe"]),
])
def test_help_explains_each_command(
    sub: str, words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        cap("manifest", sub, "--help")
    assert info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for w in words:
        assert w in text
