"""Helpers for session tests: read what the log says about a session."""

from trio_cap.events.log.base import EventLog


def kinds(log: EventLog, stream: str | None = None) -> list[str]:
    return [env.kind for env in log.read(1, stream)]


def of_kind(log: EventLog, kind: str, stream: str | None = None) -> list:
    return [env for env in log.read(1, stream) if env.kind == kind]
