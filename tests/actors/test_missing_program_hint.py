"""A missing agent program is reported with the fix: which peer to install, or which
directory to put on PATH when `cap peers install` already put it in the cache."""

import json

from trio_cap.actors.peers.catalog import PEERS
from trio_cap.actors.peers.hints import missing_program
from trio_cap.actors.peers.install import MARKER, binary_path, peer_dir


def test_a_known_peer_not_installed_names_the_install_command(tmp_path):
    text = missing_program("codex-acp", root=tmp_path)
    assert "program 'codex-acp' not found on PATH" in text
    assert "cap peers install codex-acp" in text


def test_a_known_peer_installed_in_the_cache_names_its_directory(tmp_path):
    spec = PEERS["codex-acp"]
    binary = binary_path(spec, tmp_path)
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    (peer_dir(spec, tmp_path) / MARKER).write_text(json.dumps({"version_output": "x"}))
    text = missing_program("codex-acp", root=tmp_path)
    assert str(binary.parent) in text and "add that directory to PATH" in text


def test_an_unknown_program_and_a_missing_path():
    assert missing_program("no-such-tool").endswith("install it, or put its directory on PATH")
    assert "does not exist or is not executable" in missing_program("/nonexistent/claude")
