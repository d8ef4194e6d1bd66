"""The manifest's field list, derived from the model for the docs and their drift test.

``docs/cap.md`` carries a table of every manifest field; rather than keeping a
second list by hand, the table is compared with :func:`field_rows`, which walks
the attrs classes and reads the metadata each field was declared with.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from typing import Any

import attrs

from trio_cap.actors.manifest.convert import toml_name
from trio_cap.actors.manifest.dump import toml_value
from trio_cap.actors.manifest.model import SECTION_ORDER, Manifest

NO_DEFAULT = "—"


@attrs.frozen
class FieldRow:
    path: str
    required: str
    default: Any  # attrs.NOTHING when the field has none (required, or absent means "unset")
    meaning: str

    def default_cell(self) -> str:
        return render_default(self.default)

    def markdown(self) -> str:
        return f"| `{self.path}` | {self.required} | {self.default_cell()} | {self.meaning} |"


def render_default(value: Any) -> str:
    if value is attrs.NOTHING or value is None:
        return NO_DEFAULT
    return f"`{toml_value(value)}`"


def _section_class(tp: Any) -> type | None:
    if isinstance(tp, type) and attrs.has(tp):
        return tp
    for arg in typing.get_args(tp):
        if isinstance(arg, type) and attrs.has(arg):
            return arg
    return None


def _default(a: attrs.Attribute) -> Any:
    d = a.default
    if isinstance(d, attrs.Factory):  # type: ignore[arg-type]
        return d.factory()
    return d


def _walk(cls: type, prefix: str) -> Iterator[FieldRow]:
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = list(attrs.fields(cls))
    if cls is Manifest:  # the order sections appear in a manifest file
        fields.sort(key=lambda a: SECTION_ORDER.index(a.name) if a.name in SECTION_ORDER else 99)
    for a in fields:
        if a.metadata.get("internal"):
            continue
        path = f"{prefix}{toml_name(a)}"
        sub = _section_class(hints[a.name])
        if sub is not None:
            yield from _walk(sub, path + ".")
        else:
            yield FieldRow(path, a.metadata["required"], _default(a), a.metadata["doc"])


def field_rows() -> list[FieldRow]:
    """Every leaf field of a manifest, sections in file order, fields in declaration order."""
    return list(_walk(Manifest, ""))


def markdown_table() -> str:
    head = "| field | required | default | meaning |\n|---|---|---|---|"
    return "\n".join([head, *(r.markdown() for r in field_rows())])
