"""JSON-RPC 2.0 layer: the specification's own examples, exact id echo, the pending maps.

The "spec" tests replay the Examples section of https://www.jsonrpc.org/specification
from both ends: the peer's bytes go into ``receive`` and our answer must be the
response the specification shows (compared as decoded JSON, key order aside).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_cap.actors.bindings.jsonrpc import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ErrorObject,
    ErrorResponse,
    Incoming,
    Invalid,
    JsonRpc,
    Notification,
    PayloadError,
    Request,
    Response,
    StrayResponse,
    decode_params,
    decode_result,
)


def js(data: bytes) -> Any:
    return json.loads(data)


class Subtract(msgspec.Struct, forbid_unknown_fields=True):
    minuend: int
    subtrahend: int


def serve(rpc: JsonRpc, line: str) -> Any:
    """A tiny server over the layer: the spec's methods ``subtract``, ``sum``, ``get_data``."""
    msg = rpc.receive(line.encode())
    if isinstance(msg, Invalid):
        return None if msg.reply is None else js(msg.reply)
    if isinstance(msg, Notification):
        return None
    assert isinstance(msg, Request)
    if msg.method == "subtract":
        assert msg.params is not None
        if bytes(msg.params).startswith(b"["):
            a, b = decode_params(msg, tuple[int, int])
            return js(rpc.reply(msg.id, a - b))
        try:
            named = decode_params(msg, Subtract)
        except PayloadError as exc:
            return js(rpc.invalid_params(msg, str(exc)))
        return js(rpc.reply(msg.id, named.minuend - named.subtrahend))
    if msg.method == "sum":
        return js(rpc.reply(msg.id, sum(decode_params(msg, list[int]))))
    if msg.method == "get_data":
        return js(rpc.reply(msg.id, ["hello", 5]))
    return js(rpc.method_not_found(msg))


def error_of(reply: Any) -> tuple[int, Any]:
    assert reply["jsonrpc"] == "2.0" and "result" not in reply
    return reply["error"]["code"], reply["id"]


# ---- the specification's Examples section ----------------------------------------------


@pytest.mark.parametrize("call, expected", [
    # rpc call with positional parameters
    ('{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}',
     {"jsonrpc": "2.0", "result": 19, "id": 1}),
    ('{"jsonrpc": "2.0", "method": "subtract", "params": [23, 42], "id": 2}',
     {"jsonrpc": "2.0", "result": -19, "id": 2}),
    # rpc call with named parameters
    ('{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23, "minuend": 42}, '
     '"id": 3}', {"jsonrpc": "2.0", "result": 19, "id": 3}),
    ('{"jsonrpc": "2.0", "method": "subtract", "params": {"minuend": 42, "subtrahend": 23}, '
     '"id": 4}', {"jsonrpc": "2.0", "result": 19, "id": 4}),
    # a Notification
    ('{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}', None),
    ('{"jsonrpc": "2.0", "method": "foobar"}', None),
])
def test_spec_calls_and_notifications(call: str, expected: Any) -> None:
    assert serve(JsonRpc(), call) == expected


def test_spec_non_existent_method() -> None:
    reply = serve(JsonRpc(), '{"jsonrpc": "2.0", "method": "foobar", "id": "1"}')
    assert error_of(reply) == (METHOD_NOT_FOUND, "1")
    assert reply["error"]["message"] == "Method not found"


def test_spec_invalid_json() -> None:
    reply = serve(JsonRpc(), '{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]')
    assert error_of(reply) == (PARSE_ERROR, None)
    assert reply["error"]["message"] == "Parse error"


def test_spec_invalid_request_object() -> None:
    reply = serve(JsonRpc(), '{"jsonrpc": "2.0", "method": 1, "params": "bar"}')
    assert error_of(reply) == (INVALID_REQUEST, None)
    assert reply["error"]["message"] == "Invalid Request"


