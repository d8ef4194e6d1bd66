"""Replay debugging and crash-resume: re-check a recorded run, play an agent back, resume."""
