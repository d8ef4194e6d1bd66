"""The manifest model: bundled manifests, defaults, required fields, types, extensions."""

from __future__ import annotations

import tomllib
from pathlib import Path

import attrs
import pytest

from tests.manifest.helpers import minimal, write
from trio_cap.actors.manifest import ManifestInvalid, load_manifest, parse_manifest
from trio_cap.actors.manifest.convert import manifest_data
from trio_cap.actors.manifest.dump import dumps
from trio_cap.actors.manifest.fields import field_rows
from trio_cap.actors.manifest.resolve import bundled_dir
from trio_cap.actors.manifest.select import offered_bindings, plan_bindings

BUNDLED = sorted(bundled_dir().glob("*.toml"))
EXPECTED_BUNDLED = {"claude-code", "codex", "gemini-cli", "opencode", "aider", "repl", "cap-agent",
                    "codex-acp", "claude-code-acp"}
KNOWN_EXTENSIONS = {"x-acp", "capabilities.x-session-resume"}
"""``x-*`` keys bundled manifests may carry: the ACP driver's tuning table (docs/cap.md,
"ACP driver") and the agent side's session-resume flag."""


def errors(text: str) -> list[tuple[str, str]]:
    with pytest.raises(ManifestInvalid) as info:
        parse_manifest(text, "m.toml")
    return [(i.path, i.message) for i in info.value.issues]


def paths(text: str) -> set[str]:
    return {p for p, _ in errors(text)}


# --------------------------------------------------------------------------
# bundled manifests
# --------------------------------------------------------------------------

def test_every_expected_agent_is_bundled() -> None:
    assert {p.stem for p in BUNDLED} == EXPECTED_BUNDLED


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_bundled_manifest_validates(path: Path) -> None:
    m = load_manifest(path)
    assert m.agent.name == path.stem
    assert set(m.extensions) <= KNOWN_EXTENSIONS  # x-inproc is a typed field
    # every bundled manifest says how to start it under a PTY, the universal fallback
    assert plan_bindings(m, which=lambda _p: "/x").candidates[-1].binding == "pty"


def _declared(name: str) -> dict[str, tuple[str, ...] | str | None]:
    m = load_manifest(bundled_dir() / f"{name}.toml")
    plan = plan_bindings(m, which=lambda _p: "/found")
    return {c.binding: c.argv or c.url for c in plan.candidates}


def test_bundled_bindings_match_what_the_real_programs_offer() -> None:
    claude = _declared("claude-code")
    assert list(claude) == ["stream-json", "acp", "pty"]
    sj = claude["stream-json"]
    assert sj[0] == "claude" and "-p" in sj and "--verbose" in sj  # -p + stream-json needs it
    assert sj[sj.index("--input-format") + 1] == "stream-json"
    assert sj[sj.index("--output-format") + 1] == "stream-json"
    assert _declared("gemini-cli") == {"acp": ("gemini", "--acp"), "pty": ("gemini",)}
    assert _declared("opencode") == {"acp": ("opencode", "acp"), "pty": ("opencode",)}
    assert _declared("codex") == {"acp": ("codex-acp",), "pty": ("codex", "--no-alt-screen")}
    assert list(_declared("aider")) == ["pty"]
    assert _declared("repl")["pty"][0] == "bash"
    assert _declared("cap-agent") == {
        "inproc": None,
        "stream-json": ("cap", "agent", "--cap-speak", "stream-json"),
        "acp": ("cap", "agent", "--cap-speak", "acp"),
        "pty": ("cap", "agent", "--cap-speak", "pty"),
    }


def test_offered_bindings_do_not_depend_on_what_is_installed() -> None:
    m = load_manifest(bundled_dir() / "claude-code.toml")
    assert offered_bindings(m) == ("stream-json", "acp", "pty")
    grpc = parse_manifest(minimal(extra="[fast_path]\ngrpc = true\n"), "m")
    assert offered_bindings(grpc) == ("pty",)


