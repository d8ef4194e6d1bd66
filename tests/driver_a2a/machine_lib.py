"""Helpers for the sans-io driver tests: a machine, its requests, frames to feed it."""

from __future__ import annotations

import json
from itertools import count
from typing import Any

from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.machine import A2aDriver, Post, SseBatch, SseData
from trio_cap.actors.bindings.a2a.machine_card import Choice
from trio_cap.actors.bindings.base import TurnEnded
from trio_cap.events.kinds import ContentBlock, Event, SessionConfig, UserInputInject

URL = "http://127.0.0.1:9/rpc"


def driver(spelling: f.Spelling = f.CURRENT, *, other: bool = False, cap: bool = False,
           **kw: Any) -> A2aDriver:
    alt = (f.DRAFT if spelling == f.CURRENT else f.CURRENT) if other else None
    choice = Choice(spelling=spelling, url=URL, tenant="", other=alt,
                    other_url=URL if other else None, cap_extension=cap, bearer_declared=False)
    ids = count(1)
    d = A2aDriver(choice, new_id=lambda: f"m{next(ids)}", **kw)
    d.send([SessionConfig(cwd="/w")])
    return d


def inject(text: str = "go") -> UserInputInject:
    return UserInputInject(content=(ContentBlock(text=text),))


def posts(outputs: list[Any]) -> list[Post]:
    return [o for o in outputs if type(o) is Post]


def start(d: A2aDriver, text: str = "go") -> int:
    (post,) = posts(d.send([inject(text)]))
    return post.request_id


def body(post: Post) -> dict[str, Any]:
    return json.loads(post.body)


def events(outputs: list[Any]) -> list[Event]:
    return [o for o in outputs if isinstance(o, Event)]


def ends(outputs: list[Any]) -> list[str]:
    return [o.stop_reason for o in outputs if type(o) is TurnEnded]


def frame(rid: int, result: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()


def feed(d: A2aDriver, rid: int, *results: dict[str, Any], batch: bool = False) -> list[Any]:
    """Feed results as SSE events (one step each, or all in one read)."""
    datas = [frame(rid, r) for r in results]
    if batch:
        return d.receive_frame(SseBatch(rid, datas))
    out: list[Any] = []
    for data in datas:
        out += d.receive_frame(SseData(rid, data))
    return out


# ---- v1 shapes ----------------------------------------------------------------------------

def task(state: str = "TASK_STATE_SUBMITTED", tid: str = "T", **extra: Any) -> dict[str, Any]:
    return {"task": {"id": tid, "contextId": "C", "status": {"state": state}, **extra}}


def status(state: str, *parts: dict[str, Any], mid: str = "s1", tid: str = "T",
           role: str = "ROLE_AGENT") -> dict[str, Any]:
    st: dict[str, Any] = {"state": state}
    if parts:
        st["message"] = {"messageId": mid, "role": role, "parts": list(parts)}
    return {"statusUpdate": {"taskId": tid, "contextId": "C", "status": st}}


def artifact(aid: str, *parts: dict[str, Any], append: bool = False, last: bool = False,
             name: str = "", tid: str = "T", **art: Any) -> dict[str, Any]:
    a: dict[str, Any] = {"artifactId": aid, "parts": list(parts), **art}
    if name:
        a["name"] = name
    return {"artifactUpdate": {"taskId": tid, "contextId": "C", "artifact": a,
                               "append": append, "lastChunk": last}}


def text(t: str) -> dict[str, Any]:
    return {"text": t}


def cap_part(kind: str, **fields: Any) -> dict[str, Any]:
    return {"data": {"kind": kind, **fields}, "metadata": {"cap.kind": kind}}
