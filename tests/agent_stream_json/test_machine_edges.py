"""The sans-io agent side at the edges of a session: bad input, end of input, core
failures, the transcript and determinism (tests/agent_stream_json/test_machine.py has
the turns themselves)."""

from __future__ import annotations

import json

import pytest

from tests.agent_stream_json.harness import (
    SID,
    Harness,
    answer,
    control,
    write_call,
)
from trio_cap.actors.bindings.stream_json import frames as f
from trio_cap.actors.bindings.stream_json.agent_transcript import (
    TranscriptGap,
    TranscriptMirror,
    join_fragments,
)
from trio_cap.events.kinds import (
    CapError,
    PermissionRequest,
    TextChunk,
    Thought,
    ToolCallEnd,
    ToolCallStart,
    Usage,
    UserInputInject,
)


def test_bad_and_unknown_lines_never_stop_the_agent():
    h = Harness()
    h.run(h.machine.receive_data(b'not json\n{"type":"brand_new"}\n{"type":"user"}\n'
                                 b'{"type":"keep_alive"}\n{broken\n'))
    errors = [e.event for e in h.log]
    assert [e.code for e in errors] == ["parse_failed", "parse_failed"]
    assert len(h.notes) == 2  # the non-JSON line and the unknown type
    h.prompt("still here")
    assert isinstance(h.delivered[-1], UserInputInject)


def test_split_lines_are_joined():
    h = Harness()
    line = json.dumps({"type": "user", "message": {"role": "user", "content": "hi"}}).encode()
    for i in range(0, len(line), 7):
        h.run(h.machine.receive_data(line[i : i + 7]))
    assert h.delivered == []
    h.run(h.machine.receive_data(b"\n"))
    assert h.delivered[-1].text == "hi"


def test_eof_finishes_queued_turns_and_the_last_result_is_the_last_frame():
    h = Harness()
    h.prompt("one")
    h.prompt("two")
    h.eof()
    assert h.exit_code is None
    for _ in range(2):
        h.core(TextChunk(message_id="m", text="ok"), Usage())
        h.end_turn()
    assert h.exit_code == 0
    assert h.out[-1]["type"] == "result" and h.out[-1]["subtype"] == "success"
    assert h.frames("system", "cap.artifact") == []  # no session-end frames after it
    diff = h.out[-2]
    assert diff["subtype"] == "cap.transcript_diff" and diff["cap"]["final"]  # stdin had closed
    mirror = TranscriptMirror()
    for frame in h.out:
        mirror.feed(frame)
    mirror.check_closed()
    assert mirror.envelopes == h.log


def test_eof_after_the_last_result_writes_nothing_and_exits_zero():
    h = Harness()
    h.prompt("one")
    h.core(Usage())
    h.end_turn()
    sent = bytes(h.raw)
    h.eof()
    assert h.exit_code == 0 and bytes(h.raw) == sent
    assert h.out[-1]["type"] == "result"


def test_nothing_is_written_between_a_result_and_the_next_init():
    """Rule 3: what comes up while no turn runs waits for the next turn's init."""
    h = Harness(permission_prompt_tool="stdio", diff_every=1)
    h.prompt("go")
    write_call(h)
    request_id = h.frames("control_request")[0]["request_id"]
    h.core(Usage())
    h.end_turn()
    assert h.out[-1]["type"] == "result"
    mark = len(h.out)
    h.send(answer(request_id, {"behavior": "allow"}),  # too late: a cap.error, logged
           control("m", subtype="set_permission_mode", mode="acceptEdits"))
    h.run(h.machine.receive_data(b'{"type":"user","message":5}\n'))  # parse_failed
    h.core(CapError(code="late", message="after the turn"))  # a core event between turns
    h.run(h.machine.tick(0.0))
    assert [fr["type"] for fr in h.out[mark:]] == ["control_response"]
    mark = len(h.out)
    h.prompt("next")
    kinds = [(fr["type"], fr.get("subtype")) for fr in h.out[mark:]]
    assert kinds[0] == ("system", "init")
    held = [k for k in kinds[1:] if k[0] == "system"]
    assert ("system", "status") in held and held.count(("system", "cap.error")) == 3
    h.core(Usage())
    h.end_turn()
    mirror = TranscriptMirror()
    for frame in h.out:
        mirror.feed(frame)
    mirror.check_closed()
    assert mirror.envelopes == h.log  # the held events reached the client with the turn


def test_a_core_that_fails_between_turns_ends_the_session_without_output():
    h = Harness()
    h.prompt("one")
    h.core(Usage())
    h.end_turn()
    sent = bytes(h.raw)
    h.run(h.machine.core_failed("the bridged agent died"))
    assert h.exit_code == 1 and bytes(h.raw) == sent
    assert h.notes == ["the bridged agent died"]
    assert h.log[-1].event.code == "internal_error"


def test_a_core_that_fails_mid_turn_ends_it_with_an_error_result_last():
    h = Harness()
    h.prompt("one")
    h.prompt("two")
    h.core(TextChunk(message_id="m", text="partial"))
    h.run(h.machine.core_failed("the scripted brain crashed"))
    assert h.exit_code == 1
    assert h.out[-1]["type"] == "result" and h.out[-1]["is_error"]
    assert h.out[-1]["errors"] == ["internal_error: the scripted brain crashed"]
    assert len(h.frames("result")) == 1  # the queued prompt never started
    assert h.out[-2]["cap"]["final"]
    assert h.notes == ["the scripted brain crashed"]  # and one line on stderr


def test_eof_with_a_prompt_pending_denies_it():
    h = Harness(permission_prompt_tool="stdio")
    h.prompt("go")
    write_call(h)
    h.eof()
    assert h.delivered[-1].decision == "deny"


