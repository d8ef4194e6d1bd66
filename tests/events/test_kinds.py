import typing

import msgspec
import pytest

from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import ALL_EVENTS, KINDS, AnyEvent, SessionCreated, TextChunk, kind_of


def test_union_and_registry_list_the_same_types():
    assert set(typing.get_args(AnyEvent)) == set(ALL_EVENTS)
    assert len(KINDS) == len(ALL_EVENTS)


def test_cap_core_events_are_tagged_with_their_cap_kind():
    assert kind_of(TextChunk) == "cap.text_chunk"
    assert all(
        kind.startswith("cap.") for kind, cls in KINDS.items() if cls.direction in ("in", "out")
    )


def test_session_created_carries_the_product_card_fields():
    ev = SessionCreated(session_id="s1", cwd="/w", agent="cap-agent", binding="inproc")
    assert (ev.session_id, ev.cwd, ev.agent, ev.binding) == ("s1", "/w", "cap-agent", "inproc")
    with pytest.raises(AttributeError):
        ev.cwd = "/other"  # frozen


def test_a_cap_frame_decodes_into_the_same_struct_the_log_stores():
    wire = b'{"kind":"cap.text_chunk","message_id":"m1","text":"hi","_meta":{"x":1}}'
    ev = msgspec.json.decode(wire, type=AnyEvent)
    assert ev == TextChunk(message_id="m1", text="hi", meta={"x": 1})
    env = Envelope(7, 1.5, "s1", None, ev)
    again = msgspec.msgpack.decode(msgspec.msgpack.encode(env), type=Envelope)
    assert again == env and again.kind == "cap.text_chunk"


def test_unknown_kind_and_wrong_field_types_are_rejected_while_decoding():
    with pytest.raises(msgspec.ValidationError, match=r"Invalid value 'cap\.nope'"):
        msgspec.json.decode(b'{"kind":"cap.nope"}', type=AnyEvent)
    with pytest.raises(msgspec.ValidationError, match="Expected `str`"):
        msgspec.json.decode(b'{"kind":"cap.text_chunk","message_id":1,"text":"x"}', type=AnyEvent)
