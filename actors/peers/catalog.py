"""The real CLI agents trio-cap tests against, pinned to the versions verified here.

Pins matter more than freshness: each agent's wire behaviour (which API shape it
calls, which side requests it makes, which config keys it honours) was checked
for exactly these releases (``shared/protocols/peers.md`` and
``stream-json.md`` §6).  A pin can be overridden per run with
``TRIO_CAP_PEER_<NAME>_VERSION`` (name upper-cased, ``-`` → ``_``), so a newer
release can be tried without editing code; the override installs side by side
because every install directory carries its version.
"""

from __future__ import annotations

import os
from typing import Literal

import attrs

Installer = Literal["npm", "pip"]
ApiShape = Literal["anthropic", "gemini", "openai-chat", "openai-responses", "none"]
"""``none``: a protocol test peer that calls no model (the ACP SDKs' example agents)."""


@attrs.frozen
class PeerSpec:
    """One installable agent: where it comes from and how to find its program."""

    name: str
    installer: Installer
    package: str
    version: str
    binary: str
    api: ApiShape
    summary: str
    # Arguments that print the version; ``None`` for programs without such a flag.
    version_args: tuple[str, ...] | None = ("--version",)
    # The model name the isolated environment selects by default.  Chosen per peer
    # so that no model-metadata warning ends up in the agent's own output.
    default_model: str = "fake-model"
    # More packages installed beside it (npm), e.g. a peer dependency the package omits.
    extra_packages: tuple[str, ...] = ()
    # pip: also unpack the package's sdist into ``<dir>/sdist`` (examples and test data
    # that only the sdist ships).
    sdist: bool = False
    # Launchers written into the bin directory: name -> script path relative to the
    # install directory, run with the peer's own interpreter (node, or the venv's python).
    # The first one is ``binary`` when the package installs no program of its own.
    launchers: tuple[tuple[str, str], ...] = ()

    def pinned_version(self) -> str:
        key = "TRIO_CAP_PEER_" + self.name.upper().replace("-", "_") + "_VERSION"
        return os.environ.get(key) or self.version

    def requirement(self) -> str:
        sep = "@" if self.installer == "npm" else "=="
        return f"{self.package}{sep}{self.pinned_version()}"


PEERS: dict[str, PeerSpec] = {
    spec.name: spec
    for spec in (
        PeerSpec(
            name="claude-code",
            installer="npm",
            package="@anthropic-ai/claude-code",
            # stream-json.md §6: a plain install resolved 2.1.197; the pinned 2.1.332
            # is the release the stream-json frames were recorded from.
            version="2.1.332",
            binary="claude",
            api="anthropic",
            summary="Claude Code native CLI (stream-json, PTY)",
            # 2.1.332's own default; older names show a "retired" banner in the TUI.
            default_model="claude-opus-5-5",
        ),
        PeerSpec(
            name="claude-code-acp",
            installer="npm",
            package="@zed-industries/claude-code-acp",
            version="0.16.2",
            binary="claude-code-acp",
            api="anthropic",
            summary="Zed's ACP adapter around Claude Code",
            version_args=None,
            default_model="claude-sonnet-4-5",
        ),
        PeerSpec(
            name="gemini-cli",
            installer="npm",
            package="@google/gemini-cli",
            version="0.61.0",
            binary="gemini",
            api="gemini",
            summary="Gemini CLI (stream-json, ACP, PTY)",
        ),
        PeerSpec(
            name="gemini-a2a-server",
            installer="npm",
            package="@google/gemini-cli-a2a-server",
            # peers.md: the only CLI agent speaking A2A natively (draft spelling, card at
            # /.well-known/agent-card.json); its core (0.25) is older than the CLI's.
            version="0.25.2",
            # Its own bin entry is a symlink to a2a-server.mjs, which starts only when
            # argv[1]'s basename is "a2a-server.mjs": a launcher runs the file itself.
            binary="gemini-a2a-server",
            api="gemini",
            summary="Gemini CLI's A2A server (A2A 0.3; binds every interface: run it in "
            "a loopback-only network namespace)",
            version_args=None,
            launchers=(("gemini-a2a-server",
                        "node_modules/@google/gemini-cli-a2a-server/dist/a2a-server.mjs"),),
        ),
        PeerSpec(
            name="opencode",
            installer="npm",
            package="opencode-ai",
            version="1.18.33",
            binary="opencode",
            api="openai-chat",
            summary="opencode (ACP, exec-json, PTY)",
        ),
        PeerSpec(
            name="codex",
            installer="npm",
            package="@openai/codex",
            version="0.171.0",
            binary="codex",
            api="openai-responses",
            summary="OpenAI Codex CLI (exec-json, PTY)",
            # gpt-5.5 avoids the "model metadata not found" item in exec output
            # (peers.md); the TUI then shows a migration screen, so TUI callers
            # pass their own model.
            default_model="gpt-5.5",
        ),
        PeerSpec(
            name="codex-acp",
            installer="npm",
            package="@zed-industries/codex-acp",
            version="0.16.0",
            binary="codex-acp",
            api="openai-responses",
            summary="Zed's ACP adapter around Codex",
            version_args=None,
            # Known to its embedded codex core 0.137, so no warning chunk (peers.md).
            default_model="gpt-5.4",
        ),
        PeerSpec(
            name="acp-python-sdk",
            installer="pip",
            package="agent-client-protocol",
            version="0.12.1",
            binary="acp-echo-agent",
            api="none",
            summary="official ACP Python SDK: its example agents (sdist) and golden samples",
            version_args=None,
            sdist=True,
            launchers=(
                ("acp-echo-agent", "sdist/agent_client_protocol-{version}/examples/echo_agent.py"),
                ("acp-example-agent", "sdist/agent_client_protocol-{version}/examples/agent.py"),
            ),
        ),
        PeerSpec(
            name="acp-ts-sdk",
            installer="npm",
            package="@agentclientprotocol/sdk",
            # 1.9.0 is the last release that ships the compiled example agent (acp.md).
            version="1.9.0",
            binary="acp-ts-example-agent",
            api="none",
            summary="official ACP TypeScript SDK: its compiled example agent",
            version_args=None,
            extra_packages=("zod@3",),
            launchers=(("acp-ts-example-agent",
                        "node_modules/@agentclientprotocol/sdk/dist/examples/agent.js"),),
        ),
        PeerSpec(
            name="aider",
            installer="pip",
            package="aider-chat",
            version="0.86.2",
            binary="aider",
            api="openai-chat",
            summary="aider (one-shot --message, PTY)",
        ),
    )
}


def resolve_names(names: list[str] | tuple[str, ...]) -> list[PeerSpec]:
    """Expand ``all`` and reject unknown names with the list of known ones."""
    if not names:
        raise KeyError("no peer named; known: " + ", ".join(PEERS) + ", or all")
    out: list[PeerSpec] = []
    for name in names:
        if name == "all":
            specs = list(PEERS.values())
        elif name in PEERS:
            specs = [PEERS[name]]
        else:
            raise KeyError(f"unknown peer {name!r}; known: " + ", ".join(PEERS) + ", or all")
        out.extend(s for s in specs if s not in out)
    return out
