"""The agent-side machine under random input: it never raises, and its rules hold.

Random bytes, random valid client frames (prompts, every control request
subtype with random fields, answers to real and made-up request ids, configs),
the same byte stream cut at random points, and any CAP event the core could
emit, interleaved with turn ends, ticks, EOF and core failures.  Whatever
comes in, the machine returns only its typed effects — bad input becomes a
logged ``cap.error`` or a stderr ``Note`` — and every line it writes is a
frame, one turn ends with exactly one result, nothing but control frames
follows a result before the next ``system/init``, and nothing at all follows
the session's end.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.strategies import events
from trio_cap.actors.bindings.base import RAW_LINE
from trio_cap.actors.bindings.stream_json import frames as f
from trio_cap.actors.bindings.stream_json.agent_argv import AgentOptions
from trio_cap.actors.bindings.stream_json.agent_effects import (
    Deliver,
    Effect,
    Finish,
    Note,
    ReadTranscript,
    Record,
    Send,
    SetModel,
)
from trio_cap.actors.bindings.stream_json.agent_ids import FrameIds
from trio_cap.actors.bindings.stream_json.agent_side import AgentSide
from trio_cap.events.envelope import Envelope
from trio_cap.events.kinds import AgentRaw, Event

SID = "5eed5eed-0000-4000-8000-000000000000"
EFFECTS = (Send, Record, Deliver, SetModel, ReadTranscript, Finish, Note)
CONTROL = ("control_request", "control_response", "control_cancel_request")
SUBTYPES = ("initialize", "interrupt", "set_permission_mode", "set_model", "mcp_status",
            "get_context_usage", "rewind_files", "mcp_reconnect", "mcp_toggle", "stop_task",
            "cap.transcript", "can_use_tool", "hook_callback", "brand_new")


class Fuzz:
    """Carries out effects as the shell does and checks every rule on the way."""

    def __init__(self, **options: Any) -> None:
        self.machine = AgentSide(AgentOptions(cwd="/w", **options), session_id=SID,
                                 default_model="m", new_id=FrameIds(SID), pid=1)
        self.log: list[Envelope] = []
        self.lines: list[bytes] = []
        self.raw_texts: set[str] = set()
        self.finished = False
        self.turns_started = 0

    def run(self, effects: list[Effect]) -> None:
        assert isinstance(effects, list)
        for effect in effects:
            assert isinstance(effect, EFFECTS), effect
            match effect:
                case Send():
                    assert not self.finished, "written after the session ended"
                    self.lines.append(effect.data)
                case Record():
                    assert all(isinstance(e, Event) for e in effect.events)
                    self.run(self.machine.logged(self._append(effect.events), effect.after))
                case ReadTranscript():
                    self.run(self.machine.transcript_ready(list(self.log), effect.artifact_id))
                case Finish():
                    assert effect.exit_code in (0, 1)
                    self.finished = True

    def _append(self, events: tuple[Event, ...] | list[Event]) -> list[Envelope]:
        envs = [Envelope(len(self.log) + i + 1, 1.0 + len(self.log) + i, SID, None, e)
                for i, e in enumerate(events)]
        self.log.extend(envs)
        for env in envs:
            if isinstance(env.event, AgentRaw) and env.event.reason == RAW_LINE:
                self.raw_texts.add(env.event.text)
        return envs

    def core(self, events: list[Event]) -> None:
        self.run(self.machine.logged(self._append(events)))

    def step(self, action: tuple[str, Any]) -> None:
        kind, value = action
        m = self.machine
        if kind == "data":
            self.run(m.receive_data(value))
        elif kind == "core":
            self.core(value)
        elif kind == "turn_ended":
            self.run(m.turn_ended(value))
        elif kind == "tick":
            self.run(m.tick(value))
        elif kind == "eof":
            self.run(m.receive_eof())
        elif kind == "core_failed":
            self.run(m.core_failed(value))
        elif kind == "answer":  # answer the newest can_use_tool request, if any
            self.run(m.receive_data(_answer(self._last_request_id(), value)))

    def _last_request_id(self) -> str:
        for line in reversed(self.lines):
            frame = _frame(line)
            if frame and frame.get("type") == "control_request":
                return frame["request_id"]
        return "nobody"

    def check_stream(self) -> None:
        """Every line a frame; one result per turn; after a result only control frames until
        the next init."""
        stream: list[dict[str, Any]] = []
        for line in self.lines:
            if line.rstrip(b"\n").decode(errors="replace") in self.raw_texts:
                continue  # a scripted raw line: malformed on purpose
            assert line.endswith(b"\n") and line.count(b"\n") == 1
            f.decode_frame(line)  # our own frames decode with the one wire decoder
            frame = json.loads(line)
            if frame["type"] not in CONTROL:
                stream.append(frame)
        inits = [i for i, fr in enumerate(stream) if fr.get("subtype") == "init"]
        results = [i for i, fr in enumerate(stream) if fr["type"] == "result"]
        assert len(results) <= len(inits)
        for i in results:
            if i + 1 < len(stream):
                assert stream[i + 1].get("subtype") == "init", stream[i + 1]
        for a, b in itertools.pairwise(inits):  # one result between two inits
            assert sum(a < r < b for r in results) == 1


def _frame(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _answer(request_id: str, behaviour: dict[str, Any]) -> bytes:
    body = {"subtype": "success", "request_id": request_id, "response": behaviour}
    return json.dumps({"type": "control_response", "response": body}).encode() + b"\n"


# ---- strategies -------------------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=3),
    max_leaves=8)


def _line(obj: Any) -> bytes:
    return json.dumps(obj).encode() + b"\n"


prompts = st.sampled_from(["hi", "write a.txt: x", "run: ls", "fail: x", ""]) | st.text(
    max_size=30)
user_frames = prompts.map(lambda t: {"type": "user", "message": {"role": "user", "content": t}})
control_frames = st.builds(
    lambda rid, sub, extra: {"type": "control_request", "request_id": rid,
                             "request": {**extra, "subtype": sub}},
    st.text(max_size=6), st.sampled_from(SUBTYPES),
    st.dictionaries(st.sampled_from(["mode", "model", "systemPrompt", "server_name",
                                     "task_id", "appendSystemPrompt", "hooks"]), _json,
                    max_size=3))
answers = st.fixed_dictionaries({"behavior": st.sampled_from(["allow", "deny", "maybe"])},
                                optional={"updatedInput": _json, "message": _json,
                                          "interrupt": st.booleans(),
                                          "updatedPermissions": _json})
response_frames = st.builds(
    lambda rid, body: {"type": "control_response", "response": {
        "subtype": "success", "request_id": rid, "response": body}},
    st.text(max_size=6), _json)
config_frames = st.fixed_dictionaries({"type": st.just("cap.session.config"),
                                       "cwd": st.text(max_size=10)},
                                      optional={"model": _json, "budget_usd": _json,
                                                "max_turns": _json})
odd_frames = _json.map(lambda v: {"type": "user", "message": v}) | st.dictionaries(
    st.text(max_size=6), _json, max_size=3)
valid_frames = st.one_of(user_frames, control_frames, response_frames, config_frames)
frame_lines = st.one_of(valid_frames, odd_frames).map(_line)

actions = st.one_of(
    st.tuples(st.just("data"), frame_lines),
    st.tuples(st.just("data"), st.binary(max_size=40)),
    st.tuples(st.just("core"), st.lists(events(), min_size=1, max_size=3)),
    st.tuples(st.just("turn_ended"), st.sampled_from(["end_turn", "cancelled", "error",
                                                      "tool_use", "max_tokens"])),
    st.tuples(st.just("tick"), st.floats(0, 1e6)),
    st.tuples(st.just("answer"), answers),
    st.just(("eof", None)),
    st.tuples(st.just("core_failed"), st.text(max_size=20)),
)
option_sets = st.fixed_dictionaries({}, optional={
    "permission_prompt_tool": st.just("stdio"), "partial_messages": st.booleans(),
    "permission_mode": st.sampled_from(["default", "plan", "acceptEdits", "dontAsk",
                                        "bypassPermissions"]),
    "budget_usd": st.floats(0, 1), "max_turns": st.integers(1, 3),
    "diff_every": st.integers(0, 4), "max_line": st.integers(600, 4000),
    "allowed_tools": st.just(("Bash(git:*)",)), "tools": st.just(("Write",))})

FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(option_sets, st.lists(actions, max_size=25))
def test_any_interleaving_gives_typed_effects_and_keeps_the_rules(options, steps):
    fuzz = Fuzz(**options)
    for action in steps:
        fuzz.step(action)
    fuzz.check_stream()


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_never_raise(data):
    fuzz = Fuzz()
    fuzz.run(fuzz.machine.receive_data(data))
    fuzz.run(fuzz.machine.receive_eof())
    fuzz.check_stream()


@FUZZ
@given(st.lists(valid_frames, min_size=1, max_size=6), st.data())
def test_frames_cut_anywhere_give_the_same_effects(frames, data):
    stream = b"".join(_line(fr) for fr in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    whole, pieces = Fuzz(permission_prompt_tool="stdio"), Fuzz(permission_prompt_tool="stdio")
    whole.run(whole.machine.receive_data(stream))
    for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        pieces.run(pieces.machine.receive_data(stream[a:b]))
    assert pieces.lines == whole.lines and pieces.log == whole.log


def test_a_stream_cut_at_every_byte_gives_the_same_effects():
    frames = [{"type": "control_request", "request_id": "i", "request": {
        "subtype": "initialize", "systemPrompt": ["é ☃"]}},
        {"type": "user", "message": {"role": "user", "content": "write a.txt: ü"}},
        {"type": "keep_alive"}, {"type": "user", "message": {"role": "user", "content": "x"}}]
    stream = b"".join(_line(fr) for fr in frames)
    whole = Fuzz()
    whole.run(whole.machine.receive_data(stream))
    for cut in range(len(stream) + 1):
        pieces = Fuzz()
        pieces.run(pieces.machine.receive_data(stream[:cut]))
        pieces.run(pieces.machine.receive_data(stream[cut:]))
        assert pieces.lines == whole.lines and pieces.log == whole.log, cut
    one = Fuzz()  # and a byte at a time
    for i in range(len(stream)):
        one.run(one.machine.receive_data(stream[i : i + 1]))
    assert one.lines == whole.lines and one.log == whole.log
