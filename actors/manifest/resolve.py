"""Find an agent's manifest: ad-hoc spec, or the six rules of DESIGN §1.1, in order.

1. ``path``       an explicit manifest path (the spec contains ``/`` or ends in ``.toml``)
2. ``in-package`` ``cap-agent.toml`` in the package of the program named NAME on PATH
3. ``user``       ``$XDG_CONFIG_HOME/cap/agents/NAME.toml`` (default ``~/.config``)
4. ``system``     ``/usr/share/cap-agents/NAME.toml``
5. ``probe``      ``NAME --cap-manifest``
6. ``bundled``    the manifests shipped with trio-cap

CAP §5 lists in-package → user → system → probe; trio-cap puts an explicit
path first (the caller said exactly what to use) and its own bundled copies
last (anything the user or the agent provides wins).  A broken manifest found
by a rule is an error, not a reason to try the next rule: a user's override
must never be silently ignored.  All search roots are parameters, so tests
and embedding apps choose them.
"""

from __future__ import annotations

import os
import shutil
import tomllib
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import attrs

from trio_cap.actors.manifest.adhoc import adhoc_binding, adhoc_manifest
from trio_cap.actors.manifest.checks import is_agent_name
from trio_cap.actors.manifest.model import Manifest
from trio_cap.actors.manifest.probe import (
    DEFAULT_MAX_BYTES,
    DEFAULT_TIME_LIMIT,
    FLAG,
    ProbeFailed,
    probe_text,
)
from trio_cap.actors.manifest.probe_cache import PROCESS_CACHE, ProbeCache, probe_key
from trio_cap.actors.manifest.select import BindingNotOffered, BindingPlan, Which, plan_bindings
from trio_cap.actors.manifest.validate import ManifestInvalid, load_manifest, validate_data

RULES = ("path", "in-package", "user", "system", "probe", "bundled")
AD_HOC = "ad-hoc"
SYSTEM_DIR = Path("/usr/share/cap-agents")
IN_PACKAGE_FILE = "cap-agent.toml"


def bundled_dir() -> Path:
    return Path(str(resources.files("trio_cap.actors.manifest.bundled")))


@attrs.frozen
class SearchRoots:
    """Where each rule looks. ``path`` is the PATH used to find programs."""

    user_dir: Path
    system_dir: Path = SYSTEM_DIR
    bundled_dir: Path = attrs.field(factory=bundled_dir)
    path: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SearchRoots:
        env = os.environ if environ is None else environ
        xdg = env.get("XDG_CONFIG_HOME", "")
        if not xdg or not os.path.isabs(xdg):  # the XDG spec says: ignore relative values
            home = env.get("HOME") or str(Path.home())
            xdg = os.path.join(home, ".config")
        return cls(
            user_dir=Path(xdg) / "cap" / "agents",
            system_dir=SYSTEM_DIR,
            bundled_dir=bundled_dir(),
            path=env.get("PATH", os.defpath),
        )

    def which(self, program: str) -> str | None:
        return shutil.which(program, path=self.path)


@attrs.frozen
class Attempt:
    rule: str
    location: str
    outcome: str


@attrs.frozen
class Resolved:
    manifest: Manifest
    source: str
    """Which rule found it: one of :data:`RULES`, or ``ad-hoc``."""
    location: str
    """The file, the probe command, or the ad-hoc spec."""
    tried: tuple[Attempt, ...] = ()
    only_binding: str | None = None
    """Set for ad-hoc specs: the one binding the synthesized manifest is for."""

    @property
    def rule_number(self) -> int | None:
        return RULES.index(self.source) + 1 if self.source in RULES else None

    def plan(self, *, force: str | None = None, which: Which | None = None) -> BindingPlan:
        """Binding candidates for this agent; an ad-hoc spec forces its own binding."""
        if self.only_binding is not None and force is not None and force != self.only_binding:
            raise BindingNotOffered(force, [self.only_binding],
                                    f"the ad-hoc spec offers only {self.only_binding}")
        return plan_bindings(
            self.manifest, force=force or self.only_binding, which=which or shutil.which
        )


