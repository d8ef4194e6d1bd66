"""How a prompt is typed into a terminal (CAP §6.1 "Input injection"), as bytes.

Short text is typed as it is; Enter is a separate write the machine sends
after a short gap (a TUI that reads a whole burst as a paste would take the
Enter as a newline in its input box).  Multi-line or long text goes as one
bracketed paste (``ESC [200~ … ESC [201~``) in one write when the manifest
allows it and the program has switched paste mode on; otherwise its newlines
are typed as Enter presses (each line is then its own input, which is what a
line-oriented REPL expects without paste mode).  The paste end marker is
never passed through from the text: a prompt cannot end the paste early and
type the rest as keystrokes.

Pure: the standard library only.
"""

from __future__ import annotations

from trio_cap.actors.bindings.pty.machine_rules import PASTE_THRESHOLD

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"


def needs_paste(text: str) -> bool:
    return "\n" in text or len(text.encode()) > PASTE_THRESHOLD


def encode_prompt(text: str, *, paste: bool) -> bytes:
    """The bytes of ``text`` as typed, without the final Enter."""
    body = text.replace("\r\n", "\n")
    body = body.removesuffix("\n")  # the Enter that follows is that newline; a second one stays
    if paste and needs_paste(body):
        data = body.replace("\n", "\r").encode()
        return PASTE_START + data.replace(PASTE_END, b"") + PASTE_END
    return body.replace("\n", "\r").encode()
