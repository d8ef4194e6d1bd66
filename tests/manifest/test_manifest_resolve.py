"""Resolution order with temporary config dirs, probing real executables, ad-hoc specs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import trio

from tests.manifest.helpers import executable, manifest_printer, minimal, roots, write
from trio_cap.actors.manifest import (
    AdHocError,
    ManifestInvalid,
    ManifestNotFound,
    ProbeFailed,
    SearchRoots,
    adhoc_manifest,
    list_agents,
    probe_text,
    resolve_agent,
)
from trio_cap.actors.manifest import resolve as resolve_mod

NAME = "tcap-demo"


def marked(rule: str, name: str = NAME) -> str:
    """A valid manifest for ``name`` whose PTY size says which rule provided it."""
    cols = {"path": 101, "in-package": 102, "user": 103, "system": 104, "probe": 105,
            "bundled": 106}[rule]
    return minimal(name=name, binary=name).replace("cols = 120", f"cols = {cols}")


def cols_of(rule: str) -> int:
    return int(marked(rule).split("cols = ")[1].split()[0])


def populate(tmp: Path, r: SearchRoots, rules: set[str]) -> None:
    """Put a manifest for NAME where each of ``rules`` looks."""
    if "in-package" in rules:
        pkg = tmp / "pkg"
        write(pkg / "cap-agent.toml", marked("in-package"))
        executable(pkg / "bin" / NAME, "exit 3\n")
        link = tmp / "bin" / NAME
        link.unlink(missing_ok=True)
        link.symlink_to(pkg / "bin" / NAME)  # like npm's .bin/ links: follow to the package
    if "user" in rules:
        write(r.user_dir / f"{NAME}.toml", marked("user"))
    if "system" in rules:
        write(r.system_dir / f"{NAME}.toml", marked("system"))
    if "probe" in rules:
        link = tmp / "bin" / NAME
        link.unlink(missing_ok=True)
        manifest_printer(link, marked("probe"))
    if "bundled" in rules:
        write(r.bundled_dir / f"{NAME}.toml", marked("bundled"))


@pytest.mark.parametrize(("present", "winner"), [
    ({"in-package", "user", "system", "bundled"}, "in-package"),
    ({"user", "system", "probe", "bundled"}, "user"),
    ({"system", "probe", "bundled"}, "system"),
    ({"probe", "bundled"}, "probe"),
    ({"bundled"}, "bundled"),
])
async def test_resolution_order(tmp_path: Path, present: set[str], winner: str) -> None:
    r = roots(tmp_path)
    populate(tmp_path, r, present)
    got = await resolve_agent(NAME, roots=r)
    assert got.source == winner
    assert got.manifest.pty.cols == cols_of(winner)
    earlier = resolve_mod.RULES[1 : resolve_mod.RULES.index(winner)]
    assert [r for r in dict.fromkeys(a.rule for a in got.tried) if r != winner] == list(earlier)


async def test_explicit_path_comes_first(tmp_path: Path) -> None:
    r = roots(tmp_path)
    populate(tmp_path, r, {"user", "bundled"})
    f = write(tmp_path / "mine" / "agent.toml", marked("path"))
    got = await resolve_agent(str(f), roots=r)
    assert (got.source, got.location, got.rule_number) == ("path", str(f), 1)
    assert got.manifest.pty.cols == cols_of("path")
    with pytest.raises(ManifestNotFound):
        await resolve_agent(str(tmp_path / "missing.toml"), roots=r)


async def test_probe_of_a_real_executable(tmp_path: Path) -> None:
    r = roots(tmp_path)
    populate(tmp_path, r, {"probe"})
    got = await resolve_agent(NAME, roots=r)
    assert got.source == "probe" and got.rule_number == 5
    assert got.location == f"{tmp_path / 'bin' / NAME} --cap-manifest"
    assert got.manifest.agent.name == NAME


async def test_probe_can_be_disabled(tmp_path: Path) -> None:
    r = roots(tmp_path)
    populate(tmp_path, r, {"probe", "bundled"})
    got = await resolve_agent(NAME, roots=r, probe=False)
    assert got.source == "bundled"
    assert ("probe", "skipped (probing disabled)") in [(a.rule, a.outcome) for a in got.tried]


async def test_a_program_without_cap_manifest_support_falls_through(tmp_path: Path) -> None:
    r = roots(tmp_path)
    populate(tmp_path, r, {"bundled"})
    executable(tmp_path / "bin" / NAME, 'echo "usage: unknown option $1" >&2\nexit 2\n')
    got = await resolve_agent(NAME, roots=r)
    assert got.source == "bundled"
    probe = next(a for a in got.tried if a.rule == "probe")
    assert probe.outcome == "exited with status 2"


async def test_a_program_printing_something_else_falls_through(tmp_path: Path) -> None:
    r = roots(tmp_path)
    populate(tmp_path, r, {"bundled"})
    executable(tmp_path / "bin" / NAME, 'echo "Usage: tcap-demo [options]"\n')
    got = await resolve_agent(NAME, roots=r)
    assert got.source == "bundled"
    assert next(a for a in got.tried if a.rule == "probe").outcome == "output is not a manifest"


async def test_an_invalid_probed_manifest_is_an_error(tmp_path: Path) -> None:
    r = roots(tmp_path)
    populate(tmp_path, r, {"bundled"})
    manifest_printer(tmp_path / "bin" / NAME, marked("probe").replace("rows = 40", ""))
    with pytest.raises(ManifestInvalid) as info:
        await resolve_agent(NAME, roots=r)
    assert info.value.lines() == [f"{tmp_path / 'bin' / NAME} --cap-manifest: pty.rows: required"]


async def test_a_broken_user_manifest_is_never_skipped(tmp_path: Path) -> None:
    r = roots(tmp_path)
    populate(tmp_path, r, {"system", "bundled"})
    f = write(r.user_dir / f"{NAME}.toml", marked("user").replace('["tcap-demo"]', '"tcap-demo"'))
    with pytest.raises(ManifestInvalid) as info:
        await resolve_agent(NAME, roots=r)
    assert info.value.lines() == [
        f"{f}: startup.command: must be an array of strings (argv), not a shell string"
    ]


async def test_in_package_manifest_for_another_agent_is_skipped(tmp_path: Path) -> None:
    r = roots(tmp_path)
    populate(tmp_path, r, {"in-package", "bundled"})
    write(tmp_path / "pkg" / "cap-agent.toml", marked("in-package", name="someone-else"))
    got = await resolve_agent(NAME, roots=r, probe=False)
    assert got.source == "bundled"
    assert any("names agent 'someone-else'" in a.outcome for a in got.tried)


async def test_not_found_lists_every_rule(tmp_path: Path) -> None:
    r = roots(tmp_path)
    with pytest.raises(ManifestNotFound) as info:
        await resolve_agent(NAME, roots=r)
    assert [a.rule for a in info.value.tried] == [
        "in-package", "user", "system", "probe", "bundled",
    ]
    assert info.value.code == "cap_manifest_missing"


async def test_bad_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not an agent name"):
        await resolve_agent("evil;rm", roots=roots(tmp_path))


def test_search_roots_follow_xdg_config_home(tmp_path: Path) -> None:
    r = SearchRoots.from_env({"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "HOME": "/nowhere",
                              "PATH": "/bin"})
    assert r.user_dir == tmp_path / "cfg" / "cap" / "agents"
    assert r.path == "/bin"
    r = SearchRoots.from_env({"HOME": str(tmp_path / "home")})
    assert r.user_dir == tmp_path / "home" / ".config" / "cap" / "agents"
    r = SearchRoots.from_env({"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": "relative"})
    assert r.user_dir == tmp_path / "home" / ".config" / "cap" / "agents"
    assert r.system_dir == Path("/usr/share/cap-agents")


async def test_default_roots_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setattr(resolve_mod, "SYSTEM_DIR", tmp_path / "nosys")
    write(tmp_path / "cfg" / "cap" / "agents" / f"{NAME}.toml", marked("user"))
    got = await resolve_agent(NAME)
    assert got.source == "user"
    assert got.location == str(tmp_path / "cfg" / "cap" / "agents" / f"{NAME}.toml")


async def test_the_real_bundled_manifests_resolve_last(tmp_path: Path) -> None:
    r = roots(tmp_path)
    r = SearchRoots(user_dir=r.user_dir, system_dir=r.system_dir, path=r.path)
    got = await resolve_agent("cap-agent", roots=r, probe=False)
    assert got.source == "bundled" and got.manifest.fast_path.x_inproc


async def test_list_shows_each_agent_and_where_it_wins(tmp_path: Path) -> None:
    r = roots(tmp_path)
    write(r.user_dir / "alpha.toml", marked("user", name="alpha"))
    write(r.system_dir / "alpha.toml", marked("system", name="alpha"))
    write(r.system_dir / "beta.toml", marked("system", name="beta"))
    write(r.bundled_dir / "gamma.toml", marked("bundled", name="gamma"))
    write(r.bundled_dir / "broken.toml", "[agent]\n")
    rows = await list_agents(r)
    assert [(x.name, x.source, x.location) for x in rows] == [
        ("alpha", "user", str(r.user_dir / "alpha.toml")),
        ("beta", "system", str(r.system_dir / "beta.toml")),
        ("broken", "invalid", str(r.bundled_dir / "broken.toml")),
        ("gamma", "bundled", str(r.bundled_dir / "gamma.toml")),
    ]
    assert rows[2].problem == "8 error(s)"


# --------------------------------------------------------------------------
# the probe's fences
# --------------------------------------------------------------------------

async def test_probe_times_out_and_kills_its_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    prog = executable(tmp_path / "slow", f"sleep 30 &\necho $! > {pidfile}\nwait\n")
    # the sleep would keep the shell (and an unkilled probe) for 30 s; killed,
    # it exits well inside the bound. SIGKILL lands when the kernel next runs
    # the child, so /proc may still say "S" just after the kill: wait for the
    # exit itself (a pidfd turns readable then)
    with trio.fail_after(15):
        with pytest.raises(ProbeFailed, match=r"no answer within 0\.3 s"):
            await probe_text(str(prog), time_limit=0.3)
        await _exited(int(pidfile.read_text()))


async def _exited(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        await trio.lowlevel.checkpoint()  # a late arrival still meets the bound
        return
    try:
        await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)


async def test_probe_output_is_capped(tmp_path: Path) -> None:
    prog = executable(tmp_path / "chatty", "while :; do echo xxxxxxxxxxxxxxxxxxxxxxxxxxxx; done\n")
    with pytest.raises(ProbeFailed, match="output exceeds 4096 bytes"):
        await probe_text(str(prog), max_bytes=4096, time_limit=10)


async def test_probe_refuses_unsafe_program_names(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(ProbeFailed, match="not probed"):
        await probe_text(f"true; touch {marker}")
    assert not marker.exists()


async def test_probe_reports_a_missing_program() -> None:
    with pytest.raises(ProbeFailed, match="cannot start"):
        await probe_text("/nonexistent/trio-cap-probe-target")


async def test_probe_returns_the_text(tmp_path: Path) -> None:
    prog = manifest_printer(tmp_path / "p", marked("probe"))
    text = await probe_text(str(prog))
    assert 'name = "tcap-demo"' in text and "cols = 105" in text


# --------------------------------------------------------------------------
# ad-hoc specs
# --------------------------------------------------------------------------

def test_adhoc_pty_splits_the_command_into_argv() -> None:
    m, binding = adhoc_manifest("pty:python3 -i -c 'print(\"a b\")'")
    assert binding == "pty"
    assert m.startup.command == ("python3", "-i", "-c", 'print("a b")')
    assert (m.agent.name, m.agent.binary) == ("python3", "python3")
    assert m.fast_path.stream_json is False and m.fast_path.acp_stdio is False


@pytest.mark.parametrize(("spec", "binding", "field", "argv"), [
    ("stream-json:claude -p --verbose", "stream-json", "stream_json",
     ("claude", "-p", "--verbose")),
    ("acp:opencode acp", "acp", "acp_stdio", ("opencode", "acp")),
])
def test_adhoc_fast_paths(spec: str, binding: str, field: str, argv: tuple[str, ...]) -> None:
    m, got = adhoc_manifest(spec)
    assert got == binding
    assert getattr(m.fast_path, field) == argv


async def test_adhoc_spec_plans_exactly_its_binding() -> None:
    got = await resolve_agent("acp:opencode acp")
    assert (got.source, got.only_binding, got.rule_number) == ("ad-hoc", "acp", None)
    plan = got.plan(which=lambda p: "/bin/" + p)
    assert [(c.binding, c.argv) for c in plan.candidates] == [("acp", ("opencode", "acp"))]


async def test_adhoc_a2a() -> None:
    got = await resolve_agent("a2a:http://127.0.0.1:4000/agent")
    assert got.only_binding == "a2a"
    assert got.manifest.fast_path.a2a_serve_at == "http://127.0.0.1:4000/agent"
    assert got.manifest.agent.name == "a2a-127.0.0.1-4000"
    plan = got.plan(which=lambda _p: None)
    assert [(c.binding, c.url) for c in plan.candidates] == [
        ("a2a", "http://127.0.0.1:4000/agent"),
    ]
    assert plan.chosen is not None


def test_adhoc_relative_program_becomes_absolute(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    m, _ = adhoc_manifest("pty:./my-agent --tui")
    assert m.startup.command == (str(tmp_path / "my-agent"), "--tui")


@pytest.mark.parametrize(("spec", "message"), [
    ("pty:", "the command is empty"),
    ("pty:'unterminated", "cannot split the command"),
    ("acp:rm;x", "must be a plain program name"),
    ("a2a:ftp://host", "expected a2a:http"),
    ("a2a:not a url", "expected a2a:http"),
])
def test_bad_adhoc_specs(spec: str, message: str) -> None:
    with pytest.raises(AdHocError, match=message):
        adhoc_manifest(spec)


def test_python_is_safe_to_name(tmp_path: Path) -> None:
    # the test suite's own interpreter path must pass the program rule (used above)
    assert adhoc_manifest(f"pty:{sys.executable} -i")[0].startup.command[0] == sys.executable
    assert os.path.isabs(sys.executable)
