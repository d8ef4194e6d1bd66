"""The installer's logic, with stand-in ``npm`` and ``python`` programs (no network).

The real installs are exercised by CI's ``cap peers install all`` and the
``peers`` tests; these check reuse, markers, failures and the pip path.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from trio_cap.actors.peers.catalog import PEERS, resolve_names
from trio_cap.actors.peers.install import (
    InstallFailed,
    PeerMissing,
    find_binary,
    install_peer,
    install_peers,
    peer_dir,
    peers_root,
    status,
)

# Stands in for npm: records its argv, then installs a bin that prints a version.
FAKE_NPM = """#!/bin/sh
echo "$@" >> "$FAKE_LOG"
prefix="$3"
[ -f "$prefix/package.json" ] || { echo "no stub package.json" >&2; exit 7; }
[ -n "$FAKE_FAIL" ] && { echo "npm ERR! 404 Not Found - $FAKE_FAIL" >&2; exit 1; }
mkdir -p "$prefix/node_modules/.bin"
for b in claude gemini opencode codex codex-acp claude-code-acp; do
  printf "#!/bin/sh\\necho '9.9.9 ($b)'\\n" > "$prefix/node_modules/.bin/$b"
  chmod +x "$prefix/node_modules/.bin/$b"
done
"""

# Stands in for python: "-m venv DIR" makes DIR/bin/python (itself); "-m pip" makes aider.
FAKE_PYTHON = """#!/bin/sh
echo "$@" >> "$FAKE_LOG"
if [ "$2" = venv ]; then mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; exit 0; fi
bindir=$(dirname "$0")
printf '#!/bin/sh\\necho aider 0.86.2\\n' > "$bindir/aider"; chmod +x "$bindir/aider"
"""


def logged(log: Path) -> list[str]:
    return log.read_text().splitlines()


def executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    tools = tmp_path / "tools"
    tools.mkdir()
    executable(tools / "npm", FAKE_NPM)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.log"))
    monkeypatch.setenv("TRIO_CAP_PEERS_PYTHON", str(executable(tools / "python", FAKE_PYTHON)))
    return tmp_path / "calls.log"


async def test_npm_install_marker_and_reuse(tmp_path: Path, fake_tools: Path) -> None:
    root = tmp_path / "peers"
    spec = PEERS["claude-code"]
    with pytest.raises(PeerMissing, match="cap peers install claude-code"):
        find_binary("claude-code", root)
    st = await install_peer(spec, root)
    assert st.installed and not st.reused and st.version_output == "9.9.9 (claude)"
    assert st.binary == peer_dir(spec, root) / "node_modules" / ".bin" / "claude"
    assert find_binary("claude-code", root) == st.binary
    calls = logged(fake_tools)
    assert calls == [f"install --prefix {peer_dir(spec, root)} --no-audit --no-fund "
                     "--foreground-scripts --loglevel=warn @anthropic-ai/claude-code@2.1.332"]
    again = await install_peer(spec, root)
    assert again.reused and len(logged(fake_tools)) == 1
    forced = await install_peer(spec, root, force=True)
    assert not forced.reused and len(logged(fake_tools)) == 2


async def test_failed_install_reports_log_tail_and_leaves_no_marker(
    tmp_path: Path, fake_tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_FAIL", "@openai/codex")
    root = tmp_path / "peers"
    with pytest.raises(InstallFailed, match="404 Not Found - @openai/codex"):
        await install_peer(PEERS["codex"], root)
    assert not status(PEERS["codex"], root).installed
    monkeypatch.delenv("FAKE_FAIL")
    assert (await install_peer(PEERS["codex"], root)).installed


async def test_pip_peer_gets_its_own_venv(tmp_path: Path, fake_tools: Path) -> None:
    root = tmp_path / "peers"
    st = await install_peer(PEERS["aider"], root)
    venv = peer_dir(PEERS["aider"], root) / "venv"
    assert st.binary == venv / "bin" / "aider" and st.version_output == "aider 0.86.2"
    calls = logged(fake_tools)
    assert calls[0] == f"-m venv {venv}"
    assert calls[1].endswith("install --disable-pip-version-check --no-input --progress-bar "
                             "off aider-chat==0.86.2")


async def test_install_many_collects_failures(
    tmp_path: Path, fake_tools: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_FAIL", "everything")
    done, failed = await install_peers(resolve_names(["aider", "gemini-cli", "opencode"]),
                                       tmp_path / "peers", concurrency=2)
    assert [s.spec.name for s in done] == ["aider"]
    assert sorted(failed) == ["gemini-cli", "opencode"]


def test_interrupted_install_is_not_installed(tmp_path: Path) -> None:
    spec = PEERS["opencode"]
    binary = peer_dir(spec, tmp_path) / "node_modules" / ".bin" / "opencode"
    binary.parent.mkdir(parents=True)
    executable(binary, "#!/bin/sh\n")
    assert not status(spec, tmp_path).installed  # program present, marker missing


def test_version_override_and_names(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRIO_CAP_PEER_CLAUDE_CODE_VERSION", "2.1.197")
    spec = PEERS["claude-code"]
    assert spec.requirement() == "@anthropic-ai/claude-code@2.1.197"
    assert peer_dir(spec, tmp_path).name == "claude-code-2.1.197"
    assert next(s.name for s in resolve_names(["codex", "all"])) == "codex"
    assert len(resolve_names(["all", "aider"])) == len(PEERS)
    with pytest.raises(KeyError, match="unknown peer 'nope'"):
        resolve_names(["nope"])


def test_peers_root_resolution() -> None:
    assert peers_root({"TRIO_CAP_PEERS_DIR": "/x/p"}) == Path("/x/p")
    assert peers_root({"XDG_CACHE_HOME": "/c"}) == Path("/c/trio-cap/peers")
    assert peers_root({}) == Path.home() / ".cache" / "trio-cap" / "peers"
