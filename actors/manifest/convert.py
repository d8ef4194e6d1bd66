"""cattrs wiring: strict structuring, every error collected, and back to plain data.

cattrs' detailed validation gathers the failures of every attribute of every
nested class into one exception group; :func:`issues_from` flattens that into
``(field.path, message)`` pairs, which is what lets a manifest with five
problems report all five.  Leaf values go through the checks named in the
model's ``Annotated`` metadata, never through cattrs' lenient defaults.
"""

from __future__ import annotations

from typing import Annotated, Any, get_args, get_origin

import attrs
import cattrs
from cattrs.errors import ClassValidationError, IterableValidationError
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from trio_cap.actors.manifest.checks import FieldIssues, fail, toml_type
from trio_cap.actors.manifest.model import SECTION_ORDER, Check, Each


def toml_name(a: attrs.Attribute) -> str:
    return a.metadata.get("toml") or a.name


def _marker(tp: Any) -> Check | Each | None:
    if get_origin(tp) is Annotated:
        for meta in get_args(tp)[1:]:
            if isinstance(meta, Check | Each):
                return meta
    return None


def _structure_checked(value: Any, tp: Any) -> Any:
    marker = _marker(tp)
    if isinstance(marker, Check):
        return marker.fn(value)
    assert isinstance(marker, Each)
    if isinstance(value, str):
        raise fail("expected an array of strings, got a single string")
    if not isinstance(value, list):
        raise fail(f"expected an array, got {toml_type(value)}")
    out: list[Any] = []
    issues: list[tuple[str, str]] = []
    for i, item in enumerate(value):
        try:
            out.append(marker.fn(item))
        except FieldIssues as exc:
            issues.extend((f"[{i}]{sub}", msg) for sub, msg in exc.issues)
    if issues:
        raise FieldIssues(issues)
    return tuple(out)


def _class_hook_factory(cls: type, conv: cattrs.Converter) -> Any:
    overrides = {
        a.name: override(omit=True) if a.metadata.get("internal") else override(rename=toml_name(a))
        for a in attrs.fields(cls)
    }
    inner = make_dict_structure_fn(cls, conv, **overrides)

    def structure(value: Any, _tp: Any) -> Any:
        if not isinstance(value, dict):
            raise fail(f"expected a table, got {toml_type(value)}")
        return inner(value, cls)

    return structure


def _unstructure_factory(cls: type, conv: cattrs.Converter) -> Any:
    overrides = {
        a.name: override(omit=True) if a.metadata.get("internal") else override(rename=toml_name(a))
        for a in attrs.fields(cls)
    }
    return make_dict_unstructure_fn(cls, conv, **overrides)


def _build() -> cattrs.Converter:
    conv = cattrs.Converter(detailed_validation=True)
    conv.register_structure_hook_func(lambda tp: _marker(tp) is not None, _structure_checked)
    conv.register_structure_hook_factory(attrs.has, _class_hook_factory)
    conv.register_unstructure_hook_factory(attrs.has, _unstructure_factory)
    return conv


CONVERTER = _build()


def _renamed(cls: type | None, name: str) -> str:
    if cls is not None and attrs.has(cls):
        for a in attrs.fields(cls):
            if a.name == name:
                return toml_name(a)
    return name


def issues_from(exc: BaseException, path: str = "") -> list[tuple[str, str]]:
    """Flatten a cattrs exception group into ``(dotted.path, message)`` pairs."""
    if isinstance(exc, ClassValidationError | IterableValidationError):
        with_notes, without = exc.group_exceptions()
        out: list[tuple[str, str]] = []
        for sub, note in with_notes:
            name = getattr(note, "name", None)
            if name is not None:  # an attribute: report it under its TOML key
                key = _renamed(getattr(exc, "cl", None), name)
                sub_path = f"{path}.{key}" if path else key
            else:  # an array element
                sub_path = f"{path}[{note.index}]"
            out.extend(issues_from(sub, sub_path))
        for sub in without:
            out.extend(issues_from(sub, path))
        return out
    if isinstance(exc, FieldIssues):
        return [(path + sub if sub else path, msg) for sub, msg in exc.issues]
    if isinstance(exc, KeyError):
        return [(path, "required")]
    if isinstance(exc, TypeError | ValueError):
        return [(path, str(exc))]
    return [(path, f"{type(exc).__name__}: {exc}")]


def unstructure(obj: Any) -> Any:
    """Plain data (dicts, lists, scalars) with TOML key names and no ``None`` values."""
    return _drop_none(CONVERTER.unstructure(obj))


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_drop_none(v) for v in value]
    return value


def manifest_data(manifest: Any) -> dict[str, Any]:
    """The manifest with every default applied, as TOML-shaped data (``x-*`` keys restored)."""
    data = unstructure(manifest)
    for dotted, value in manifest.extensions.items():
        parts = dotted.split(".")
        cut = next(i for i, part in enumerate(parts) if part.startswith("x-"))
        parents, leaf = parts[:cut], ".".join(parts[cut:])  # parents are field names: no dots
        node = data
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    ordered = {k: data[k] for k in SECTION_ORDER if k in data}
    ordered.update((k, v) for k, v in data.items() if k not in ordered)
    return ordered
