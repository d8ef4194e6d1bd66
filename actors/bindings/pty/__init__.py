"""PTY: any terminal program driven through a real pseudo-terminal, a VT screen and a settle machine."""