@pytest.mark.parametrize("batch", [
    # batch with invalid JSON: still a parse error, as the spec shows
    None,
    # empty array, an invalid batch, a batch of notifications, a mixed batch
    "[]",
    "[1]",
    "[1,2,3]",
    '[{"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},'
    ' {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}]',
    '[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},'
    ' {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},'
    ' {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},'
    ' {"foo": "boo"},'
    ' {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},'
    ' {"jsonrpc": "2.0", "method": "get_data", "id": "9"}]',
])
def test_spec_batches_get_one_invalid_request(batch: str | None) -> None:
    """Documented choice: batches are unsupported; one -32600 (id null), nothing is run."""
    rpc = JsonRpc()
    if batch is None:
        reply = serve(rpc, '[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},'
                           '{"jsonrpc": "2.0", "method"]')
        assert error_of(reply) == (PARSE_ERROR, None)
        return
    msg = rpc.receive(batch.encode())
    assert isinstance(msg, Invalid) and msg.code == INVALID_REQUEST
    assert "batch" in msg.detail
    assert msg.reply is not None and error_of(js(msg.reply)) == (INVALID_REQUEST, None)
    assert not rpc.unanswered  # nothing inside the batch became a request


def test_spec_mixed_batch_members_one_by_one() -> None:
    """The mixed batch's members sent singly get the spec's per-member answers."""
    rpc = JsonRpc()
    assert serve(rpc, '{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"}') == {
        "jsonrpc": "2.0", "result": 7, "id": "1"}
    assert serve(rpc, '{"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}') is None
    assert serve(rpc, '{"jsonrpc": "2.0", "method": "subtract", "params": [42,23], '
                      '"id": "2"}') == {"jsonrpc": "2.0", "result": 19, "id": "2"}
    assert error_of(serve(rpc, '{"foo": "boo"}')) == (INVALID_REQUEST, None)
    assert error_of(serve(rpc, '{"jsonrpc": "2.0", "method": "foo.get", '
                               '"params": {"name": "myself"}, "id": "5"}')) == (
        METHOD_NOT_FOUND, "5")
    assert serve(rpc, '{"jsonrpc": "2.0", "method": "get_data", "id": "9"}') == {
        "jsonrpc": "2.0", "result": ["hello", 5], "id": "9"}
    assert not rpc.unanswered


def test_invalid_params_reply_names_the_problem() -> None:
    reply = serve(JsonRpc(), '{"jsonrpc": "2.0", "method": "subtract", '
                             '"params": {"minuend": "x", "subtrahend": 1}, "id": 7}')
    assert error_of(reply) == (INVALID_PARAMS, 7)
    assert "minuend" in reply["error"]["data"]


# ---- shapes, versions, ids ------------------------------------------------------------------


@pytest.mark.parametrize("line, detail", [
    ('{"method": "x", "id": 1}', "jsonrpc"),
    ('{"jsonrpc": "1.0", "method": "x", "id": 1}', "2.0"),
    ('{"jsonrpc": 2.0, "method": "x", "id": 1}', "jsonrpc"),
    ('{"jsonrpc": "2.0", "method": "x", "params": "bar", "id": 1}', "params"),
    ('{"jsonrpc": "2.0", "method": "x", "params": 3, "id": 1}', "params"),
    ('{"jsonrpc": "2.0", "method": "x", "params": null, "id": 1}', "params"),
    ('{"jsonrpc": "2.0", "method": "x", "result": 1, "id": 1}', "result"),
    ('{"jsonrpc": "2.0", "id": 1}', "method"),
])
def test_invalid_requests_echo_a_readable_id(line: str, detail: str) -> None:
    msg = JsonRpc().receive(line.encode())
    assert isinstance(msg, Invalid) and msg.code == INVALID_REQUEST and detail in msg.detail
    assert msg.reply is not None and error_of(js(msg.reply)) == (INVALID_REQUEST, 1)


@pytest.mark.parametrize("line", [
    '{"jsonrpc": "2.0", "method": "x", "id": 1.5}',
    '{"jsonrpc": "2.0", "method": "x", "id": 1.0}',
    '{"jsonrpc": "2.0", "method": "x", "id": true}',
    '{"jsonrpc": "2.0", "method": "x", "id": [1]}',
    '{"jsonrpc": "2.0", "method": "x", "id": {"a": 1}}',
])
def test_unreadable_ids_are_refused_with_id_null(line: str) -> None:
    msg = JsonRpc().receive(line.encode())
    assert isinstance(msg, Invalid) and "id must be" in msg.detail
    assert msg.reply is not None and error_of(js(msg.reply)) == (INVALID_REQUEST, None)


@pytest.mark.parametrize("line", ["", " ", "nul", "\xff", '{"a":', "{}{}", '{"id": "\\ud800"}'])
def test_unparseable_input_is_a_parse_error(line: str) -> None:
    msg = JsonRpc().receive(line.encode("utf-8", "surrogateescape"))
    assert isinstance(msg, Invalid) and msg.code == PARSE_ERROR
    assert msg.reply is not None and error_of(js(msg.reply)) == (PARSE_ERROR, None)


