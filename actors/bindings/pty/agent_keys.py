"""Keystrokes of trio-cap's TUI agent: terminal input bytes in, typed keys out.

A terminal in raw mode delivers what the user (or a PTY driver) typed as one
byte stream: printable UTF-8, control bytes (Enter is ``\\r``, Ctrl-C ``\\x03``),
escape sequences (arrows, Esc itself) and bracketed paste
(``ESC [200~ … ESC [201~``).  Reads split that stream anywhere — inside a
UTF-8 character, an escape sequence or a paste — so the decoder keeps the
unfinished tail and finishes it with the next read.  A lone Esc is told from
the start of a sequence only by time, so :meth:`KeyDecoder.flush` (called by
the shell when input stops) turns a pending Esc into a key.

Pure: bytes in, :class:`Key` values out; no I/O, no clock.
"""

from __future__ import annotations

import codecs
import re
from typing import Literal

import attrs

KeyName = Literal["text", "enter", "newline", "backspace", "interrupt", "eof", "escape",
                  "paste", "up", "down", "left", "right", "tab", "other"]

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"

_CSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]")
_SS3 = re.compile(rb"\x1bO[@-~]")
_ARROWS = {b"A": "up", b"B": "down", b"C": "right", b"D": "left"}
_CONTROL: dict[int, KeyName] = {
    0x0D: "enter", 0x0A: "newline", 0x7F: "backspace", 0x08: "backspace",
    0x03: "interrupt", 0x04: "eof", 0x09: "tab",
}


@attrs.frozen
class Key:
    name: KeyName
    text: str = ""
    """What was typed or pasted, for ``text`` and ``paste``."""


class KeyDecoder:
    """Feed bytes, get keys; an unfinished sequence waits for the next feed."""

    def __init__(self) -> None:
        self._pending = b""
        self._paste: bytearray | None = None
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data: bytes) -> list[Key]:
        buf = self._pending + data
        self._pending = b""
        keys: list[Key] = []
        text: list[str] = []

        def flush_text() -> None:
            if text:
                keys.append(Key("text", "".join(text)))
                text.clear()

        i = 0
        while i < len(buf):
            if self._paste is not None:
                end = buf.find(PASTE_END, i)
                if end < 0:
                    # keep a possible partial end marker for the next feed
                    keep = _partial_suffix(buf[i:], PASTE_END)
                    self._paste += buf[i:len(buf) - keep]
                    self._pending = buf[len(buf) - keep:] if keep else b""
                    return keys
                self._paste += buf[i:end]
                keys.append(Key("paste", self._paste.decode("utf-8", "replace")))
                self._paste = None
                i = end + len(PASTE_END)
                continue
            byte = buf[i]
            if byte == 0x1B:
                flush_text()
                rest = buf[i:]
                if rest.startswith(PASTE_START):
                    self._paste = bytearray()
                    i += len(PASTE_START)
                    continue
                if len(rest) == 1 or (len(rest) < len(PASTE_START)
                                      and PASTE_START.startswith(rest)):
                    self._pending = rest  # Esc alone or a sequence cut by the read
                    return keys
                m = _CSI.match(rest) or _SS3.match(rest)
                if m is not None:
                    seq = m.group()
                    keys.append(Key(_ARROWS.get(seq[-1:], "other")))  # type: ignore[arg-type]
                    i += len(seq)
                    continue
                if rest[1:2] in (b"[", b"O") and not _finished(rest):
                    self._pending = rest
                    return keys
                keys.append(Key("escape"))
                i += 1
                continue
            control = _CONTROL.get(byte)
            if control is not None:
                flush_text()
                keys.append(Key(control))
                i += 1
                continue
            if byte < 0x20:
                i += 1  # other control bytes type nothing
                continue
            j = i
            while j < len(buf) and buf[j] >= 0x20 and buf[j] != 0x7F:
                j += 1
            chunk = self._utf8.decode(buf[i:j])
            if chunk:
                text.append(chunk)
            i = j
        flush_text()
        return keys

    def flush(self) -> list[Key]:
        """Input went quiet: a pending lone Esc is the Esc key."""
        if self._pending == b"\x1b":
            self._pending = b""
            return [Key("escape")]
        return []


def _finished(rest: bytes) -> bool:
    """Whether a CSI/SS3 sequence in ``rest`` has its final byte already."""
    return any(0x40 <= b <= 0x7E for b in rest[2:])


def _partial_suffix(data: bytes, marker: bytes) -> int:
    """Length of the longest tail of ``data`` that begins ``marker``."""
    for n in range(min(len(marker) - 1, len(data)), 0, -1):
        if marker.startswith(data[-n:]):
            return n
    return 0