def test_only_cap_agent_offers_inproc() -> None:
    inproc = {p.stem for p in BUNDLED if load_manifest(p).fast_path.x_inproc}
    assert inproc == {"cap-agent"}


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_dumped_manifest_parses_back_to_the_same(path: Path) -> None:
    m = load_manifest(path)
    text = dumps(manifest_data(m))
    assert parse_manifest(text, "dumped") == m


# --------------------------------------------------------------------------
# defaults
# --------------------------------------------------------------------------

def test_every_cap_5_3_default_applies() -> None:
    m = parse_manifest(minimal(), "m.toml")
    # CAP core §5.3, entry by entry
    assert m.pty.bracketed_paste is False
    assert m.pty.sigint_cancels_turn == "hard"
    assert m.pty.queued_input_supported is False
    assert m.capabilities.multi_session is False
    assert attrs.asdict(m.capabilities.ask_user) == {
        "yes_no": False, "options": False, "free_text": False,
    }
    assert m.capabilities.streaming_tool_output is False
    assert m.cost.metered is False
    assert m.parse.idle == ("^>\\s*$", "^\u276f\\s*$")
    assert m.parse.tool_call_start is None
    assert m.parse.tool_call_end is None
    assert m.parse.plan_section is None
    assert m.parse.thought_section is None
    assert m.parse.ask_yes_no is None
    assert m.parse.ask_options is None
    assert m.parse.error_lines == ()
    # optional sections absent: no probe, no coding section, no fast path
    assert m.probe is None
    assert m.capabilities.coding is None
    assert (m.fast_path.stream_json, m.fast_path.acp_stdio) == (False, False)
    assert (m.fast_path.a2a_serve_at, m.fast_path.grpc, m.fast_path.x_inproc) == (
        False, False, False,
    )


def _value_at(obj: object, path: str) -> object:
    for part in path.replace("-", "_").split("."):
        obj = getattr(obj, part)
    return obj


def test_every_documented_default_is_what_a_minimal_manifest_gets() -> None:
    coding = '[capabilities.coding]\ntool_permission = "none"\n'
    text = minimal(extra=coding).replace("profiles = []", 'profiles = ["coding"]')
    m = parse_manifest(text, "m.toml")
    checked = 0
    for row in field_rows():
        if row.required != "no" or row.path.startswith("probe."):
            continue
        expected = None if row.default is attrs.NOTHING else row.default
        assert _value_at(m, row.path) == expected, row.path
        checked += 1
    assert checked > 40


def test_coding_section_is_recorded() -> None:
    coding = """
[capabilities.coding]
revision = "2026-05-18"
fs = { read = true, write = true, scope = "project_root" }
terminal = { enabled = true, concurrent_max = 2 }
tool_permission = "confirm"
tools_allowed = ["Read"]
tools_denied = ["Bash"]
artifacts = ["diff", "commit", "x-sbom"]
git_aware = true
language_servers = ["pyright"]
test_runners = ["pytest"]
"""
    text = minimal(extra=coding).replace("profiles = []", 'profiles = ["coding"]')
    c = parse_manifest(text, "m.toml").capabilities.coding
    assert c is not None
    assert (c.fs.read, c.fs.write, c.fs.list, c.fs.scope) == (True, True, False, "project_root")
    assert (c.terminal.enabled, c.terminal.concurrent_max) == (True, 2)
    assert c.tool_permission == "confirm"
    assert (c.tools_allowed, c.tools_denied) == (("Read",), ("Bash",))
    assert c.artifacts == ("diff", "commit", "x-sbom")
    assert c.git_aware and c.language_servers == ("pyright",) and c.test_runners == ("pytest",)


# --------------------------------------------------------------------------
# required fields and errors
# --------------------------------------------------------------------------

REQUIRED = {
    "agent.name", "agent.binary", "agent.profiles", "startup.command", "startup.ready_when",
    "pty.cols", "pty.rows", "capabilities.streaming_output",
}


def test_every_required_field_is_reported_at_once() -> None:
    errs = errors("")
    assert {p for p, _ in errs} == REQUIRED
    assert all(msg == "required" for _, msg in errs)