class ManifestNotFound(LookupError):
    """No rule found a manifest (CAP ``cap_manifest_missing``, -32001)."""

    code = "cap_manifest_missing"

    def __init__(self, name: str, tried: tuple[Attempt, ...]) -> None:
        self.name = name
        self.tried = tried
        lines = [f"  {a.rule}: {a.location}: {a.outcome}" for a in tried]
        super().__init__("\n".join([f"no manifest found for {name!r}; tried:", *lines]))


def looks_like_path(spec: str) -> bool:
    return "/" in spec or spec.endswith(".toml")


def _in_package_files(name: str, roots: SearchRoots) -> tuple[list[Path], str]:
    found = roots.which(name)
    if found is None:
        return [], f"no program {name!r} on PATH"
    real = Path(os.path.realpath(found))
    return [real.parent / IN_PACKAGE_FILE, real.parent.parent / IN_PACKAGE_FILE], str(real)


def _file_rules(name: str, roots: SearchRoots) -> list[tuple[str, list[Path], str]]:
    pkg, pkg_note = _in_package_files(name, roots)
    return [
        ("in-package", pkg, pkg_note),
        ("user", [roots.user_dir / f"{name}.toml"], ""),
        ("system", [roots.system_dir / f"{name}.toml"], ""),
    ]


def _try_files(
    name: str, rule: str, files: list[Path], tried: list[Attempt]
) -> Resolved | None:
    for f in files:
        if not f.is_file():
            tried.append(Attempt(rule, str(f), "not found"))
            continue
        manifest = load_manifest(f)  # ManifestInvalid propagates: never skip a broken file
        if rule == "in-package" and manifest.agent.name != name:
            tried.append(Attempt(rule, str(f), f"names agent {manifest.agent.name!r}, skipped"))
            continue
        return Resolved(manifest, rule, str(f), tuple(tried))
    return None


def _resolve_before_probe(name: str, roots: SearchRoots, tried: list[Attempt]) -> Resolved | None:
    for rule, files, note in _file_rules(name, roots):
        if not files:
            tried.append(Attempt(rule, IN_PACKAGE_FILE, note))
            continue
        hit = _try_files(name, rule, files, tried)
        if hit is not None:
            return hit
    return None


def _resolve_bundled(name: str, roots: SearchRoots, tried: list[Attempt]) -> Resolved | None:
    return _try_files(name, "bundled", [roots.bundled_dir / f"{name}.toml"], tried)


def _from_probe_text(text: str, location: str) -> Manifest | None:
    """The probed manifest, None if the output is not a manifest at all."""
    try:
        raw = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError):
        return None  # e.g. a usage message: the program does not speak --cap-manifest
    if not isinstance(raw.get("agent"), dict):
        return None
    return validate_data(raw, location)  # it claims to be a manifest: hold it to that


async def _resolve_probe(
    name: str, roots: SearchRoots, tried: list[Attempt], time_limit: float, max_bytes: int,
    cache: ProbeCache | None,
) -> Resolved | None:
    program = roots.which(name)
    if program is None:
        tried.append(Attempt("probe", f"{name} {FLAG}", f"no program {name!r} on PATH"))
        return None
    location = f"{program} {FLAG}"
    env = dict(os.environ)
    if roots.path is not None:
        env["PATH"] = roots.path
    key = probe_key(program, env.get("PATH")) if cache is not None else None
    known = cache.get(key) if cache is not None and key is not None else None
    if known is not None and not known[0]:
        tried.append(Attempt("probe", location, f"{known[1]} (remembered)"))
        return None
    if known is not None:
        text = known[1]
    else:
        try:
            text = await probe_text(program, time_limit=time_limit, max_bytes=max_bytes,
                                    env=env)
        except ProbeFailed as exc:
            if cache is not None and key is not None:
                cache.put_failed(key, exc.reason)
            tried.append(Attempt("probe", location, exc.reason))
            return None
        if cache is not None and key is not None:
            cache.put_ok(key, text)
    manifest = _from_probe_text(text, location)
    if manifest is None:
        tried.append(Attempt("probe", location, "output is not a manifest"))
        return None
    return Resolved(manifest, "probe", location, tuple(tried))