def test_invalid_utf8_is_a_parse_error() -> None:
    msg = JsonRpc().receive(b'{"jsonrpc": "2.0", "method": "\xff\xfe", "id": 1}')
    assert isinstance(msg, Invalid) and msg.code == PARSE_ERROR


@pytest.mark.parametrize("depth", [10_000, 200_000])
def test_deep_nesting_is_a_parse_error_not_a_crash(depth: int) -> None:
    line = b'{"jsonrpc": "2.0", "method": "x", "id": 1, "params": ' + b"[" * depth + b"]" * depth
    msg = JsonRpc().receive(line + b"}")
    assert isinstance(msg, Invalid) and msg.code == PARSE_ERROR and "deep" in msg.detail


@pytest.mark.parametrize("line", ["1", '"x"', "null", "true"])
def test_json_that_is_not_an_object_is_an_invalid_request(line: str) -> None:
    msg = JsonRpc().receive(line.encode())
    assert isinstance(msg, Invalid) and msg.code == INVALID_REQUEST
    assert msg.reply is not None and error_of(js(msg.reply)) == (INVALID_REQUEST, None)


@pytest.mark.parametrize("raw_id, value", [
    ("7", 7), ('"7"', "7"), ("0", 0), ("-3", -3), ('""', ""), ('"a b\\u00e9"', "a b\u00e9"),
    ("18446744073709551616", 2**64),
])
def test_request_ids_are_echoed_exactly(raw_id: str, value: Any) -> None:
    rpc = JsonRpc()
    msg = rpc.receive(f'{{"jsonrpc": "2.0", "method": "m", "id": {raw_id}}}'.encode())
    assert isinstance(msg, Request) and msg.id == value and type(msg.id) is type(value)
    reply = js(rpc.reply(msg.id, {}))
    assert reply == {"jsonrpc": "2.0", "id": value, "result": {}}
    assert type(reply["id"]) is type(value)


def test_null_request_id_is_a_request_answered_with_null() -> None:
    rpc = JsonRpc()
    msg = rpc.receive(b'{"jsonrpc": "2.0", "method": "m", "id": null}')
    assert isinstance(msg, Request) and msg.id is None
    assert js(rpc.reply(None, None)) == {"jsonrpc": "2.0", "id": None, "result": None}


def test_params_object_and_array_stay_raw_until_decoded() -> None:
    rpc = JsonRpc()
    a = rpc.receive(b'{"jsonrpc":"2.0","method":"m","params":{"k":[1,2]},"id":1}')
    b = rpc.receive(b'{"jsonrpc":"2.0","method":"m","params":[1,{"x":null}]}')
    c = rpc.receive(b'{"jsonrpc":"2.0","method":"m","id":2}')
    assert isinstance(a, Request) and bytes(a.params or b"") == b'{"k":[1,2]}'
    assert isinstance(b, Notification) and decode_params(b, list[Any]) == [1, {"x": None}]
    assert isinstance(c, Request) and c.params is None
    assert decode_params(c, dict[str, int]) == {}  # absent params decode as {}
    with pytest.raises(PayloadError):
        decode_params(a, list[int])


# ---- our requests, their responses ---------------------------------------------------------


@pytest.mark.parametrize("first", [0, 1])
def test_ids_are_allocated_in_order_from_the_configured_start(first: int) -> None:
    rpc = JsonRpc(first_id=first)
    ids = [rpc.request("m", {"n": i})[0] for i in range(3)]
    assert ids == [first, first + 1, first + 2]
    _, data = rpc.request("initialize", [1, "two"])
    assert js(data) == {"jsonrpc": "2.0", "id": first + 3, "method": "initialize",
                        "params": [1, "two"]}
    assert js(rpc.request("noparams")[1]) == {"jsonrpc": "2.0", "id": first + 4,
                                              "method": "noparams"}
    assert js(rpc.notify("note", {"a": 1})) == {"jsonrpc": "2.0", "method": "note",
                                                "params": {"a": 1}}


@pytest.mark.parametrize("params", ["text", 3, 1.5, True, b"x", msgspec.Raw(b'"s"')])
def test_scalar_params_are_a_programming_error(params: Any) -> None:
    rpc = JsonRpc()
    with pytest.raises(TypeError):
        rpc.request("m", params)
    assert not rpc.pending


