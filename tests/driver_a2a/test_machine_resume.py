"""The driver of a resumed A2A session (``machine_resume.py``, rule H6): what the dead
connection's driver knew comes in the session config's ``session_resume_id``."""

from __future__ import annotations

from itertools import count

from tests.driver_a2a.machine_lib import URL, body, events, feed, inject, posts, task
from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.machine import A2aDriver
from trio_cap.actors.bindings.a2a.machine_card import Choice
from trio_cap.actors.bindings.a2a.machine_io import ArtifactState
from trio_cap.actors.bindings.a2a.machine_resume import parse, resume_id
from trio_cap.events.kinds import SessionConfig, TextChunk


def resumed(resume: str | None) -> A2aDriver:
    choice = Choice(spelling=f.CURRENT, url=URL, tenant="", other=None, other_url=None,
                    cap_extension=False, bearer_declared=False)
    ids = count(1)
    d = A2aDriver(choice, new_id=lambda: f"m{next(ids)}")
    d.send([SessionConfig(cwd="/w", session_resume_id=resume)])
    return d


def test_an_active_task_is_re_attached_and_what_was_taken_is_not_repeated() -> None:
    given = resume_id("C", "T", "working", {"said"}, {"A": ArtifactState(count=1)})
    assert parse(given)["task_id"] == "T"  # type: ignore[index]
    d = resumed(given)
    (post,) = posts(d.send([inject("the re-run input")]))
    assert post.method == "SubscribeToTask" and body(post)["params"] == {"id": "T"}
    snapshot = task("TASK_STATE_WORKING", history=[
        {"messageId": "said", "role": "ROLE_AGENT", "parts": [{"text": "already logged"}]},
        {"messageId": "new", "role": "ROLE_AGENT", "parts": [{"text": "fresh"}]}],
        artifacts=[{"artifactId": "A", "parts": [{"text": "old part"}, {"text": "new part"}]}])
    texts = [e.text for e in events(feed(d, post.request_id, snapshot))
             if type(e) is TextChunk]
    assert texts == ["fresh", "new part"]


def test_a_task_waiting_for_input_takes_the_next_input_as_its_follow_up() -> None:
    d = resumed(resume_id("C", "T", "input-required", set(), {}))
    (post,) = posts(d.send([inject("blue")]))
    message = body(post)["params"]["message"]
    assert post.method == "SendStreamingMessage"
    assert (message["taskId"], message["contextId"]) == ("T", "C")


def test_after_a_finished_task_the_next_input_is_a_new_task_in_the_context() -> None:
    d = resumed(resume_id("C", None, None, set(), {}))
    (post,) = posts(d.send([inject("next")]))
    message = body(post)["params"]["message"]
    assert message["contextId"] == "C" and not message.get("taskId")


def test_another_agents_session_id_is_not_an_a2a_resume_point() -> None:
    for given in (None, "", "3f2a-uuid", "{not json", '{"acp": {}}', '{"a2a": {"x": 1}}'):
        assert parse(given) is None
        d = resumed(given)
        (post,) = posts(d.send([inject("hi")]))
        assert post.method == "SendStreamingMessage"
        assert not body(post)["params"]["message"].get("contextId")
