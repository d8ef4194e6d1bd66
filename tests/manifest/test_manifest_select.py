"""Binding selection: candidate order, forcing, missing programs, and the fallback loop."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from tests.manifest.helpers import minimal
from trio_cap.actors.manifest import (
    BindingNotOffered,
    BindingUnavailable,
    first_working,
    parse_manifest,
    plan_bindings,
)
from trio_cap.actors.manifest.select import BindingCandidate
from trio_cap.events.kinds import BindingFallback
from trio_cap.events.log.memory import MemoryEventLog

ALL = """
[fast_path]
x-inproc = true
grpc = "localhost:50051"
a2a_serve_at = "http://127.0.0.1:4000"
acp_stdio = ["demo", "acp"]
stream_json = ["demo", "--json"]
"""


def everywhere(_program: str) -> str:
    return "/usr/bin/" + _program


def nowhere(_program: str) -> None:
    return None


def test_preference_order_with_everything_declared() -> None:
    plan = plan_bindings(parse_manifest(minimal(extra=ALL), "m"), which=everywhere)
    assert [c.binding for c in plan.candidates] == ["inproc", "stream-json", "acp", "a2a", "pty"]
    assert plan.warnings == (
        "grpc: declared by the manifest but not supported by trio-cap; skipped",
    )
    sj, acp, a2a, pty = plan.candidates[1:]
    assert sj.argv == ("demo", "--json") and sj.program_path == "/usr/bin/demo"
    assert acp.argv == ("demo", "acp")
    assert a2a.url == "http://127.0.0.1:4000" and a2a.argv is None
    assert pty.argv == ("demo",)
    assert plan.chosen is plan.candidates[0]


def test_without_inproc_stream_json_comes_first() -> None:
    extra = ALL.replace("x-inproc = true\n", "")
    plan = plan_bindings(parse_manifest(minimal(extra=extra), "m"), which=everywhere)
    assert [c.binding for c in plan.candidates] == ["stream-json", "acp", "a2a", "pty"]
    assert plan.chosen is not None and plan.chosen.binding == "stream-json"


def test_pty_only_when_nothing_else_is_declared() -> None:
    plan = plan_bindings(parse_manifest(minimal(), "m"), which=everywhere)
    assert [c.binding for c in plan.candidates] == ["pty"]
    assert plan.warnings == ()


def test_true_means_startup_command_speaks_the_binding() -> None:
    m = parse_manifest(minimal(extra="[fast_path]\nstream_json = true\nacp_stdio = true\n"), "m")
    plan = plan_bindings(m, which=everywhere)
    assert [(c.binding, c.argv) for c in plan.candidates] == [
        ("stream-json", ("demo",)), ("acp", ("demo",)), ("pty", ("demo",)),
    ]


def test_missing_program_stays_a_candidate_but_is_not_chosen() -> None:
    extra = '[fast_path]\nstream_json = ["claude-missing", "-p"]\n'
    m = parse_manifest(minimal(extra=extra), "m")
    plan = plan_bindings(m, which=lambda p: None if p == "claude-missing" else "/bin/" + p)
    assert [(c.binding, c.available) for c in plan.candidates] == [
        ("stream-json", False), ("pty", True),
    ]
    assert plan.chosen is not None and plan.chosen.binding == "pty"
    assert plan.warnings == (
        "stream-json: program 'claude-missing' not found; it will fail and fall back",
    )


def test_nothing_installed_means_nothing_chosen() -> None:
    plan = plan_bindings(parse_manifest(minimal(extra=ALL), "m"), which=nowhere)
    assert plan.chosen is not None and plan.chosen.binding == "inproc"  # needs no program
    plan = plan_bindings(
        parse_manifest(minimal(extra=ALL.replace("x-inproc = true\n", "")), "m"), which=nowhere
    )
    assert plan.chosen is not None and plan.chosen.binding == "a2a"  # a URL, not a program
    plan = plan_bindings(parse_manifest(minimal(), "m"), which=nowhere)
    assert plan.chosen is None


@pytest.mark.parametrize("binding", ["inproc", "stream-json", "acp", "a2a", "pty"])
def test_force_narrows_to_one_binding(binding: str) -> None:
    plan = plan_bindings(parse_manifest(minimal(extra=ALL), "m"), force=binding, which=everywhere)
    assert [c.binding for c in plan.candidates] == [binding]
    assert plan.warnings == ()


def test_forcing_an_undeclared_or_unsupported_binding_fails() -> None:
    m = parse_manifest(minimal(), "m")
    with pytest.raises(BindingNotOffered, match=r"does not declare it \(offered: pty\)"):
        plan_bindings(m, force="acp", which=everywhere)
    with pytest.raises(BindingNotOffered, match="does not speak gRPC"):
        plan_bindings(parse_manifest(minimal(extra=ALL), "m"), force="grpc", which=everywhere)
    with pytest.raises(BindingNotOffered, match="unknown binding"):
        plan_bindings(m, force="carrier-pigeon", which=everywhere)


# --------------------------------------------------------------------------
# the fallback loop, with real processes
# --------------------------------------------------------------------------

MISSING = "/nonexistent/trio-cap-test/agent-that-is-not-installed"


async def spawn(candidate: BindingCandidate) -> int:
    assert candidate.argv is not None
    done = await trio.run_process(list(candidate.argv), capture_stdout=True)
    return done.returncode


async def test_missing_binary_falls_back_to_the_next_binding_and_logs_why() -> None:
    extra = f'[fast_path]\nstream_json = ["{MISSING}", "-p"]\n'
    text = minimal(extra=extra).replace(
        'command = ["demo"]', f'command = ["{sys.executable}", "-c", "print(42)"]'
    )
    plan = plan_bindings(parse_manifest(text, "m"))
    assert [c.binding for c in plan.candidates] == ["stream-json", "pty"]
    assert not plan.candidates[0].available

    log = MemoryEventLog()
    calls: list[tuple[str, str, str]] = []

    async def on_fallback(failed: str, next_: str, reason: str) -> None:
        calls.append((failed, next_, reason))
        await log.append([BindingFallback(failed=failed, next=next_, reason=reason)],
                         stream="s1")

    chosen, returncode = await first_working(plan.candidates, spawn, on_fallback)
    assert chosen.binding == "pty" and returncode == 0
    assert len(calls) == 1
    failed, next_, reason = calls[0]
    assert (failed, next_) == ("stream-json", "pty")
    assert reason.startswith("FileNotFoundError:") and MISSING in reason
    (env,) = log.read(1)
    assert env.stream == "s1"
    assert env.event == BindingFallback(failed="stream-json", next="pty", reason=reason)


async def test_all_failing_raises_binding_unavailable_with_every_reason() -> None:
    candidates = [
        BindingCandidate("stream-json", argv=(MISSING,), available=False),
        BindingCandidate("acp", argv=(MISSING + "-acp",), available=False),
        BindingCandidate("pty", argv=(MISSING + "-tui",), available=False),
    ]
    fallbacks: list[tuple[str, str]] = []

    async def on_fallback(failed: str, next_: str, _reason: str) -> None:
        fallbacks.append((failed, next_))

    with pytest.raises(BindingUnavailable) as info:
        await first_working(candidates, spawn, on_fallback)
    assert fallbacks == [("stream-json", "acp"), ("acp", "pty")]
    assert [b for b, _ in info.value.reasons] == ["stream-json", "acp", "pty"]
    assert all(r.startswith("FileNotFoundError:") for _, r in info.value.reasons)
    assert (info.value.code, info.value.numeric) == ("cap_binding_unavailable", -32009)


async def test_a_failed_handshake_counts_like_a_failed_spawn() -> None:
    async def try_open(c: BindingCandidate) -> str:
        if c.binding == "acp":
            raise ConnectionError("initialize: protocol version 99 not supported")
        return "connected"

    seen: list[str] = []

    async def on_fallback(failed: str, next_: str, reason: str) -> None:
        seen.append(f"{failed}->{next_}: {reason}")

    chosen, conn = await first_working(
        [BindingCandidate("acp", argv=("x",)), BindingCandidate("pty", argv=("x",))],
        try_open, on_fallback,
    )
    assert (chosen.binding, conn) == ("pty", "connected")
    assert seen == ["acp->pty: ConnectionError: initialize: protocol version 99 not supported"]


async def test_no_candidates_is_unavailable() -> None:
    async def never(_c: object) -> None:
        raise AssertionError("not called")

    async def on_fallback(*_a: str) -> None:
        raise AssertionError("not called")

    with pytest.raises(BindingUnavailable, match="no binding to try"):
        await first_working([], never, on_fallback)


async def test_cancellation_is_not_a_binding_failure() -> None:
    fallbacks: list[str] = []

    async def hang(_c: BindingCandidate) -> None:
        await trio.sleep_forever()

    async def on_fallback(failed: str, _next: str, _reason: str) -> None:
        fallbacks.append(failed)

    with trio.CancelScope() as scope:
        scope.cancel()
        await first_working(
            [BindingCandidate("acp", argv=("x",)), BindingCandidate("pty", argv=("x",))],
            hang, on_fallback,
        )
    assert scope.cancelled_caught
    assert fallbacks == []


def test_candidate_description_says_whether_the_program_is_there(tmp_path: Path) -> None:
    c = BindingCandidate("pty", argv=("demo", "-i"), program_path=str(tmp_path / "demo"))
    assert c.describe() == f"pty  demo -i  [demo: {tmp_path / 'demo'}]"
    missing = BindingCandidate("pty", argv=("demo",), available=False)
    assert missing.describe() == "pty  demo  [demo: NOT FOUND]"