@pytest.mark.parametrize("line", [
    'name = "demo"', 'binary = "demo"', "profiles = []", 'command = ["demo"]',
    'ready_when = { pattern = "^> $" }', "cols = 120", "rows = 40", "streaming_output = true",
])
def test_each_required_field_is_named_when_missing(line: str) -> None:
    text = minimal().replace(line + "\n", "")
    assert text != minimal()
    errs = errors(text)
    assert len(errs) == 1 and errs[0][1] == "required"
    assert errs[0][0].rsplit(".", 1)[1] == line.split(" ", 1)[0]


def test_coding_requires_tool_permission_and_fs_scope() -> None:
    text = minimal(extra="[capabilities.coding]\nfs = { write = true }\n").replace(
        "profiles = []", 'profiles = ["coding"]'
    )
    assert dict(errors(text)) == {
        "capabilities.coding.tool_permission": "required",
        "capabilities.coding.fs.scope": "required when any fs.* capability is true (fs.write is)",
    }


def test_coding_section_without_coding_profile_is_reported() -> None:
    text = minimal(extra='[capabilities.coding]\ntool_permission = "none"\n')
    assert dict(errors(text)) == {
        "capabilities.coding": 'declared, but agent.profiles does not list "coding"'
    }


def test_unrelated_problems_are_all_reported_together() -> None:
    text = minimal().replace('ready_when = { pattern = "^> $" }\n', "") + (
        '\n[parse]\nidle = ["^ok$", "(?<=x)y"]\n'
    )
    assert errors(text) == [
        ("startup.ready_when", "required"),
        ("parse.idle[1]", "look-around is not supported (RE2 subset): (?<="),
    ]


def test_errors_name_the_file(tmp_path: Path) -> None:
    f = write(tmp_path / "bad.toml", minimal().replace("cols = 120", 'cols = "wide"'))
    with pytest.raises(ManifestInvalid) as info:
        load_manifest(f)
    assert info.value.lines() == [f"{f}: pty.cols: expected an integer, got string"]


def test_toml_syntax_error_names_the_file(tmp_path: Path) -> None:
    f = write(tmp_path / "broken.toml", "[agent\nname = 1\n")
    with pytest.raises(ManifestInvalid) as info:
        load_manifest(f)
    (line,) = info.value.lines()
    assert line.startswith(f"{f}: not valid TOML: ")


def test_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ManifestInvalid) as info:
        load_manifest(tmp_path / "nope.toml")
    assert info.value.lines()[0].startswith(f"{tmp_path / 'nope.toml'}: cannot read")


@pytest.mark.parametrize(("old", "new", "path", "message"), [
    ("cols = 120", "cols = true", "pty.cols", "expected an integer, got boolean"),
    ("cols = 120", "cols = 0", "pty.cols", "must be greater than zero"),
    ("streaming_output = true", 'streaming_output = "yes"', "capabilities.streaming_output",
     "expected a boolean, got string"),
    ("profiles = []", 'profiles = "coding"', "agent.profiles",
     "expected an array of strings, got a single string"),
    ('name = "demo"', 'name = "../etc"', "agent.name",
     "must start with a letter or digit and hold only letters, digits, '.', '_' or '-' "
     "(it names a manifest file)"),
    ("[pty]", '[pty]\nsigint_cancels_turn = "soft"', "pty.sigint_cancels_turn",
     '"soft" is not one of "graceful", "hard", "none"'),
])
def test_types_are_strict(old: str, new: str, path: str, message: str) -> None:
    assert errors(minimal().replace(old, new)) == [(path, message)]


# --------------------------------------------------------------------------
# safety: argv arrays and program names
# --------------------------------------------------------------------------

SHELL = "must be an array of strings (argv), not a shell string"


def test_shell_string_command_is_rejected() -> None:
    text = minimal().replace('command = ["demo"]', 'command = "demo --flag && rm -rf ~"')
    assert errors(text) == [("startup.command", SHELL)]


def test_shell_string_probe_and_fast_path_are_rejected() -> None:
    extra = '[probe]\ncommand = "demo --version"\n[fast_path]\nstream_json = "demo -p"\n'
    assert dict(errors(minimal(extra=extra))) == {
        "probe.command": SHELL,
        "fast_path.stream_json": (
            "must be false, true or an array of strings (argv), not a shell string"
        ),
    }