def test_a_prompt_that_comes_up_after_eof_is_denied_not_sent():
    """Rule 7: a request nobody can answer any more (stdin closed while the turn ran) is
    denied at once; sent, it would wait forever and the process would never end."""
    h = Harness(permission_prompt_tool="stdio")
    h.prompt("go")
    h.eof()
    write_call(h)
    assert h.delivered[-1].decision == "deny"
    assert h.delivered[-1].meta["cap.message"] == "stdin closed before the client answered"
    assert not h.frames("control_request")


def test_a_fleet_members_request_names_it_and_asks_about_its_own_call():
    h = Harness(permission_prompt_tool="stdio")
    h.prompt("go")
    h.core(ToolCallStart(call_id="en.call_1", name="Write",
                         input={"path": "/w/en/a.txt", "content": "x\n"}),
           ToolCallStart(call_id="fr.call_1", name="Bash", input={"command": "ls"}),
           PermissionRequest(req_id="perm_1", tool="Write",
                             intent={"path": "/w/en/a.txt", "content": "x\n"}, scope="write",
                             meta={"cap.member": "en", "cap.call_id": "en.call_1"}))
    (request,) = [fr["request"] for fr in h.frames("control_request")]
    assert (request["agent_id"], request["title"]) == ("en", "en: Write")
    assert request["tool_name"] == "Write" and request["input"]["file_path"] == "/w/en/a.txt"
    uses = [b for fr in h.frames("assistant") for b in fr["message"]["content"]
            if b["type"] == "tool_use"]
    assert request["tool_use_id"] == uses[0]["id"]  # en's call, not fr's (the last)


def test_the_transcript_on_request_comes_back_in_the_control_response():
    h = Harness()
    h.prompt("hi")
    h.core(Usage())
    h.end_turn()
    h.send(control("t1", subtype="cap.transcript"))
    reply = h.frames("control_response")[-1]["response"]
    artifact = reply["response"]["artifact"]
    events = json.loads(artifact["content"])["events"]
    assert [e[0] for e in events] == list(range(1, len(h.log)))


def test_transcript_diffs_rebuild_the_log_exactly_and_a_dropped_diff_is_detected():
    h = Harness(diff_every=3)
    for text in ("one", "two"):
        h.prompt(text)
        for event in (TextChunk(message_id="m", text="a"), TextChunk(message_id="m", text="b"),
                      Thought(message_id="t", text="c"), CapError(code="x", message="y"),
                      Usage()):
            h.core(event)
        h.end_turn()
    h.eof()
    diffs = [fr for fr in h.out if fr.get("subtype") == "cap.transcript_diff"]
    assert len(diffs) > 3  # the cadence, not only turn ends
    mirror = TranscriptMirror()
    for frame in h.out:
        mirror.feed(frame)
    mirror.check_closed()
    assert mirror.envelopes == h.log
    for lost in diffs:  # any one diff lost is detected, the last one of a turn included
        copy = TranscriptMirror()
        with pytest.raises(TranscriptGap):
            for frame in h.out:
                if frame is not lost:
                    copy.feed(frame)
            copy.check_closed()
    copy = TranscriptMirror()  # stdout cut after a diff, before the result confirming it
    for frame in h.out[: h.out.index(diffs[-1]) + 1]:
        copy.feed(frame)
    with pytest.raises(TranscriptGap):
        copy.check_closed()


def test_long_extension_frames_are_fragmented_and_join_back():
    h = Harness(max_line=2000)
    h.prompt("hi")
    h.core(TextChunk(message_id="m", text="é\"\\" * 3000), Usage())
    h.end_turn()
    fragments = h.frames("system", "cap.fragment")
    assert fragments and all(len(json.dumps(fr, ensure_ascii=False).encode()) <= 2000
                             for fr in fragments)
    assert h.frames("system", "cap.transcript_diff") == []
    line = join_fragments([fr["cap"] for fr in fragments])
    diff = json.loads(line)
    assert diff["subtype"] == "cap.transcript_diff" and diff["cap"]["to_seq"] == len(h.log)
    assert len(h.frames("assistant")[0]["message"]["content"][0]["text"]) == 9000  # never cut


def test_the_same_conversation_gives_the_same_bytes():
    def run() -> bytes:
        h = Harness(partial_messages=True, permission_prompt_tool="stdio")
        h.send(control("r1", subtype="initialize"))
        h.prompt("go")
        write_call(h)
        h.send(answer(h.frames("control_request")[0]["request_id"], {"behavior": "allow"}))
        h.core(ToolCallEnd(call_id="call_1", output="ok"), TextChunk(message_id="m", text="k"),
               Usage())
        h.end_turn()
        h.eof()
        return bytes(h.raw)

    assert run() == run()


def test_frames_round_trip_through_the_shared_structs():
    h = Harness(partial_messages=True, permission_prompt_tool="stdio")
    h.prompt("go")
    write_call(h)
    h.core(Usage())
    h.end_turn()
    for line in bytes(h.raw).splitlines():
        frame = f.decode_frame(line)
        assert f.encode_line(frame).rstrip(b"\n") == line


def test_frame_ids_are_the_uuid5s_of_the_session():
    import uuid

    from trio_cap.actors.bindings.stream_json.agent_ids import FrameIds

    for session in (SID, "not-a-uuid"):
        ids = FrameIds(session)
        try:
            ns = uuid.UUID(session)
        except ValueError:
            ns = uuid.uuid5(uuid.NAMESPACE_URL, f"cap-agent:{session}")
        assert [ids() for _ in range(300)] == [str(uuid.uuid5(ns, str(n)))
                                               for n in range(1, 301)]
