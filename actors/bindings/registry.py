"""Connectors found by binding name: ours and any third party's, through entry points.

A distribution adds a binding by declaring, in its ``pyproject.toml``::

    [project.entry-points."trio_cap.bindings"]
    my-binding = "my_package.connector:MyConnector"

The value is a Connector class, a factory called with no arguments, or a
ready instance.  trio-cap declares its own (``inproc``, ``stream-json``) the
same way.

Rules, chosen so that a broken or hostile plug-in cannot break or silently
change trio-cap:

* entry points are only *loaded* when their binding is asked for; a plug-in
  that fails to import or to build a connector makes only that binding
  unavailable, with the reason ("binding X failed to load: …"), never an
  exception at import or for another binding;
* connectors set explicitly (``registry["name"] = connector``, tests and
  embedding apps) win over entry points;
* trio-cap's own binding of a name wins over a third party's of the same name
  (reported in :meth:`ConnectorRegistry.problems`); two third parties
  claiming one name that trio-cap does not have is refused, not guessed;
* trio-cap's own bindings are also known without installed metadata (a
  source checkout, stale metadata), from :data:`BUILTIN`, which
  ``tests/kit/test_registry.py`` holds equal to ``pyproject.toml``.
"""

from __future__ import annotations

import functools
import shutil
import warnings
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from trio_cap.actors.connection import Connector
from trio_cap.actors.manifest.model import Manifest
from trio_cap.actors.manifest.select import BINDINGS, BindingCandidate, BindingPlan

GROUP = "trio_cap.bindings"
DIST = "trio-cap"

BUILTIN: dict[str, str] = {
    "inproc": "trio_cap.actors.bindings.inproc:InprocConnector",
    "stream-json": "trio_cap.actors.bindings.stream_json.connector:StreamJsonConnector",
    "acp": "trio_cap.actors.bindings.acp.connector:AcpConnector",
    "pty": "trio_cap.actors.bindings.pty.connector:PtyConnector",
    "a2a": "trio_cap.actors.bindings.a2a.connector:A2aConnector",
}
"""trio-cap's own bindings, as declared in pyproject.toml's entry points."""


class BindingLoadFailed(LookupError):
    """A registered binding whose connector could not be loaded or built."""