@pytest.mark.parametrize("program", ["demo;rm", "de mo", "$(evil)", "`x`", "a|b", "~/bin/x",
                                     "./demo", "bin/demo", "-rf", ".."])
def test_unsafe_program_names_are_rejected(program: str) -> None:
    text = minimal().replace('binary = "demo"', f'binary = "{program}"').replace(
        'command = ["demo"]', f'command = ["{program}", "ok; args are not a shell"]'
    )
    found = paths(text)
    assert found == {"agent.binary", "startup.command[0]"}


def test_absolute_program_paths_are_accepted() -> None:
    text = minimal(binary="/opt/agents/bin/demo-1.2")
    assert parse_manifest(text, "m").startup.command == ("/opt/agents/bin/demo-1.2",)


def test_argv_elements_must_be_strings() -> None:
    text = minimal().replace('command = ["demo"]', 'command = ["demo", 3, "x"]')
    assert errors(text) == [("startup.command[1]", "expected a string, got integer")]


def test_empty_argv_is_rejected() -> None:
    assert errors(minimal().replace('command = ["demo"]', "command = []")) == [
        ("startup.command", "must not be empty (argv[0] is the program)")
    ]


# --------------------------------------------------------------------------
# unknown keys and x- extensions
# --------------------------------------------------------------------------

def test_unknown_keys_are_errors_but_x_keys_are_kept() -> None:
    text = minimal(extra="x-top = 1\n[fast_path]\nx-inproc = true\nx-hint = { a = 1 }\n"
                         "[pty]\n").replace("[pty]\ncols", "[pty]\nx-font = \"mono\"\ncols")
    text = text.replace("[pty]\n\n", "")
    m = parse_manifest(text, "m")
    assert m.fast_path.x_inproc is True
    assert m.extensions == {
        "capabilities.x-top": 1, "fast_path.x-hint": {"a": 1}, "pty.x-font": "mono",
    }
    data = manifest_data(m)
    assert data["pty"]["x-font"] == "mono" and data["fast_path"]["x-inproc"] is True
    bad = minimal().replace("rows = 40", "rows = 40\ncolour = true")
    assert errors(bad) == [("pty.colour", 'unknown field (experimental fields start with "x-")')]


def test_renamed_fields_are_reported_under_their_toml_key() -> None:
    assert errors(minimal(extra='[fast_path]\nx-inproc = "yes"\n')) == [
        ("fast_path.x-inproc", "expected a boolean, got string")
    ]


def test_revision_must_be_a_date() -> None:
    assert parse_manifest('revision = "2026-05-18"\n' + minimal(), "m").revision == "2026-05-18"
    assert parse_manifest("revision = 2026-05-18\n" + minimal(), "m").revision == "2026-05-18"
    assert errors('revision = "May 2026"\n' + minimal()) == [
        ("revision", '"May 2026" is not a date in YYYY-MM-DD form')
    ]


def test_a2a_serve_at_must_be_false_or_a_url() -> None:
    ok = parse_manifest(minimal(extra='[fast_path]\na2a_serve_at = "http://127.0.0.1:4000"\n'),
                        "m")
    assert ok.fast_path.a2a_serve_at == "http://127.0.0.1:4000"
    assert paths(minimal(extra="[fast_path]\na2a_serve_at = true\n")) == {"fast_path.a2a_serve_at"}
    assert paths(minimal(extra='[fast_path]\na2a_serve_at = "ftp://x"\n')) == {
        "fast_path.a2a_serve_at"
    }


def test_manifest_data_is_valid_toml_data() -> None:
    m = load_manifest(bundled_dir() / "claude-code.toml")
    again = tomllib.loads(dumps(manifest_data(m)))
    assert again["agent"]["binary"] == "claude"
    assert tuple(again["parse"]["idle"]) == m.parse.idle  # the footer its TUI shows
    assert again["parse"]["idle"] == ["\\? for shortcuts\\s*$"]