@pytest.mark.parametrize("result", ["null", "{}", "[]", "0", '"s"', '{"a": {"b": [1]}}'])
def test_responses_match_the_pending_request(result: str) -> None:
    rpc = JsonRpc()
    rid, _ = rpc.request("session/new", {}, context="ctx")
    msg = rpc.receive(f'{{"jsonrpc": "2.0", "id": {rid}, "result": {result}}}'.encode())
    assert isinstance(msg, Response)
    assert (msg.id, msg.method, msg.context) == (rid, "session/new", "ctx")
    assert js(bytes(msg.result)) == json.loads(result)
    assert not rpc.pending


def test_error_response_matches_and_keeps_the_error_object() -> None:
    rpc = JsonRpc()
    rid, _ = rpc.request("session/prompt", {})
    msg = rpc.receive(json.dumps({"jsonrpc": "2.0", "id": rid, "error": {
        "code": -32000, "message": "boom", "data": {"why": 1}}}).encode())
    assert isinstance(msg, ErrorResponse) and msg.method == "session/prompt"
    assert msg.error.code == -32000 and msg.error.message == "boom"
    assert msg.error.data is not None and js(bytes(msg.error.data)) == {"why": 1}
    assert not rpc.pending


def test_error_response_with_null_id_resolves_nothing() -> None:
    rpc = JsonRpc()
    rpc.request("a")
    msg = rpc.receive(b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32700, '
                      b'"message": "Parse error"}}')
    assert msg == ErrorResponse(None, ErrorObject(-32700, "Parse error"))
    assert list(rpc.pending) == [0]


def test_a_response_never_converts_int_and_string_ids() -> None:
    rpc = JsonRpc(first_id=1)
    rpc.request("a")
    msg = rpc.receive(b'{"jsonrpc": "2.0", "id": "1", "result": 5}')
    assert isinstance(msg, StrayResponse) and msg.id == "1"
    assert list(rpc.pending) == [1]  # still waiting for the integer 1
    assert isinstance(rpc.receive(b'{"jsonrpc": "2.0", "id": 1, "result": 5}'), Response)


@pytest.mark.parametrize("line", [
    '{"jsonrpc": "2.0", "id": 99, "result": 1}',
    '{"jsonrpc": "2.0", "id": "x", "error": {"code": 1, "message": "m"}}',
])
def test_response_to_an_id_never_sent_is_a_typed_value(line: str) -> None:
    msg = JsonRpc().receive(line.encode())
    assert isinstance(msg, StrayResponse)


def test_a_second_response_to_the_same_id_is_stray() -> None:
    rpc = JsonRpc()
    rid, _ = rpc.request("a")
    line = f'{{"jsonrpc": "2.0", "id": {rid}, "result": 1}}'.encode()
    assert isinstance(rpc.receive(line), Response)
    assert isinstance(rpc.receive(line), StrayResponse)


def test_forgotten_requests_turn_late_responses_stray() -> None:
    rpc = JsonRpc()
    rid, _ = rpc.request("slow")
    assert rpc.forget(float(rid)) is None and rpc.forget(str(rid)) is None  # exact type only
    assert rpc.forget(rid) == "slow" and rpc.forget(rid) is None
    assert isinstance(rpc.receive(f'{{"jsonrpc":"2.0","id":{rid},"result":1}}'.encode()),
                      StrayResponse)


@pytest.mark.parametrize("line, consumes", [
    ('{"id": 0, "result": 1}', True),  # no jsonrpc
    ('{"jsonrpc": "1.0", "id": 0, "result": 1}', True),
    ('{"jsonrpc": "2.0", "id": 0, "result": 1, "error": {"code": 1, "message": "m"}}', True),
    ('{"jsonrpc": "2.0", "id": 0, "error": {"code": "x", "message": "m"}}', True),
    ('{"jsonrpc": "2.0", "id": 0, "error": {"message": "m"}}', True),
    ('{"jsonrpc": "2.0", "id": 0, "error": "bad"}', True),
    ('{"jsonrpc": "2.0", "result": 1}', False),  # no id
    ('{"jsonrpc": "2.0", "id": null, "result": 1}', False),
    ('{"jsonrpc": "2.0", "id": 0.5, "result": 1}', False),
    ('{"jsonrpc": 2, "id": 0, "result": 1}', True),
])
def test_broken_responses_are_never_answered(line: str, consumes: bool) -> None:
    rpc = JsonRpc()
    rpc.request("session/prompt", context="c")
    msg = rpc.receive(line.encode())
    assert isinstance(msg, Invalid) and msg.reply is None
    if consumes:  # the caller waiting on request 0 learns it failed instead of hanging
        assert (msg.method, msg.context, msg.id) == ("session/prompt", "c", 0)
        assert not rpc.pending
    else:
        assert msg.method is None and list(rpc.pending) == [0]


