"""Fixtures: ``cap-agent --bridge …`` wrapped as the ``claude`` an SDK execs."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from tests.agent_stream_json.conftest import cap_agent  # noqa: F401 - re-exported fixture
from tests.harness.conftest import PeerFactory, model_server, peer  # noqa: F401

BridgeCli = Callable[..., str]


@pytest.fixture
def bridge_cli(tmp_path: Path, cap_agent: str) -> BridgeCli:  # noqa: F811
    """``bridge_cli(agent, binding, env=None)`` → a script that execs ``cap-agent --bridge
    AGENT --binding B`` with the SDK's own flags appended.  With ``env`` it is the whole
    environment (``env -i``), so the driven agent sees nothing of the test's."""

    def make(agent: str, binding: str, *, env: Mapping[str, str] | None = None,
             extra: Sequence[str] = ()) -> str:
        script = tmp_path / "bin" / "claude"
        script.parent.mkdir(exist_ok=True)
        argv = [cap_agent, "--bridge", agent, "--binding", binding, *extra]
        if env is None:
            # the driven cap-agent is found as `cap` on PATH, next to this interpreter
            bindir = str(Path(sys.executable).parent)
            prefix = f"PATH={shlex.quote(bindir)}:\"$PATH\" exec "
        else:
            pairs = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
            prefix = f"exec env -i {pairs} "
        script.write_text("#!/bin/sh\n" + prefix + shlex.join(argv) + ' "$@"\n')
        script.chmod(0o755)
        assert os.access(script, os.X_OK)
        return str(script)

    return make
