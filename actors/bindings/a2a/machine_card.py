"""What the driver makes of an agent card: which interface and spelling, and what it may send.

Pure: the shell fetches the card (``frames.CARD_PATHS``, in order) and hands
the decoded :class:`~.frames.AgentCard` here with the URL it came from.

Rules:

* **Interface**: only JSON-RPC interfaces count (``protocolBinding`` JSONRPC;
  gRPC and HTTP+JSON are not spoken).  Among them the first with version 1.x
  wins, else the first 0.x (0.3 and 0.2.5+ share the draft spelling), in the
  card's own order (a2a-sdk's client prefers the same way).  A card with none
  is refused: "no spelling trio-cap speaks", listing what it offers.
* **URL**: relative interface URLs are joined to the card's URL.  A bearer
  token goes only to the origin the card came from (loopback names
  ``localhost`` / ``127.0.0.1`` / ``::1`` count as one): a card that points
  its interface at another origin while a token is configured is refused, so
  a card cannot redirect our credentials.
* **CAP extension** (``cap-protocol/v1``, CAP core §6.5/§11.1): ``strict``
  refuses a card without it; ``warn`` (the default) goes on and the shell logs
  a ``session.warning`` ``a2a_no_cap_extension`` — plain A2A agents are the
  common case, and nothing CAP-specific is assumed of them.
* **Auth**: a card that declares an HTTP bearer scheme with no token
  configured is not refused here (the server decides; its 401 becomes
  ``auth_error``) but the choice records it, so the error can say what to do.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urljoin, urlsplit

import msgspec

from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.frames_card import JSONRPC

ExtensionMode = Literal["strict", "warn"]
EXTENSION_MODES: tuple[ExtensionMode, ...] = ("strict", "warn")


class Choice(msgspec.Struct, frozen=True):
    spelling: f.Spelling
    url: str
    tenant: str
    other: f.Spelling | None
    """The other spelling, when the card offers it too on a JSON-RPC interface."""
    other_url: str | None
    cap_extension: bool
    bearer_declared: bool


class CardRefused(ValueError):
    """The card cannot be driven as configured; the message is one line."""


_LOOPBACK = {"localhost", "127.0.0.1", "::1"}


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if host in _LOOPBACK:
        host = "loopback"
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, host, port


def _spelling_of(version: str) -> f.Spelling | None:
    major = version.strip().split(".", 1)[0]
    if major == "1":
        return f.CURRENT
    if major == "0" or version == "":
        return f.DRAFT
    return None


def choose(card: f.AgentCard, card_url: str, *, mode: ExtensionMode = "warn",
           token: bool = False) -> Choice:
    """The interface to drive, or :class:`CardRefused` saying why not."""
    offered = f.interfaces(card)
    found: dict[f.Spelling, f.AgentInterface] = {}
    for iface in offered:
        if iface.protocol_binding.upper() != JSONRPC:
            continue
        spelling = _spelling_of(iface.protocol_version)
        if spelling is not None and spelling not in found:
            found[spelling] = iface
    if not found:
        listed = ", ".join(f"{i.protocol_binding or '?'} {i.protocol_version or '?'}"
                           for i in offered) or "no interfaces"
        raise CardRefused(f"the agent card of {card.name!r} offers no spelling trio-cap speaks "
                          f"(JSON-RPC 0.3 or 1.0); it offers: {listed}")
    spelling = f.CURRENT if f.CURRENT in found else f.DRAFT
    other: f.Spelling | None = f.DRAFT if spelling == f.CURRENT else f.CURRENT
    iface = found[spelling]
    url = urljoin(card_url, iface.url)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CardRefused(f"the agent card at {card_url} gives its JSON-RPC interface the URL "
                          f"{url!r}, which is not an http(s) URL")
    if token and _origin(url) != _origin(card_url):
        raise CardRefused(f"the agent card at {card_url} points its interface at {url}, another "
                          "origin; refusing to send the bearer token there")
    other_iface = found.get(other) if other else None
    other_url = urljoin(card_url, other_iface.url) if other_iface is not None else None
    if other_url is not None and urlsplit(other_url).scheme not in ("http", "https"):
        other_url = None
    if other_url is not None and token and _origin(other_url) != _origin(card_url):
        other_url = None
    declared = f.extension(card, f.CAP_EXTENSION) is not None
    if not declared and mode == "strict":
        raise CardRefused(f"the agent card of {card.name!r} does not declare the CAP extension "
                          f"{f.CAP_EXTENSION!r} (strict mode: set x-a2a-cap-extension = "
                          "\"warn\" to drive a plain A2A agent)")
    return Choice(spelling=spelling, url=url, tenant=iface.tenant,
                  other=other if other_url else None, other_url=other_url,
                  cap_extension=declared, bearer_declared=f.bearer_declared(card))
