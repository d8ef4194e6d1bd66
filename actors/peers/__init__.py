"""Real CLI agents as test peers: pinned installs in a per-user cache, isolated environments.

``cap peers install`` puts each agent under ``~/.cache/trio-cap/peers/<name>-<version>``;
:func:`isolated_env` gives one run its own HOME and config pointing at a model URL;
:func:`run_peer` / :func:`spawn_peer` start it in its own process group and end the group.
"""

from trio_cap.actors.bindings.process import kill_process_group
from trio_cap.actors.peers.catalog import PEERS, PeerSpec, resolve_names
from trio_cap.actors.peers.env import PeerEnv, isolated_env
from trio_cap.actors.peers.install import (
    InstallFailed,
    PeerMissing,
    PeerStatus,
    find_binary,
    install_peer,
    install_peers,
    peers_root,
    status,
)
from trio_cap.actors.peers.process import PeerRun, run_peer, spawn_peer

__all__ = [
    "PEERS",
    "InstallFailed",
    "PeerEnv",
    "PeerMissing",
    "PeerRun",
    "PeerSpec",
    "PeerStatus",
    "find_binary",
    "install_peer",
    "install_peers",
    "isolated_env",
    "kill_process_group",
    "peers_root",
    "resolve_names",
    "run_peer",
    "spawn_peer",
    "status",
]
