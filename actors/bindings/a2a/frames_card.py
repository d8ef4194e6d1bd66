"""The A2A agent card, one Struct that reads (and writes) both spellings.

A v1 card lists ``supportedInterfaces`` (each with its ``protocolVersion``); a
draft card has a top-level ``url`` + ``preferredTransport`` +
``protocolVersion`` and optional ``additionalInterfaces``; a2a-sdk 1.3.0 serves
a *hybrid* with both when any interface is "0.3" (``a2a.md`` §1).  One Struct
with every member optional except the few both spellings require lets the
driver read any of the three and the publisher write the hybrid.

:func:`interfaces` normalises either spelling into one list, as a2a-sdk's
``parse_agent_card`` does: missing ``supportedInterfaces`` is built from the
draft fields (transport defaults to JSONRPC, version to the card's
``protocolVersion``, else "0.3").  Security schemes stay plain dicts: the
draft's ``type``-discriminated objects and v1's oneof wrappers differ, and
:func:`bearer_declared` is the one question the driver asks of them.
"""

from __future__ import annotations

from typing import Any

import msgspec

_OPTS: dict[str, Any] = {"frozen": True, "kw_only": True, "omit_defaults": True,
                         "rename": "camel", "gc": False}


class AgentExtension(msgspec.Struct, **_OPTS):
    uri: str
    description: str | None = None
    required: bool = False
    params: dict[str, Any] | None = None


class AgentCapabilities(msgspec.Struct, **_OPTS):
    streaming: bool | None = None
    push_notifications: bool | None = None
    state_transition_history: bool | None = None  # draft only
    extended_agent_card: bool | None = None  # v1 only
    extensions: tuple[AgentExtension, ...] = ()


class AgentInterface(msgspec.Struct, **_OPTS):
    """A v1 ``supportedInterfaces[]`` entry; draft entries (``url``, ``transport``) decode too."""

    url: str
    protocol_binding: str = ""
    protocol_version: str = ""
    tenant: str = ""
    transport: str = ""  # draft additionalInterfaces[].transport


class AgentSkill(msgspec.Struct, **_OPTS):
    id: str
    name: str
    description: str = ""
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] | None = None
    input_modes: tuple[str, ...] | None = None
    output_modes: tuple[str, ...] | None = None


class AgentProvider(msgspec.Struct, **_OPTS):
    organization: str = ""
    url: str = ""


class AgentCard(msgspec.Struct, **_OPTS):
    name: str
    description: str = ""
    version: str = ""
    capabilities: AgentCapabilities = AgentCapabilities()
    default_input_modes: tuple[str, ...] = ()
    default_output_modes: tuple[str, ...] = ()
    skills: tuple[AgentSkill, ...] = ()
    # v1
    supported_interfaces: tuple[AgentInterface, ...] | None = None
    security_requirements: tuple[dict[str, Any], ...] | None = None
    # draft
    protocol_version: str | None = None
    url: str | None = None
    preferred_transport: str | None = None
    additional_interfaces: tuple[AgentInterface, ...] | None = None
    security: tuple[dict[str, Any], ...] | None = None
    supports_authenticated_extended_card: bool | None = None
    # both
    security_schemes: dict[str, dict[str, Any]] | None = None
    provider: AgentProvider | None = None
    documentation_url: str | None = None
    icon_url: str | None = None
    signatures: tuple[dict[str, Any], ...] | None = None


JSONRPC = "JSONRPC"


def interfaces(card: AgentCard) -> list[AgentInterface]:
    """Every interface the card offers, in its own order of preference, both spellings alike."""
    if card.supported_interfaces:
        return [i if i.protocol_binding else msgspec.structs.replace(
            i, protocol_binding=i.transport or JSONRPC) for i in card.supported_interfaces]
    out: list[AgentInterface] = []
    version = card.protocol_version or "0.3"
    if card.url:
        out.append(AgentInterface(url=card.url,
                                  protocol_binding=card.preferred_transport or JSONRPC,
                                  protocol_version=version))
    for extra in card.additional_interfaces or ():
        entry = AgentInterface(url=extra.url, protocol_binding=extra.transport or JSONRPC,
                               protocol_version=version)
        if entry not in out:
            out.append(entry)
    return out


def extension(card: AgentCard, uri: str) -> AgentExtension | None:
    for ext in card.capabilities.extensions:
        if ext.uri == uri:
            return ext
    return None


def bearer_declared(card: AgentCard) -> bool:
    """Does the card ask for an HTTP bearer token (either spelling of the scheme)?"""
    for scheme in (card.security_schemes or {}).values():
        http = scheme.get("httpAuthSecurityScheme")
        if isinstance(http, dict) and str(http.get("scheme", "")).lower() == "bearer":
            return True
        if scheme.get("type") == "http" and str(scheme.get("scheme", "")).lower() == "bearer":
            return True
    return False