def test_decode_result_into_the_bindings_type() -> None:
    rpc = JsonRpc()
    rid, _ = rpc.request("subtract", [42, 23])
    msg = rpc.receive(f'{{"jsonrpc":"2.0","id":{rid},"result":{{"minuend":1,'
                      f'"subtrahend":2}}}}'.encode())
    assert isinstance(msg, Response)
    assert decode_result(msg, Subtract) == Subtract(1, 2)
    with pytest.raises(PayloadError):
        decode_result(msg, list[int])


# ---- reverse requests (the peer calls us while we wait) -----------------------------------


def test_several_reverse_requests_pending_at_once_answered_out_of_order() -> None:
    rpc = JsonRpc()
    prompt_id, _ = rpc.request("session/prompt", {"prompt": []})
    reads = [rpc.receive(json.dumps({"jsonrpc": "2.0", "id": rid, "method": m,
                                     "params": {"path": f"/w/{rid}"}}).encode())
             for rid, m in [(0, "fs/read_text_file"), ("0", "fs/read_text_file"),
                            ("perm-1", "session/request_permission")]]
    assert all(isinstance(r, Request) for r in reads)
    assert dict(rpc.unanswered) == {0: "fs/read_text_file", "0": "fs/read_text_file",
                                    "perm-1": "session/request_permission"}
    # our own request 0 and the peer's request 0 are independent
    assert list(rpc.pending) == [prompt_id] == [0]
    assert js(rpc.reply("perm-1", {"outcome": {"outcome": "selected"}}))["id"] == "perm-1"
    assert js(rpc.reply_error("0", -32002, "not found"))["id"] == "0"
    assert js(rpc.reply(0, {"content": "x"}))["id"] == 0
    assert not rpc.unanswered
    end = rpc.receive(b'{"jsonrpc":"2.0","id":0,"result":{"stopReason":"end_turn"}}')
    assert isinstance(end, Response) and end.method == "session/prompt"


def test_a_reused_id_while_unanswered_is_refused_with_id_null() -> None:
    rpc = JsonRpc()
    assert isinstance(rpc.receive(b'{"jsonrpc":"2.0","method":"a","id":5}'), Request)
    dup = rpc.receive(b'{"jsonrpc":"2.0","method":"b","id":5}')
    assert isinstance(dup, Invalid) and dup.reply is not None
    assert error_of(js(dup.reply)) == (INVALID_REQUEST, None)
    assert dict(rpc.unanswered) == {5: "a"}
    rpc.reply(5, None)
    assert isinstance(rpc.receive(b'{"jsonrpc":"2.0","method":"b","id":5}'), Request)


@pytest.mark.parametrize("bad_id", [1, "5", 5.0, True, None])
def test_replying_to_a_request_never_received_is_a_caller_bug(bad_id: Any) -> None:
    rpc = JsonRpc()
    rpc.receive(b'{"jsonrpc":"2.0","method":"a","id":5}')
    with pytest.raises(ValueError):
        rpc.reply(bad_id, 1)
    assert dict(rpc.unanswered) == {5: "a"}
    rpc.reply(5, 1)
    with pytest.raises(ValueError):  # answered once only
        rpc.reply_error(5, -1, "again")


# ---- never raises --------------------------------------------------------------------------

_ids = st.none() | st.integers(-(2**70), 2**70) | st.text(max_size=8) | st.booleans() | (
    st.floats(allow_nan=False, allow_infinity=False))
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=3),
    max_leaves=8,
)
_members = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.sampled_from(["2.0", "1.0", 2.0, None]),
    "id": _ids, "method": st.text(max_size=8) | _json, "params": _json, "result": _json,
    "error": _json | st.fixed_dictionaries(
        {"code": st.integers(-40000, 0), "message": st.text(max_size=8)},
        optional={"data": _json}),
})
_KINDS = (Request, Notification, Response, ErrorResponse, StrayResponse, Invalid)


