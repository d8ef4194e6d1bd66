"""Hypothesis strategies that build any event of the union from its msgspec schema."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import strategies as st

from trio_cap.events.kinds import ALL_EVENTS, Event

_text = st.text(max_size=40)
_json_scalar = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _text | st.floats(
    allow_nan=False, allow_infinity=False
)
_json = st.recursive(
    _json_scalar,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=10,
)


def _for_type(t: msgspec.inspect.Type) -> st.SearchStrategy[Any]:
    match t:
        case msgspec.inspect.StrType():
            return _text
        case msgspec.inspect.IntType():
            return st.integers(-(2**63), 2**63 - 1)
        case msgspec.inspect.FloatType():
            return st.floats(allow_nan=False, allow_infinity=False)
        case msgspec.inspect.BoolType():
            return st.booleans()
        case msgspec.inspect.NoneType():
            return st.none()
        case msgspec.inspect.AnyType():
            return _json
        case msgspec.inspect.LiteralType():
            return st.sampled_from(t.values)
        case msgspec.inspect.UnionType():
            return st.one_of([_for_type(x) for x in t.types])
        case msgspec.inspect.DictType():
            return st.dictionaries(_text, _for_type(t.value_type), max_size=3)
        case msgspec.inspect.VarTupleType() | msgspec.inspect.ListType():
            return st.lists(_for_type(t.item_type), max_size=3).map(tuple)
        case msgspec.inspect.StructType():
            return _struct(t.cls)
    raise TypeError(f"no strategy for {t!r}")


def _struct(cls: type) -> st.SearchStrategy[Any]:
    info = msgspec.inspect.type_info(cls)
    fields = {f.name: _for_type(f.type) for f in info.fields}
    return st.builds(cls, **fields)


def events() -> st.SearchStrategy[Event]:
    return st.one_of([_struct(cls) for cls in ALL_EVENTS])