def resolve_direct(spec: str) -> Resolved | None:
    """An ad-hoc spec or an explicit path; None when ``spec`` is a name to search for."""
    if adhoc_binding(spec) is not None:
        manifest, binding = adhoc_manifest(spec)
        return Resolved(manifest, AD_HOC, spec, only_binding=binding)
    if looks_like_path(spec):
        path = Path(spec)
        if not path.is_file():
            raise ManifestNotFound(spec, (Attempt("path", spec, "not found"),))
        return Resolved(load_manifest(path), "path", str(path))
    if not is_agent_name(spec):
        raise ValueError(
            f"{spec!r} is not an agent name (letters, digits, '.', '_', '-'), a path or an "
            "ad-hoc spec (pty:CMD, stream-json:CMD, acp:CMD, a2a:URL)"
        )
    return None


async def resolve_agent(
    spec: str,
    *,
    roots: SearchRoots | None = None,
    probe: bool = True,
    probe_time_limit: float = DEFAULT_TIME_LIMIT,
    probe_max_bytes: int = DEFAULT_MAX_BYTES,
    probe_cache: ProbeCache | None = PROCESS_CACHE,
) -> Resolved:
    """Resolve a name, a manifest path or an ad-hoc spec to a validated manifest.

    ``probe_cache`` remembers probe answers (:mod:`probe_cache`); None probes afresh.

    Raises :class:`ManifestNotFound` (with every rule tried),
    :class:`ManifestInvalid` (a manifest was found but is broken), or
    :class:`AdHocError` / :class:`ValueError` for a malformed spec or name.
    """
    direct = resolve_direct(spec)
    if direct is not None:
        return direct
    roots = roots or SearchRoots.from_env()
    tried: list[Attempt] = []
    hit = _resolve_before_probe(spec, roots, tried)
    if hit is None and probe:
        hit = await _resolve_probe(spec, roots, tried, probe_time_limit, probe_max_bytes,
                                   probe_cache)
    elif hit is None:
        tried.append(Attempt("probe", f"{spec} {FLAG}", "skipped (probing disabled)"))
    if hit is None:
        hit = _resolve_bundled(spec, roots, tried)
    if hit is None:
        raise ManifestNotFound(spec, tuple(tried))
    return hit


# --------------------------------------------------------------------------
# listing
# --------------------------------------------------------------------------

@attrs.frozen
class Listing:
    name: str
    source: str
    location: str
    problem: str | None = None
    """Why the winning manifest is unusable, if it is."""


def known_names(roots: SearchRoots) -> list[str]:
    """Every name that has a manifest file in the user, system or bundled directories."""
    names: set[str] = set()
    for d in (roots.user_dir, roots.system_dir, roots.bundled_dir):
        if d.is_dir():
            names.update(p.stem for p in d.glob("*.toml") if is_agent_name(p.stem))
    return sorted(names)


async def list_agents(
    roots: SearchRoots | None = None,
    *,
    probe: bool = False,
    probe_time_limit: float = DEFAULT_TIME_LIMIT,
) -> list[Listing]:
    """Each known agent with the rule that wins for it (probing only when asked)."""
    roots = roots or SearchRoots.from_env()
    out: list[Listing] = []
    for name in known_names(roots):
        try:
            r = await resolve_agent(
                name, roots=roots, probe=probe, probe_time_limit=probe_time_limit
            )
        except ManifestInvalid as exc:
            out.append(Listing(name, "invalid", exc.source, f"{len(exc.issues)} error(s)"))
            continue
        except ManifestNotFound:
            continue
        out.append(Listing(name, r.source, r.location))
    return out