def check_value(rpc: JsonRpc, msg: Incoming) -> None:
    assert isinstance(msg, _KINDS)
    if isinstance(msg, Invalid) and msg.reply is not None:
        reply = js(msg.reply)
        assert reply["jsonrpc"] == "2.0" and reply["error"]["code"] in (
            PARSE_ERROR, INVALID_REQUEST)
    if isinstance(msg, Request):  # whatever came in can be answered
        assert js(rpc.reply(msg.id, None))["id"] == msg.id


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_raise(data: bytes) -> None:
    rpc = JsonRpc()
    rpc.request("a")
    check_value(rpc, rpc.receive(data))


_TOKENS = st.sampled_from([
    b"{", b"}", b"[", b"]", b":", b",", b" ", b'"jsonrpc"', b'"2.0"', b'"id"', b"1", b"-1.5",
    b'"1"', b"null", b"true", b'"method"', b'"m"', b'"params"', b'"result"', b'"error"',
    b'{"code":1,"message":"x"}', b'"\\ud800"', b"\xff",
])


@settings(max_examples=500, deadline=None)
@given(st.lists(_TOKENS, max_size=40))
def test_near_json_token_soup_never_raises(parts: list[bytes]) -> None:
    rpc = JsonRpc()
    rpc.request("a")
    check_value(rpc, rpc.receive(b"".join(parts)))


@settings(max_examples=300, deadline=None)
@given(_json)
def test_random_json_never_raises(value: Any) -> None:
    rpc = JsonRpc()
    check_value(rpc, rpc.receive(json.dumps(value).encode()))


@settings(max_examples=500, deadline=None)
@given(st.lists(_members, min_size=1, max_size=6), st.integers(0, 3))
def test_random_message_shapes_never_raise(messages: list[dict[str, Any]], sent: int) -> None:
    rpc = JsonRpc()
    for _ in range(sent):
        rpc.request("mine")
    for message in messages:
        before = len(rpc.pending)
        msg = rpc.receive(json.dumps(message).encode())
        check_value(rpc, msg)
        resolved = isinstance(msg, Response | ErrorResponse | Invalid) and (
            getattr(msg, "method", None) is not None)
        assert len(rpc.pending) == before - (1 if resolved else 0)


# ---- streaming requests and a vanished peer -------------------------------------------------


def test_streaming_request_takes_many_results_until_forgotten() -> None:
    rpc = JsonRpc(first_id=1)
    rid, _ = rpc.request("message/stream", {"message": {}}, context="task", streaming=True)
    for state in ["submitted", "working", "completed"]:
        msg = rpc.receive(json.dumps({"jsonrpc": "2.0", "id": rid,
                                      "result": {"status": {"state": state}}}).encode())
        assert isinstance(msg, Response) and (msg.method, msg.context) == (
            "message/stream", "task")
    assert rpc.forget(rid) == "message/stream"
    assert isinstance(rpc.receive(f'{{"jsonrpc":"2.0","id":{rid},"result":{{}}}}'.encode()),
                      StrayResponse)


def test_an_error_ends_a_streaming_request() -> None:
    rpc = JsonRpc()
    rid, _ = rpc.request("message/stream", {}, streaming=True)
    assert isinstance(rpc.receive(f'{{"jsonrpc":"2.0","id":{rid},"result":1}}'.encode()),
                      Response)
    err = rpc.receive(f'{{"jsonrpc":"2.0","id":{rid},"error":{{"code":-32001,'
                      f'"message":"Task not found"}}}}'.encode())
    assert isinstance(err, ErrorResponse) and err.method == "message/stream"
    assert not rpc.pending
    assert isinstance(rpc.receive(f'{{"jsonrpc":"2.0","id":{rid},"result":1}}'.encode()),
                      StrayResponse)


def test_abandon_returns_every_waiting_request_once() -> None:
    rpc = JsonRpc()
    a, _ = rpc.request("initialize", {}, context="init")
    b, _ = rpc.request("message/stream", {}, context="stream", streaming=True)
    rpc.receive(b'{"jsonrpc":"2.0","method":"fs/read_text_file","id":"r1","params":{}}')
    assert rpc.abandon() == [(a, "initialize", "init"), (b, "message/stream", "stream")]
    assert rpc.abandon() == [] and not rpc.pending and not rpc.unanswered
    assert isinstance(rpc.receive(f'{{"jsonrpc":"2.0","id":{b},"result":1}}'.encode()),
                      StrayResponse)
