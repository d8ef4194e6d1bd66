"""Probe answers are remembered, and forgotten when the program changes.

Each probe program written here appends a line to a file every time it runs,
so the tests count real spawns instead of timing anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.manifest.helpers import executable, minimal, roots
from trio_cap.actors.manifest.probe_cache import ProbeCache, probe_key
from trio_cap.actors.manifest.resolve import resolve_agent

NAME = "counted"


def counted_probe(tmp: Path, *, fail: bool = False, version: str = "1") -> Path:
    manifest = minimal(NAME, NAME).replace("'", "'\\''")
    action = "exit 3" if fail else f"printf '%s\\n' '{manifest}'\nexit 0"
    return executable(tmp / "bin" / NAME, f"""echo run >> '{tmp / "runs"}'
# version {version}
if [ "$1" = "--cap-manifest" ]; then
{action}
fi
exit 2
""")


def runs(tmp: Path) -> int:
    path = tmp / "runs"
    return len(path.read_text().splitlines()) if path.exists() else 0


async def test_a_second_resolve_in_the_process_does_not_spawn(tmp_path: Path) -> None:
    r = roots(tmp_path)
    counted_probe(tmp_path)
    cache = ProbeCache(tmp_path / "cache")
    first = await resolve_agent(NAME, roots=r, probe_cache=cache)
    for _ in range(5):
        again = await resolve_agent(NAME, roots=r, probe_cache=cache)
        assert again.source == "probe" and again.manifest == first.manifest
    assert runs(tmp_path) == 1


async def test_a_new_process_reuses_the_disk_cache(tmp_path: Path) -> None:
    r = roots(tmp_path)
    counted_probe(tmp_path)
    await resolve_agent(NAME, roots=r, probe_cache=ProbeCache(tmp_path / "cache"))
    fresh = ProbeCache(tmp_path / "cache")  # what a new process starts with
    got = await resolve_agent(NAME, roots=r, probe_cache=fresh)
    assert got.manifest.agent.name == NAME
    assert runs(tmp_path) == 1


async def test_a_changed_program_is_probed_again(tmp_path: Path) -> None:
    r = roots(tmp_path)
    program = counted_probe(tmp_path)
    cache = ProbeCache(tmp_path / "cache")
    await resolve_agent(NAME, roots=r, probe_cache=cache)
    counted_probe(tmp_path, version="22")  # another size
    await resolve_agent(NAME, roots=r, probe_cache=cache)
    st = program.stat()
    os.utime(program, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # same size
    await resolve_agent(NAME, roots=r, probe_cache=cache)
    assert runs(tmp_path) == 3


async def test_a_damaged_cache_file_is_ignored_and_rewritten(tmp_path: Path) -> None:
    r = roots(tmp_path)
    counted_probe(tmp_path)
    await resolve_agent(NAME, roots=r, probe_cache=ProbeCache(tmp_path / "cache"))
    (entry,) = (tmp_path / "cache").glob("*.json")
    for damage in (b"\x00\xff not json", b'{"key": [], "at": 0, "text": "x"}', b"[]"):
        entry.write_bytes(damage)
        got = await resolve_agent(NAME, roots=r, probe_cache=ProbeCache(tmp_path / "cache"))
        assert got.manifest.agent.name == NAME
    assert runs(tmp_path) == 4
    assert json.loads(entry.read_text())["text"].startswith("\n[agent]")


async def test_a_failed_probe_is_remembered_only_in_the_process(tmp_path: Path) -> None:
    r = roots(tmp_path)
    counted_probe(tmp_path, fail=True)
    cache = ProbeCache(tmp_path / "cache")
    for _ in range(3):
        try:
            await resolve_agent(NAME, roots=r, probe_cache=cache)
        except Exception as exc:  # no manifest anywhere: not found, with the reason
            assert "remembered" in str(exc) or "status 3" in str(exc)
    assert runs(tmp_path) == 1
    assert not list((tmp_path / "cache").glob("*.json"))
    try:
        await resolve_agent(NAME, roots=r, probe_cache=ProbeCache(tmp_path / "cache"))
    except Exception:
        pass
    assert runs(tmp_path) == 2


async def test_no_cache_probes_every_time(tmp_path: Path) -> None:
    r = roots(tmp_path)
    counted_probe(tmp_path)
    for _ in range(3):
        await resolve_agent(NAME, roots=r, probe_cache=None)
    assert runs(tmp_path) == 3


def test_the_key_names_the_resolved_program(tmp_path: Path) -> None:
    program = counted_probe(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(program)
    assert probe_key(str(link), "/bin") == probe_key(str(program), "/bin")
    assert probe_key(str(program), "/bin") != probe_key(str(program), "/usr/bin")
    assert probe_key(str(tmp_path / "missing"), None) is None


def test_cap_manifest_resolve_no_cache_probes_again(tmp_path: Path) -> None:
    counted_probe(tmp_path)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.defpath}",
           "XDG_CACHE_HOME": str(tmp_path / "xdg-cache"),
           "XDG_CONFIG_HOME": str(tmp_path / "xdg-config")}
    cap = [sys.executable, "-m", "trio_cap.actors.cli", "manifest", "resolve", NAME]
    for extra in ([], [], ["--no-cache"]):
        done = subprocess.run([*cap, *extra], env=env, capture_output=True, text=True,
                              timeout=60, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "probe" in done.stdout
    assert runs(tmp_path) == 2  # the second call reused the disk cache; --no-cache did not
    assert list((tmp_path / "xdg-cache" / "trio-cap" / "probes").glob("*.json"))


def test_a_change_to_trio_caps_own_code_is_a_new_key(tmp_path) -> None:
    """cap-agent's console script never changes when the code behind it does."""
    import os

    from trio_cap.actors.manifest import probe_cache

    program = tmp_path / "agent"
    program.write_text("#!/bin/sh\n")
    key = probe_cache.probe_key(str(program), "/bin")
    assert key is not None and key[-1] == probe_cache.own_code_stamp()
    assert probe_cache.own_code_stamp() >= os.stat(probe_cache.__file__).st_mtime_ns
