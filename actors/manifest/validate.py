"""From TOML text to a :class:`Manifest`, or to every problem the text has.

Three passes run over the same document and their findings are merged, so one
run reports everything: unknown keys (with ``x-*`` accepted per CAP §14.1),
cattrs structuring (types, required fields, RE2 patterns, argv safety), and
the few rules that relate two fields.  Messages read
``file: field.path: what is wrong``.
"""

from __future__ import annotations

import tomllib
import typing
from pathlib import Path
from typing import Any

import attrs

from trio_cap.actors.manifest.convert import CONVERTER, issues_from, toml_name
from trio_cap.actors.manifest.model import SECTION_ORDER, Manifest

REQUIRED_SECTIONS = ("agent", "startup", "pty", "capabilities")


@attrs.frozen
class Issue:
    path: str
    message: str

    def render(self, source: str) -> str:
        if not self.path:
            return f"{source}: {self.message}"
        return f"{source}: {self.path}: {self.message}"


class ManifestInvalid(Exception):
    """A manifest failed validation; ``issues`` holds every problem found."""

    code = "cap_manifest_missing"

    def __init__(self, source: str, issues: list[Issue]) -> None:
        self.source = source
        self.issues = issues
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        return [i.render(self.source) for i in self.issues]


def _attrs_class(tp: Any) -> type | None:
    """The attrs class inside ``tp`` (``Foo`` or ``Foo | None``), if any."""
    if attrs.has(tp):
        return tp
    for arg in typing.get_args(tp):
        if isinstance(arg, type) and attrs.has(arg):
            return arg
    return None


def _types_by_toml(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls, include_extras=True)
    return {
        toml_name(a): hints[a.name] for a in attrs.fields(cls) if not a.metadata.get("internal")
    }


def _unknown_keys(
    raw: dict[str, Any], cls: type, path: str, issues: list[Issue], extensions: dict[str, Any]
) -> None:
    known = _types_by_toml(cls)
    for key, value in raw.items():
        here = f"{path}.{key}" if path else key
        if key not in known:
            if key.startswith("x-"):
                extensions[here] = value
            else:
                issues.append(Issue(here, 'unknown field (experimental fields start with "x-")'))
            continue
        sub = _attrs_class(known[key])
        if sub is not None and isinstance(value, dict):
            _unknown_keys(value, sub, here, issues, extensions)


def _get(raw: dict[str, Any], *keys: str) -> Any:
    cur: Any = raw
    for k in keys:
        if not isinstance(cur, dict) or k not in cur:
            return None
        cur = cur[k]
    return cur


def _cross_checks(raw: dict[str, Any]) -> list[Issue]:
    issues: list[Issue] = []
    coding = _get(raw, "capabilities", "coding")
    if isinstance(coding, dict):
        fs = coding.get("fs")
        if isinstance(fs, dict) and "scope" not in fs:
            enabled = [k for k in ("read", "write", "list", "exists", "delete", "watch")
                       if fs.get(k) is True]
            if enabled:
                issues.append(Issue(
                    "capabilities.coding.fs.scope",
                    f"required when any fs.* capability is true (fs.{enabled[0]} is)",
                ))
        profiles = _get(raw, "agent", "profiles")
        if isinstance(profiles, list) and "coding" not in profiles:
            issues.append(Issue(
                "capabilities.coding",
                'declared, but agent.profiles does not list "coding"',
            ))
    return issues


def _order(issue: Issue) -> int:
    head = issue.path.split(".", 1)[0].split("[", 1)[0]
    return SECTION_ORDER.index(head) if head in SECTION_ORDER else len(SECTION_ORDER)


def validate_data(raw: dict[str, Any], source: str) -> Manifest:
    """Structure already-parsed TOML data; raise :class:`ManifestInvalid` with every issue."""
    issues: list[Issue] = []
    extensions: dict[str, Any] = {}
    data = dict(raw)
    for name in REQUIRED_SECTIONS:
        # A missing section is reported as its missing required fields, one line each.
        data.setdefault(name, {})
    _unknown_keys(data, Manifest, "", issues, extensions)
    manifest: Manifest | None = None
    try:
        manifest = CONVERTER.structure(data, Manifest)
    except Exception as exc:  # cattrs raises an exception group of everything it found
        issues.extend(Issue(p, m) for p, m in issues_from(exc))
    issues.extend(_cross_checks(data))
    if issues or manifest is None:
        raise ManifestInvalid(source, sorted(_dedupe(issues), key=_order))
    return attrs.evolve(manifest, extensions=extensions)


def _dedupe(issues: list[Issue]) -> list[Issue]:
    seen: set[Issue] = set()
    out = []
    for i in issues:
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


TOO_DEEP = "not a manifest: arrays or tables nested too deeply to read"


def parse_manifest(text: str, source: str) -> Manifest:
    """Parse and validate TOML text; ``source`` names it in every message."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestInvalid(source, [Issue("", f"not valid TOML: {exc}")]) from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise ManifestInvalid(source, [Issue("", TOO_DEEP)]) from None
    try:
        return validate_data(raw, source)
    except RecursionError:
        raise ManifestInvalid(source, [Issue("", TOO_DEEP)]) from None


def load_manifest(path: str | Path) -> Manifest:
    """Read, parse and validate one manifest file."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        reason = f"cannot read: {exc.strerror or exc}"
        raise ManifestInvalid(str(path), [Issue("", reason)]) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        reason = f"not UTF-8 text (a binary file?): bad byte at offset {exc.start}"
        raise ManifestInvalid(str(path), [Issue("", reason)]) from None
    if "\x00" in text:
        raise ManifestInvalid(str(path), [Issue("", "not a manifest: a binary file (NUL bytes)")])
    return parse_manifest(text, str(path))
