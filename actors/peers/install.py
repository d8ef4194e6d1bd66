"""Install the pinned agents into a per-user cache, outside any repository.

Each peer gets its own directory named ``<name>-<version>``: npm agents are
installed with ``npm install --prefix`` there (their native binaries arrive as
npm optionalDependencies, so nothing is fetched from outside the registry), and
aider gets its own virtualenv.  A ``.installed.json`` marker is written last, so
an interrupted install is detected and redone instead of half-used; a lock file
per peer keeps two concurrent ``cap peers install`` runs from racing.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs
import trio

from trio_cap.actors.peers.catalog import PEERS, PeerSpec

MARKER = ".installed.json"


class PeerMissing(RuntimeError):
    """A peer's program is not installed; the message says how to install it."""


class InstallFailed(RuntimeError):
    """An installer command failed; the message carries the tail of its log."""


def peers_root(environ: Mapping[str, str] | None = None) -> Path:
    """``$TRIO_CAP_PEERS_DIR``, else ``$XDG_CACHE_HOME/trio-cap/peers``, else ``~/.cache/…``."""
    env = os.environ if environ is None else environ
    if env.get("TRIO_CAP_PEERS_DIR"):
        return Path(env["TRIO_CAP_PEERS_DIR"]).expanduser()
    cache = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "trio-cap" / "peers"


def peer_dir(spec: PeerSpec, root: Path) -> Path:
    return root / f"{spec.name}-{spec.pinned_version()}"


def bin_dir(spec: PeerSpec, root: Path) -> Path:
    base = peer_dir(spec, root)
    return base / "venv" / "bin" if spec.installer == "pip" else base / "node_modules" / ".bin"


def binary_path(spec: PeerSpec, root: Path) -> Path:
    return bin_dir(spec, root) / spec.binary


@attrs.frozen
class PeerStatus:
    spec: PeerSpec
    directory: Path
    binary: Path
    installed: bool
    version_output: str | None = None
    seconds: float | None = None
    reused: bool = False


def status(spec: PeerSpec, root: Path | None = None) -> PeerStatus:
    """Installed means: the marker was written and the program is still there."""
    root = peers_root() if root is None else root
    directory = peer_dir(spec, root)
    binary = binary_path(spec, root)
    marker = directory / MARKER
    version_output = None
    installed = marker.is_file() and os.access(binary, os.X_OK)
    if installed:
        try:
            version_output = json.loads(marker.read_text()).get("version_output")
        except (OSError, ValueError):
            installed = False
    return PeerStatus(spec, directory, binary, installed, version_output)


def find_binary(name: str, root: Path | None = None) -> Path:
    """The installed program of ``name``, or :class:`PeerMissing` naming the fix."""
    spec = PEERS[name]
    st = status(spec, root)
    if not st.installed:
        raise PeerMissing(
            f"peer {name!r} ({spec.requirement()}) is not installed under {st.directory}; "
            f"run: cap peers install {name}"
        )
    return st.binary


Progress = Callable[[str], None]


async def _run_logged(argv: list[str], log: Path, env: Mapping[str, str] | None = None) -> None:
    with log.open("ab") as out:
        out.write(("$ " + " ".join(argv) + "\n").encode())
        out.flush()
        proc = await trio.run_process(
            argv, stdin=b"", stdout=out, stderr=out, check=False,
            env=dict(env) if env is not None else None,
        )
    if proc.returncode != 0:
        raise InstallFailed(
            f"{argv[0]} exited with {proc.returncode} (full log: {log}):\n" + _tail(log)
        )


def _tail(log: Path, lines: int = 25) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _npm_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        npm_config_update_notifier="false",
        npm_config_fund="false",
        npm_config_audit="false",
    )
    return env


async def _install_npm(spec: PeerSpec, directory: Path, log: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise InstallFailed("npm is not on PATH; install Node.js 20+ with npm first")
    # npm refuses a --prefix without package.json for packages with postinstall
    # scripts (ENOENT, peers.md), so every prefix gets a stub first.
    (directory / "package.json").write_text(
        json.dumps({"name": f"trio-cap-peer-{spec.name}", "private": True}) + "\n"
    )
    await _run_logged(
        [npm, "install", "--prefix", str(directory), "--no-audit", "--no-fund",
         "--foreground-scripts", "--loglevel=warn", spec.requirement(), *spec.extra_packages],
        log, _npm_env(),
    )


def _base_python() -> str:
    return os.environ.get("TRIO_CAP_PEERS_PYTHON") or sys.executable


async def _install_pip(spec: PeerSpec, directory: Path, log: Path) -> None:
    venv = directory / "venv"
    await _run_logged([_base_python(), "-m", "venv", str(venv)], log)
    await _run_logged(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
         "--no-input", "--progress-bar", "off", spec.requirement()],
        log,
    )
    if spec.sdist:
        sdist = directory / "sdist"
        await _run_logged(
            [str(venv / "bin" / "python"), "-m", "pip", "download", "--disable-pip-version-check",
             "--no-input", "--no-deps", "--no-binary", ":all:", "--progress-bar", "off",
             "-d", str(sdist), spec.requirement()],
            log,
        )
        for archive in sdist.glob("*.tar.gz"):
            shutil.unpack_archive(archive, sdist, filter="data")