def _dist_name(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    name = getattr(dist, "name", None) or ""
    return name.lower().replace("_", "-")


def _ours(ep: EntryPoint) -> bool:
    return _dist_name(ep) == DIST


@functools.cache
def _installed() -> tuple[dict[str, EntryPoint], dict[str, str]]:
    """The installed entry points, scanned and sorted out once per process (a scan reads
    every dist-info, and each distribution's name is parsed from its metadata)."""
    return _sort_out(entry_points(group=GROUP))


def discover(
    eps: Iterable[EntryPoint] | None = None,
) -> tuple[dict[str, EntryPoint], dict[str, str]]:
    """Binding name → the entry point to load, and name → why a claim was refused."""
    if eps is None:
        chosen, problems = _installed()
        return dict(chosen), dict(problems)
    return _sort_out(eps)


def _sort_out(eps: Iterable[EntryPoint]) -> tuple[dict[str, EntryPoint], dict[str, str]]:
    found: dict[str, list[EntryPoint]] = {}
    for ep in eps:
        found.setdefault(ep.name, []).append(ep)
    for name, value in BUILTIN.items():
        if not any(_ours(ep) for ep in found.get(name, ())):
            found.setdefault(name, []).append(EntryPoint(name, value, GROUP))
    chosen: dict[str, EntryPoint] = {}
    problems: dict[str, str] = {}
    for name, claims in found.items():
        ours = [ep for ep in claims if _ours(ep) or (ep.value == BUILTIN.get(name))]
        others = [ep for ep in claims if ep not in ours]
        if ours:
            chosen[name] = ours[0]
            if others:
                problems[name] = (f"binding {name} from {_describe(others)} is ignored: "
                                  "trio-cap has its own")
        elif len({ep.value for ep in others}) > 1:
            problems[name] = (f"binding {name} is claimed by several plug-ins "
                              f"({_describe(others)}); none is used")
        else:
            chosen[name] = others[0]
    return chosen, problems


def _describe(eps: list[EntryPoint]) -> str:
    return ", ".join(f"{_dist_name(ep) or 'an unnamed distribution'} ({ep.value})" for ep in eps)


def _build(name: str, ep: EntryPoint) -> Connector:
    try:
        target: Any = ep.load()
        if isinstance(target, type) or (callable(target) and not hasattr(target, "open")):
            connector = target()  # a class or a factory
        else:
            connector = target  # a ready instance
    except Exception as exc:  # a plug-in's bug must not become trio-cap's crash
        raise BindingLoadFailed(
            f"binding {name} failed to load ({ep.value}): {type(exc).__name__}: {exc}") from None
    if not callable(getattr(connector, "open", None)):
        raise BindingLoadFailed(
            f"binding {name} failed to load ({ep.value}): {connector!r} has no open() method")
    return connector


class ConnectorRegistry(MutableMapping[str, Connector]):
    """Binding name → connector: explicit ones, then entry points loaded on first use."""

    def __init__(self, explicit: Mapping[str, Connector] | None = None, *,
                 eps: Iterable[EntryPoint] | None = None) -> None:
        self._explicit: dict[str, Connector] = dict(explicit or {})
        self._eps, self._refused = discover(eps)
        self._loaded: dict[str, Connector] = {}
        self._failed: dict[str, str] = {}

    # ---- lookup ---------------------------------------------------------------------
    def __getitem__(self, name: str) -> Connector:
        if name in self._explicit:
            return self._explicit[name]
        if name in self._loaded:
            return self._loaded[name]
        if name in self._failed:
            raise BindingLoadFailed(self._failed[name])
        ep = self._eps.get(name)
        if ep is None:
            if name in self._refused:
                raise BindingLoadFailed(self._refused[name])
            raise KeyError(name)
        try:
            connector = _build(name, ep)
        except BindingLoadFailed as exc:
            self._failed[name] = str(exc)
            warnings.warn(str(exc), RuntimeWarning, stacklevel=2)
            raise
        self._loaded[name] = connector
        return connector

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        """The connector, or ``default`` when unknown or broken (see :meth:`why_unavailable`)."""
        try:
            return self[name]
        except LookupError:
            return default

    def why_unavailable(self, name: str) -> str | None:
        """None when ``name`` has a working connector; else one line saying why not."""
        try:
            self[name]
        except BindingLoadFailed as exc:
            return str(exc)
        except KeyError:
            return f"the {name} binding is not in this build of trio-cap yet"
        return None

    def problems(self) -> dict[str, str]:
        """Every binding that cannot be used, and why (loads every entry point)."""
        for name in self:
            self.why_unavailable(name)
        return {**self._refused, **self._failed}

    # ---- the mapping ----------------------------------------------------------------
    def __contains__(self, name: object) -> bool:
        return name in self._explicit or name in self._eps or name in self._refused

    def __iter__(self) -> Iterator[str]:
        names = dict.fromkeys([*self._explicit, *self._eps, *self._refused])
        return iter(names)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __setitem__(self, name: str, connector: Connector) -> None:
        self._explicit[name] = connector

    def __delitem__(self, name: str) -> None:
        found = False
        for table in (self._explicit, self._loaded, self._eps, self._refused, self._failed):
            if name in table:
                del table[name]
                found = True
        if not found:
            raise KeyError(name)


def plugin_plan(manifest: Manifest, binding: str) -> BindingPlan | None:
    """The plan for a plug-in's binding that manifests cannot declare (not in ``BINDINGS``).

    A manifest's ``[fast_path]`` only names the bindings CAP defines, so a
    forced plug-in binding runs the agent's ``startup.command`` (and is handed
    the ``a2a_serve_at`` URL when there is one); None for a CAP binding name,
    which the ordinary planner handles.
    """
    if binding in BINDINGS:
        return None
    url = manifest.fast_path.a2a_serve_at
    return BindingPlan((BindingCandidate(
        binding, argv=tuple(manifest.startup.command), url=url if isinstance(url, str) else None,
        program_path=shutil.which(manifest.startup.command[0]) if manifest.startup.command
        else None),))
