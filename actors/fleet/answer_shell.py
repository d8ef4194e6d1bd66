"""The auto-answerer's shell: the archive folder read once, off the event loop, when a fleet
run begins; everything after is :mod:`answerer`'s pure search, inside the members' session
machines."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from trio_cap.actors.fleet.answerer import Archive, answerer
from trio_cap.actors.fleet.model import Fleet
from trio_cap.actors.session.policy import Answerer
from trio_cap.events.kinds import Event, FleetArchive


def read_archive(folder: str | Path) -> Archive:
    """Every ``*.md`` under ``folder`` (names relative to it, ``/``-separated); bytes that
    are not UTF-8 are replaced rather than losing the file."""
    root = Path(folder)
    files = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
             for p in sorted(root.rglob("*.md")) if p.is_file()}
    return Archive.from_texts(files)


async def open_answerer(fleet: Fleet, emit: Callable[[Event], Awaitable[int]]
                        ) -> Answerer | None:
    """The fleet's answerer (None without ``[auto_answer]``), its archive logged as
    ``fleet.archive``; a folder that cannot be read is an OSError for the caller."""
    settings = fleet.auto_answer
    if settings is None:
        return None
    archive = await trio.to_thread.run_sync(read_archive, settings.archive)
    await emit(FleetArchive(path=settings.archive, files=archive.files,
                            passages=len(archive.passages), threshold=settings.threshold,
                            max_passages=settings.max_passages))
    return answerer(archive, threshold=settings.threshold, max_passages=settings.max_passages)
