"""The id source the stream-json agent side is given: deterministic uuid5s per session.

Kept out of the machine modules (they take ids as an injected callable and
never import ``uuid``): the shell builds one of these for its session, a test
or a replay builds the same one, and two runs of the same conversation then
print the same bytes.
"""

from __future__ import annotations

import uuid


class FrameIds:
    """``uuid5(session namespace, "1")``, ``"2"`` …: one call, one fresh frame uuid."""

    def __init__(self, session_id: str) -> None:
        try:
            self._ns = uuid.UUID(session_id)
        except ValueError:
            self._ns = uuid.uuid5(uuid.NAMESPACE_URL, f"cap-agent:{session_id}")
        self._n = 0

    def __call__(self) -> str:
        self._n += 1
        return str(uuid.uuid5(self._ns, str(self._n)))
