"""Which binding to speak to an agent, in what order, and the fallback loop.

:func:`plan_bindings` is pure: from a manifest (and a ``which`` function, so
tests decide what is installed) it lists the bindings to try, best first.
Missing programs stay in the list, flagged, because trying them is cheap and
the failure is worth a ``binding.fallback`` event in the log; the first
candidate whose program is present is what "would be chosen on this machine".

:func:`first_working` is the generic loop the session actor runs over that
list: it knows nothing of events or processes, only "try, report, go on".
"""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import attrs

from trio_cap.actors.manifest.model import Manifest
from trio_cap.events.errors import NUMERIC_CODES

BINDINGS = ("inproc", "grpc", "stream-json", "acp", "a2a", "pty")
"""Every binding name trio-cap knows, in preference order."""

SUPPORTED = ("inproc", "stream-json", "acp", "a2a", "pty")
"""Bindings trio-cap can speak (gRPC is accepted in manifests, never chosen)."""

Which = Callable[[str], "str | None"]


@attrs.frozen
class BindingCandidate:
    binding: str
    argv: tuple[str, ...] | None = None
    url: str | None = None
    program_path: str | None = None
    """Where ``argv[0]`` was found; None when it was not found or there is no argv."""
    available: bool = True
    """False when the program is missing: trying it will fail and fall back."""

    @property
    def program(self) -> str | None:
        return self.argv[0] if self.argv else None

    def describe(self) -> str:
        if self.binding == "inproc":
            return "inproc  (in the orchestrator's process)"
        if self.url is not None:
            return f"{self.binding}  {self.url}"
        assert self.argv is not None
        where = self.program_path if self.available else "NOT FOUND"
        return f"{self.binding}  {' '.join(self.argv)}  [{self.program}: {where}]"


@attrs.frozen
class BindingPlan:
    candidates: tuple[BindingCandidate, ...]
    warnings: tuple[str, ...] = ()

    @property
    def chosen(self) -> BindingCandidate | None:
        """The first candidate expected to work here (its program is present)."""
        return next((c for c in self.candidates if c.available), None)


class BindingNotOffered(ValueError):
    """A caller forced a binding the manifest does not declare (or trio-cap cannot speak)."""

    def __init__(self, binding: str, offered: Sequence[str], why: str = "") -> None:
        self.binding = binding
        self.offered = tuple(offered)
        why = why or f"the manifest does not declare it (offered: {', '.join(offered) or 'none'})"
        super().__init__(f"binding {binding!r} cannot be used: {why}")


def _argv_for(value: bool | tuple[str, ...], startup: tuple[str, ...]) -> tuple[str, ...] | None:
    if value is True:
        return startup
    if isinstance(value, tuple):
        return value
    return None


def _declared(manifest: Manifest) -> list[tuple[str, tuple[str, ...] | None, str | None]]:
    fp = manifest.fast_path
    out: list[tuple[str, tuple[str, ...] | None, str | None]] = []
    if fp.x_inproc:
        out.append(("inproc", None, None))
    if fp.grpc is not False:
        out.append(("grpc", None, fp.grpc if isinstance(fp.grpc, str) else None))
    sj = _argv_for(fp.stream_json, manifest.startup.command)
    if sj:
        out.append(("stream-json", sj, None))
    acp = _argv_for(fp.acp_stdio, manifest.startup.command)
    if acp:
        out.append(("acp", acp, None))
    if isinstance(fp.a2a_serve_at, str):
        out.append(("a2a", None, fp.a2a_serve_at))
    out.append(("pty", manifest.startup.command, None))
    return out


def offered_bindings(manifest: Manifest) -> tuple[str, ...]:
    """The bindings trio-cap would try for ``manifest``, best first, installed or not."""
    return tuple(b for b, _, _ in _declared(manifest) if b != "grpc")


def plan_bindings(
    manifest: Manifest, *, force: str | None = None, which: Which = shutil.which
) -> BindingPlan:
    """Bindings to try for ``manifest``, best first; ``force`` narrows it to one."""
    if force is not None and force not in BINDINGS:
        raise BindingNotOffered(force, BINDINGS, f"unknown binding (known: {', '.join(BINDINGS)})")
    if force == "grpc":
        raise BindingNotOffered("grpc", SUPPORTED, "trio-cap does not speak gRPC yet")
    declared = _declared(manifest)
    warnings: list[str] = []
    candidates: list[BindingCandidate] = []
    for binding, argv, url in declared:
        if force is not None and binding != force:
            continue
        if binding == "grpc":
            warnings.append(
                "grpc: declared by the manifest but not supported by trio-cap; skipped"
            )
            continue
        if argv is None:
            candidates.append(BindingCandidate(binding, url=url))
            continue
        found = which(argv[0])
        if found is None:
            warnings.append(
                f"{binding}: program {argv[0]!r} not found; it will fail and fall back"
                if force is None else f"{binding}: program {argv[0]!r} not found"
            )
        candidates.append(
            BindingCandidate(binding, argv=argv, program_path=found, available=found is not None)
        )
    if force is not None and not candidates:
        raise BindingNotOffered(force, [b for b, _, _ in declared if b != "grpc"])
    return BindingPlan(tuple(candidates), tuple(warnings))


# --------------------------------------------------------------------------
# the fallback loop
# --------------------------------------------------------------------------

_BINDING_UNAVAILABLE = NUMERIC_CODES["cap_binding_unavailable"]


class BindingUnavailable(Exception):
    """Every candidate failed (CAP ``cap_binding_unavailable``, -32009)."""

    code = _BINDING_UNAVAILABLE.symbol
    numeric = _BINDING_UNAVAILABLE.code

    def __init__(self, reasons: Sequence[tuple[str, str]]) -> None:
        self.reasons = tuple(reasons)
        lines = [f"{b}: {r}" for b, r in self.reasons] or ["no binding to try"]
        # one line per binding: each says why it failed and what to do about it
        super().__init__("\n".join(["every declared binding failed:", *lines]))


C = TypeVar("C")
T = TypeVar("T")


def _name(candidate: Any) -> str:
    return getattr(candidate, "binding", None) or str(candidate)


def describe_failure(exc: BaseException) -> str:
    """A connector's own refusal is already a sentence; anything else names its type."""
    if type(exc).__name__ == "ConnectError":
        return " ".join(str(exc).split()) or "could not connect"
    return f"{type(exc).__name__}: {exc}"


async def first_working(
    candidates: Sequence[C],
    try_open: Callable[[C], Awaitable[T]],
    on_fallback: Callable[[str, str, str], Awaitable[None]],
) -> tuple[C, T]:
    """Open the first candidate that works; report each step down to ``on_fallback``.

    ``try_open`` raises (any ``Exception``) when spawn, connect or handshake
    fails.  ``on_fallback(failed, next, reason)`` is called before the next
    candidate is tried, with binding names, so it can append a
    ``binding.fallback`` event.  Cancellation is never treated as a failure.
    Raises :class:`BindingUnavailable` with every reason when all fail.
    """
    reasons: list[tuple[str, str]] = []
    for i, candidate in enumerate(candidates):
        try:
            return candidate, await try_open(candidate)
        except Exception as exc:
            reason = describe_failure(exc)
            reasons.append((_name(candidate), reason))
            if i + 1 < len(candidates):
                await on_fallback(_name(candidate), _name(candidates[i + 1]), reason)
    raise BindingUnavailable(reasons)
