"""PTY: any terminal program, driven through a real pseudo-terminal, a VT screen and a
settle machine (CAP core §6.1 and Appendix A)."""
