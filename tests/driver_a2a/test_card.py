"""The card: which interface and spelling, and where a token may go (``machine_card.py``);
the driver's settings from a manifest's ``x-a2a-*`` keys against a real a2a-sdk server."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import trio

from tests.driver_a2a.conftest import SECONDS, events_of
from tests.driver_a2a.servers import A2aServer, Echo
from trio_cap.actors.bindings.a2a import frames as f
from trio_cap.actors.bindings.a2a.connector import card_urls
from trio_cap.actors.bindings.a2a.machine_card import CardRefused, choose
from trio_cap.actors.orchestrator import Orchestrator
from trio_cap.events.kinds import SessionWarning

CARD_URL = "http://127.0.0.1:8000/.well-known/agent-card.json"


def card(**fields: object) -> f.AgentCard:
    return msgspec.convert({"name": "x", **fields}, f.AgentCard)


def v1(*entries: tuple[str, str], **more: object) -> f.AgentCard:
    return card(supportedInterfaces=[{"url": u, "protocolBinding": "JSONRPC",
                                      "protocolVersion": v} for u, v in entries], **more)


def test_1_0_is_preferred_wherever_it_is_listed() -> None:
    choice = choose(v1(("/draft", "0.3"), ("/v1", "1.0")), CARD_URL)
    assert (choice.spelling, choice.url) == (f.CURRENT, "http://127.0.0.1:8000/v1")
    assert (choice.other, choice.other_url) == (f.DRAFT, "http://127.0.0.1:8000/draft")


def test_a_draft_card_without_supported_interfaces() -> None:
    old = card(url="http://127.0.0.1:8000/rpc", protocolVersion="0.2.5",
               preferredTransport="JSONRPC")
    choice = choose(old, CARD_URL)
    assert (choice.spelling, choice.url, choice.other) == (f.DRAFT, old.url, None)


def test_the_tenant_is_kept_and_grpc_is_not_spoken() -> None:
    c = card(supportedInterfaces=[
        {"url": "grpc://h", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
        {"url": "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0",
         "tenant": "team-a"}])
    choice = choose(c, CARD_URL)
    assert (choice.url, choice.tenant) == ("http://127.0.0.1:8000/rpc", "team-a")


def test_unknown_versions_are_refused_with_what_is_offered() -> None:
    with pytest.raises(CardRefused, match=r"it offers: JSONRPC 2.0, HTTP\+JSON 1.0"):
        choose(card(supportedInterfaces=[
            {"url": "/a", "protocolBinding": "JSONRPC", "protocolVersion": "2.0"},
            {"url": "/b", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]), CARD_URL)


def test_a_token_never_goes_to_another_origin() -> None:
    elsewhere = v1(("http://evil.example:9/rpc", "1.0"))
    assert choose(elsewhere, CARD_URL).url == "http://evil.example:9/rpc"  # no token: fine
    with pytest.raises(CardRefused, match="refusing to send the bearer token"):
        choose(elsewhere, CARD_URL, token=True)
    loopback = v1(("http://localhost:8000/rpc", "1.0"))
    assert choose(loopback, CARD_URL, token=True).url == "http://localhost:8000/rpc"
    mixed = v1(("/rpc", "1.0"), ("http://evil.example:9/rpc", "0.3"))
    assert choose(mixed, CARD_URL, token=True).other is None  # no fallback to there


def test_strict_mode_and_the_extension() -> None:
    plain = v1(("/rpc", "1.0"))
    with pytest.raises(CardRefused, match="does not declare the CAP extension"):
        choose(plain, CARD_URL, mode="strict")
    cap = v1(("/rpc", "1.0"), capabilities={"extensions": [{"uri": "cap-protocol/v1"}]})
    assert choose(cap, CARD_URL, mode="strict").cap_extension


def test_bearer_schemes_in_both_spellings() -> None:
    draft = card(securitySchemes={"b": {"type": "http", "scheme": "bearer"}})
    current = card(securitySchemes={"b": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}})
    key = card(securitySchemes={"k": {"type": "apiKey", "in": "header", "name": "X"}})
    assert f.bearer_declared(draft) and f.bearer_declared(current)
    assert not f.bearer_declared(key)


def test_where_the_card_is_looked_for() -> None:
    assert card_urls("http://h:1") == ["http://h:1/.well-known/agent-card.json",
                                       "http://h:1/.well-known/agent.json"]
    assert card_urls("http://h:1/agents/a/")[2:] == ["http://h:1/.well-known/agent-card.json",
                                                     "http://h:1/.well-known/agent.json"]
    assert card_urls("http://h:1/my-card.json") == ["http://h:1/my-card.json"]


def _manifest(path: Path, url: str, extra: str) -> Path:
    path.write_text(f'''
[agent]
name = "remote"
binary = "remote"
profiles = []
[startup]
command = ["remote"]
ready_when = {{ pattern = "\\\\S" }}
[fast_path]
a2a_serve_at = "{url}"
{extra}
[pty]
cols = 80
rows = 24
[capabilities]
streaming_output = true
''')
    return path


async def test_manifest_token_file_metadata_and_strict_mode(orch: Orchestrator,
                                                            tmp_path: Path) -> None:
    token = tmp_path / "tok"
    token.write_text("m-token\n")
    extra = (f'x-a2a-token-file = "{token}"\n'
             'x-a2a-metadata = { where = "${cwd}", n = 1 }\n')
    echo = Echo()
    with A2aServer(echo, token="m-token").running() as srv, trio.fail_after(SECONDS):
        manifest = _manifest(tmp_path / "remote.toml", srv.base, extra)
        session = await orch.start_session(str(manifest), binding="a2a", cwd=tmp_path)
        turn = await session.run_turn("hi")
        await session.close()
    assert turn.text == "echo: hi"
    where = str(tmp_path.resolve())  # noqa: ASYNC240 - one stat in a test
    assert dict(echo.contexts[0].message.metadata) == {"where": where,
                                                       "n": 1.0}
    assert events_of(orch, session.id, SessionWarning)
    strict = _manifest(tmp_path / "strict.toml", "http://127.0.0.1:9",
                       'x-a2a-cap-extension = "sometimes"\n')
    with trio.fail_after(SECONDS):
        session = await orch.start_session(str(strict), binding="a2a", cwd=tmp_path)
        view = await session.wait_terminal()
    assert "x-a2a-cap-extension must be one of strict, warn" in (view.last_error or "")


def test_an_interface_url_that_is_not_http_is_refused() -> None:
    with pytest.raises(CardRefused, match="not an http"):
        choose(v1(("ftp://127.0.0.1/rpc", "1.0")), CARD_URL)
    assert choose(v1(("/rpc", "1.0"), ("file:///x", "0.3")), CARD_URL).other is None