def _write_launchers(spec: PeerSpec, directory: Path, root: Path) -> None:
    """Small programs in the bin directory that run a script the package ships."""
    if not spec.launchers:
        return
    where = bin_dir(spec, root)
    where.mkdir(parents=True, exist_ok=True)
    runner = str(where / "python") if spec.installer == "pip" else (shutil.which("node") or "node")
    for name, relative in spec.launchers:
        script = directory / relative.format(version=spec.pinned_version())
        if not script.is_file():
            raise InstallFailed(f"{spec.name}: {script} is not in the installed package")
        launcher = where / name
        launcher.write_text(f"#!/bin/sh\nexec {shlex.quote(runner)} {shlex.quote(str(script))} "
                            '"$@"\n')
        launcher.chmod(0o755)


async def _probe_version(spec: PeerSpec, binary: Path) -> str | None:
    if spec.version_args is None:
        return None
    with trio.move_on_after(60):
        proc = await trio.run_process(
            [str(binary), *spec.version_args], capture_stdout=True, capture_stderr=True,
            check=False, stdin=b"",
        )
        if proc.returncode != 0:
            raise InstallFailed(
                f"{binary} {' '.join(spec.version_args)} exited with {proc.returncode}: "
                + proc.stderr.decode(errors="replace")[-2000:]
            )
        lines = proc.stdout.decode(errors="replace").strip().splitlines()
        return lines[-1] if lines else ""
    raise InstallFailed(f"{binary} {' '.join(spec.version_args)} did not answer within 60 s")


async def _lock(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        await trio.to_thread.run_sync(fcntl.flock, fd, fcntl.LOCK_EX, abandon_on_cancel=True)
    except BaseException:
        os.close(fd)
        raise
    return fd


async def install_peer(
    spec: PeerSpec, root: Path | None = None, *, force: bool = False,
    progress: Progress | None = None,
) -> PeerStatus:
    """Install one peer unless a complete install is already there."""
    root = peers_root() if root is None else root
    root.mkdir(parents=True, exist_ok=True)
    say = progress or (lambda _msg: None)
    fd = await _lock(root / f".{spec.name}.lock")
    try:
        current = status(spec, root)
        if current.installed and not force:
            return attrs.evolve(current, reused=True, seconds=0.0)
        directory = current.directory
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        log = directory / "install.log"
        say(f"installing {spec.name} ({spec.requirement()}) into {directory}")
        started = time.monotonic()
        if spec.installer == "npm":
            await _install_npm(spec, directory, log)
        else:
            await _install_pip(spec, directory, log)
        _write_launchers(spec, directory, root)
        binary = binary_path(spec, root)
        if not os.access(binary, os.X_OK):
            raise InstallFailed(f"{spec.name}: install finished but {binary} is missing")
        version_output = await _probe_version(spec, binary)
        seconds = time.monotonic() - started
        (directory / MARKER).write_text(json.dumps({
            "name": spec.name, "package": spec.package, "version": spec.pinned_version(),
            "binary": str(binary), "version_output": version_output,
            "seconds": round(seconds, 1), "installed_at": time.time(),
        }, indent=1) + "\n")
        return PeerStatus(spec, directory, binary, True, version_output, seconds)
    finally:
        os.close(fd)


async def install_peers(
    specs: list[PeerSpec], root: Path | None = None, *, force: bool = False,
    concurrency: int = 3, progress: Progress | None = None,
) -> tuple[list[PeerStatus], dict[str, BaseException]]:
    """Install several peers at once; failures are collected, not fatal to the others.

    npm installs mostly wait on the network, so a few run side by side; the
    slowest (aider's venv) is started first so it overlaps the rest.
    """
    limiter = trio.CapacityLimiter(max(1, concurrency))
    done: dict[str, PeerStatus] = {}
    failed: dict[str, BaseException] = {}
    order = sorted(specs, key=lambda s: s.installer != "pip")

    async def one(spec: PeerSpec, token: object) -> None:
        try:
            done[spec.name] = await install_peer(spec, root, force=force, progress=progress)
        except (InstallFailed, OSError) as exc:
            failed[spec.name] = exc
        finally:
            limiter.release_on_behalf_of(token)

    async with trio.open_nursery() as nursery:
        for spec in order:
            # Acquired here, in order, so the slowest install really starts first.
            token = object()
            await limiter.acquire_on_behalf_of(token)
            nursery.start_soon(one, spec, token)
    return [done[s.name] for s in specs if s.name in done], failed
