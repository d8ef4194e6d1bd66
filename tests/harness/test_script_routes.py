"""Script files, the route table and the request-log redaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from trio_cap.actors.model_server.record import REDACTED, clean_headers, clean_query
from trio_cap.actors.model_server.routes import Route, route
from trio_cap.actors.model_server.script import ScriptError, load_script

SCRIPT = '''
models = ["fake-model", "gpt-5.4"]

[default]
text = "fallback"

[[rules]]
match = "(?i)create (\\\\S+)"
text = "Creating it."
tool_calls = [{ name = "Write", arguments = { file_path = "/tmp/x", content = "hi" } }]
then = { text = "Done.", then = { text = "Really done." } }

[[turns]]
thinking = "Short."
text = "first"
error = { status = 429, retry_after = 1.5 }
delay_ms = 20
'''


def test_load_script_toml(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(SCRIPT)
    script = load_script(path)
    assert script.models == ["fake-model", "gpt-5.4"]
    assert script.default.text == "fallback"
    rule = script.rules[0]
    assert rule.tool_calls[0].arguments == {"file_path": "/tmp/x", "content": "hi"}
    assert rule.then is not None and rule.then.then is not None
    assert rule.then.then.text == "Really done."
    turn = script.turns[0]
    assert turn.error is not None and turn.error.retry_after == 1.5 and turn.error.times == 1
    assert turn.delay_ms == 20 and turn.thinking == "Short."


@pytest.mark.parametrize("text, needle", [
    ("[[turns]]\ntxt = 'typo'\n", "txt"),
    ("[[rules]]\nmatch = '('\n", "rules[0].match"),
    ("[default]\ntext = 'unterminated\n", "s.toml"),
    ("[[turns]]\nerror = { status = 'x' }\n", "status"),
])
def test_bad_scripts_name_the_problem(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(ScriptError) as info:
        load_script(path)
    assert needle in str(info.value)


def test_missing_script_file(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match=r"nope\.toml"):
        load_script(tmp_path / "nope.toml")


@pytest.mark.parametrize("method, path, expected", [
    ("POST", "/v1/chat/completions", Route("openai-chat")),
    ("POST", "/chat/completions/", Route("openai-chat")),
    ("POST", "/v1/responses", Route("openai-responses")),
    ("POST", "/v1/messages", Route("anthropic")),
    ("POST", "/v1/messages/count_tokens", Route("anthropic-count")),
    ("POST", "/v1beta/models/fake-model:generateContent", Route("gemini", model="fake-model")),
    ("POST", "/v1beta/models/gemini-3.5-flash-lite:streamGenerateContent",
     Route("gemini", model="gemini-3.5-flash-lite", stream=True)),
    ("POST", "/v1beta/models/m:countTokens", Route("gemini-count", model="m")),
    ("GET", "/v1/models", Route("models")),
    ("GET", "/v1/models/gpt-5.4", Route("model", model="gpt-5.4")),
    ("GET", "/v1beta/models", Route("gemini-models")),
    ("GET", "/v1beta/models/fake-model", Route("gemini-model", model="fake-model")),
    ("HEAD", "/", Route("head")),
    ("HEAD", "/api/hello", Route("head")),
    ("GET", "/", Route("health")),
    ("POST", "/v1/unknown", Route("not-found")),
    ("DELETE", "/v1/messages", Route("not-found")),
])
def test_routes(method: str, path: str, expected: Route) -> None:
    assert route(method, path) == expected


def test_secrets_are_redacted_but_named() -> None:
    headers = clean_headers([
        (b"authorization", b"Bearer sk-123"), (b"x-api-key", b"dummy"),
        (b"x-goog-api-key", b"g"), (b"x-session-token", b"t"), (b"accept", b"a"),
        (b"accept", b"b"), (b"anthropic-version", b"2023-06-01"),
    ])
    assert headers["authorization"] == REDACTED and headers["x-api-key"] == REDACTED
    assert headers["x-goog-api-key"] == REDACTED and headers["x-session-token"] == REDACTED
    assert headers["accept"] == "a, b" and headers["anthropic-version"] == "2023-06-01"
    assert clean_query("alt=sse&key=abc") == {"alt": "sse", "key": REDACTED}
