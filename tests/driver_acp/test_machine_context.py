"""The session's system prompt (a restarted run's transcript) on ACP, which has no system
prompt: a text block before the first prompt of a session opened with ``session/new``,
never before a loaded session's (its agent has its history)."""

from __future__ import annotations

from tests.driver_acp.acp_lib import error, ready_client, result, written
from trio_cap.events.kinds import AgentRaw


def blocks(client, text: str) -> list[str]:  # type: ignore[no-untyped-def]
    from trio_cap.events.kinds import ContentBlock, UserInputInject

    (sent,) = written(client.send(UserInputInject(content=(ContentBlock(text=text),))))
    return [b["text"] for b in sent["params"]["prompt"]]


def finish(client, rpc_id: int) -> None:  # type: ignore[no-untyped-def]
    client.receive_data(result(rpc_id, {"stopReason": "end_turn"}))


def test_a_new_session_gets_the_context_once_before_its_first_prompt() -> None:
    client, _ = ready_client(context="the story so far")
    assert blocks(client, "go on") == ["the story so far", "go on"]
    finish(client, client._prompt)  # type: ignore[arg-type]
    assert blocks(client, "and then") == ["and then"]


def test_a_loaded_session_gets_no_context() -> None:
    client, out = ready_client(context="the story so far", resume_id="old")
    assert written(out)[-1]["method"] == "session/load"
    client.receive_data(result(written(out)[-1]["id"], {}))
    assert blocks(client, "go on") == ["go on"]


def test_a_refused_load_opens_a_new_session_that_gets_the_context() -> None:
    client, out = ready_client(context="the story so far", resume_id="old")
    refused = client.receive_data(error(written(out)[-1]["id"], -32002, "no such session"))
    (raw,) = [o for o in refused if type(o) is AgentRaw]
    assert raw.reason == "load_failed" and "carries the context" in raw.text
    assert written(refused)[-1]["method"] == "session/new"
    client.receive_data(result(written(refused)[-1]["id"], {"sessionId": "s2"}))
    assert blocks(client, "go on") == ["the story so far", "go on"]


def test_without_context_the_prompt_is_as_given() -> None:
    client, _ = ready_client()
    assert blocks(client, "hi") == ["hi"]
