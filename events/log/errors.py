"""The log's typed errors, free of Trio so the sans-io framing can raise them too.

Two families, because callers must act differently on them:

* the file is not usable as it stands (:class:`LogFormatError`,
  :class:`LogCorrupted`): nothing was changed; the user repairs or picks
  another file (``cap`` exits 2);
* a write did not happen (:class:`LogWriteError`): the batch was not
  acknowledged.  :class:`EventRejected` is the harmless kind — refused before
  a byte was written, the log goes on; any other ``LogWriteError`` means the
  log stopped taking appends, so nothing is ever written after a hole.
"""

from __future__ import annotations


class LogFormatError(Exception):
    """The file is not a trio-cap event log (wrong magic, not a regular file)."""


class LogCorrupted(Exception):
    """Damage that is not provably a torn final append: cutting it could drop acknowledged events.

    ``offset`` is the first damaged byte, ``seq`` the last good seq before it
    (0: none), ``detail`` what was wrong there.
    """

    def __init__(self, path: str, offset: int, seq: int, detail: str, *, more: int = 0) -> None:
        also = f" (and {more} more damaged span{'s' if more > 1 else ''})" if more else ""
        super().__init__(
            f"{path}: damaged at byte {offset}, after seq {seq}: {detail}{also}; it is not a torn "
            f"final append, so nothing was cut. Recover with: cap log repair {path} --out NEW"
        )
        self.path = path
        self.offset = offset
        self.seq = seq
        self.detail = detail


class LogWriteError(Exception):
    """The backend could not store a batch; nothing from that batch was acknowledged."""


class EventRejected(LogWriteError):
    """The batch was refused before anything was written; the log stays usable."""


class EventTooLarge(EventRejected):
    """One event encodes to more than a record may hold."""
