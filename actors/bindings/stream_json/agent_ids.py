"""The id source the stream-json agent side is given: deterministic uuid5s per session.

Kept out of the machine modules (they take ids as an injected callable and
never import ``uuid``): the shell builds one of these for its session, a test
or a replay builds the same one, and two runs of the same conversation then
print the same bytes.
"""

from __future__ import annotations

import hashlib
import uuid


class FrameIds:
    """``uuid5(session namespace, "1")``, ``"2"`` …: one call, one fresh frame uuid.

    Computed as :func:`uuid.uuid5` does (SHA-1 of namespace + name, version and
    variant bits set) but without building a ``UUID`` per call: with partial
    messages every text delta is a frame with its own uuid, and ``uuid.uuid5``
    was half the cost of turning a delta into a frame."""

    def __init__(self, session_id: str) -> None:
        try:
            ns = uuid.UUID(session_id)
        except ValueError:
            ns = uuid.uuid5(uuid.NAMESPACE_URL, f"cap-agent:{session_id}")
        self._base = hashlib.sha1(ns.bytes, usedforsecurity=False)
        self._n = 0

    def __call__(self) -> str:
        self._n += 1
        digest = self._base.copy()
        digest.update(str(self._n).encode())
        d = bytearray(digest.digest()[:16])
        d[6] = (d[6] & 0x0F) | 0x50  # version 5
        d[8] = (d[8] & 0x3F) | 0x80  # RFC 4122 variant
        h = d.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
