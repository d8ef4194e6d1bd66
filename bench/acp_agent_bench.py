"""ACP agent-side figures: a core's CAP events out as ``session/update`` lines, against peers.

The same turn — streamed text chunks with a tool call (start, diff, end) and a
plan every 50 chunks — goes out three ways, measured in the same run, CPU time,
interleaved medians:

* ``json.dumps`` of the finished notification dicts (the floor of any Python writer:
  no models, the dicts already built);
* the official Python SDK's agent path (``agent-client-protocol``): the pydantic
  update models its helpers build (``update_agent_message_text``,
  ``start_tool_call``, ``update_tool_call``, ``update_plan``), wrapped in a
  ``SessionNotification``, dumped as its ``AgentSideConnection.session_update``
  does (``model_dump(mode="json", by_alias, exclude_none, exclude_defaults)``) and
  encoded as its sender does (``json.dumps``, compact);
* trio-cap's agent side: the sans-io machine's whole path from CAP events to the
  bytes of the lines (``AcpAgentSide.core_events``), in batches as the shell feeds it.

Ratios are trio-cap ÷ peer.  Each run also checks that trio-cap's lines decode
to the same updates as the SDK's.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from bench.common import interleaved_rates, row

BATCH = 256


def turn_events(chunks: int) -> list[Any]:
    from trio_cap.events.kinds import Plan, PlanEntry, TextChunk, ToolCallEnd, ToolCallStart

    out: list[Any] = []
    for i in range(chunks):
        out.append(TextChunk(message_id="msg_1", text=f"streamed word {i} "))
        if i % 50 == 49:
            call = f"call_{i}"
            out.append(ToolCallStart(call_id=call, name="Write",
                                     input={"path": f"f{i}.txt", "content": "x\n" * 20}))
            out.append(ToolCallEnd(call_id=call, output=f"wrote 40 bytes to f{i}.txt"))
            out.append(Plan(entries=tuple(PlanEntry(id=f"p{n}", content=f"step {n}",
                                                    status="completed" if n * 10 < i
                                                    else "pending")
                                          for n in range(5))))
    return out


def _machine(session_cwd: str = "/w") -> tuple[Any, str]:
    from trio_cap.actors.bindings.acp.agent_side import AcpAgentSide, AgentSettings

    ids = itertools.count(1)
    machine = AcpAgentSide(AgentSettings(), new_session_id=lambda: f"s{next(ids)}")
    machine.receive_data(b'{"jsonrpc":"2.0","id":0,"method":"initialize",'
                         b'"params":{"protocolVersion":1}}\n')
    (*_, reply) = machine.receive_data(
        b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"%s",'
        b'"mcpServers":[]}}\n' % session_cwd.encode())
    sid = json.loads(reply.data)["result"]["sessionId"]
    machine.receive_data(b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":'
                         b'{"sessionId":"%s","prompt":[]}}\n' % sid.encode())
    return machine, sid


def trio_cap_lines(events: list[Any]) -> list[bytes]:
    from trio_cap.actors.bindings.acp.agent_effects import Send

    machine, sid = _machine()
    out: list[bytes] = []
    for start in range(0, len(events), BATCH):
        for effect in machine.core_events(sid, events[start:start + BATCH]):
            if isinstance(effect, Send):
                out.append(effect.data)
    return out


def sdk_updates(events: list[Any]) -> list[Any]:
    """The SDK's own models for the turn, built with its helpers, as an SDK agent would."""
    from acp import (
        plan_entry,
        start_tool_call,
        text_block,
        tool_content,
        tool_diff_content,
        update_agent_message_text,
        update_plan,
        update_tool_call,
    )

    from trio_cap.events.kinds import Plan, TextChunk, ToolCallEnd, ToolCallStart

    out: list[Any] = []
    for e in events:
        if isinstance(e, TextChunk):
            update = update_agent_message_text(e.text)
            update.message_id = e.message_id
        elif isinstance(e, ToolCallStart):
            path = f"/w/{e.input['path']}"
            update = start_tool_call(e.call_id, f"Write {path}", kind="edit", status="pending",
                                     content=[tool_diff_content(path, e.input["content"])],
                                     locations=None, raw_input=e.input)
            from acp.schema import ToolCallLocation

            update.locations = [ToolCallLocation(path=path)]
        elif isinstance(e, ToolCallEnd):
            update = update_tool_call(e.call_id, status="completed",
                                      content=[tool_content(text_block(e.output))],
                                      raw_output={"output": e.output})
        elif isinstance(e, Plan):
            update = update_plan([plan_entry(p.content, priority="medium",
                                             status=p.status) for p in e.entries])
        else:
            continue
        out.append(update)
    return out


def sdk_lines(updates: list[Any]) -> list[bytes]:
    from acp.schema import SessionNotification

    out = []
    for update in updates:
        params = SessionNotification(session_id="s1", update=update).model_dump(
            mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
        payload = {"jsonrpc": "2.0", "method": "session/update", "params": params}
        out.append((json.dumps(payload, separators=(",", ":")) + "\n").encode("utf-8"))
    return out


def _check(ours: list[bytes], theirs: list[bytes]) -> None:
    """Same updates, whichever writer: what an SDK client parses from both is equal."""
    from acp.schema import SessionNotification

    assert len(ours) == len(theirs), (len(ours), len(theirs))
    for a, b in zip(ours, theirs, strict=True):
        left = SessionNotification.model_validate(json.loads(a)["params"])
        right = SessionNotification.model_validate(json.loads(b)["params"])
        assert left.update.model_dump() == right.update.model_dump(), (a, b)


def run(quick: bool = False) -> None:
    chunks = 5_000 if quick else 50_000
    events = turn_events(chunks)
    updates = sdk_updates(events)
    floor = [json.loads(line) for line in sdk_lines(updates)]
    _check(trio_cap_lines(events), sdk_lines(updates))

    def dumps() -> int:
        for d in floor:
            json.dumps(d, separators=(",", ":")).encode()
        return len(floor)

    def sdk() -> int:
        return len(sdk_lines(sdk_updates(events)))

    def ours() -> int:
        return len(trio_cap_lines(events))

    rates = interleaved_rates({"dumps": dumps, "sdk": sdk, "ours": ours},
                              repeat=3 if quick else 5)
    print(f"acp agent side: a turn of {len(floor):,} session/update lines "
          f"({chunks:,} text chunks, tool calls with diffs, plans)")
    row("json.dumps of the finished dicts (floor)", rates["dumps"])
    row("official Python SDK (pydantic models + its dump)", rates["sdk"])
    row("trio-cap AcpAgentSide.core_events (CAP events → lines)", rates["ours"],
        rates["sdk"], "× the SDK")
    print(f"  {'trio-cap vs json.dumps of ready dicts':<52} {'':>12}     "
          f"{rates['ours'] / rates['dumps']:6.2f}×")
