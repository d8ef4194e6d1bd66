"""What to tell a user whose agent program is missing: the fix, not just the failure.

``cap run --agent codex`` fails when ``codex-acp`` is not on PATH; the useful
message says whether ``cap peers install`` knows the program, whether it is
already installed in the peers cache (just not on PATH), and what to type.
"""

from __future__ import annotations

from pathlib import Path

from trio_cap.actors.peers.catalog import PEERS
from trio_cap.actors.peers.install import status


def missing_program(program: str, root: Path | None = None) -> str:
    """One sentence: ``program`` is not on PATH, and how to get it there."""
    name = Path(program).name
    peer = next((s for s in PEERS.values() if s.binary == name), None)
    if "/" in program:
        where = f"program {program!r} does not exist or is not executable"
    else:
        where = f"program {program!r} not found on PATH"
    if peer is None:
        return f"{where}; install it, or put its directory on PATH"
    try:
        st = status(peer, root)
    except OSError:
        st = None
    if st is not None and st.installed:
        return (f"{where}; `cap peers install` put it in {st.binary.parent}: "
                "add that directory to PATH")
    return (f"{where}; install it with `cap peers install {peer.name}` and add the directory "
            "it prints to PATH")
