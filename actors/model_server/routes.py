"""Which endpoint a request is for, decided from method and path alone.

Agents differ in how they spell base URLs (with or without ``/v1``), so both
spellings route the same way.  Kept pure so the table can be tested directly.
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

RouteKind = Literal[
    "head", "health", "models", "model", "gemini-models", "gemini-model",
    "openai-chat", "openai-responses", "anthropic", "anthropic-count",
    "gemini", "gemini-count", "not-found",
]


class Route(msgspec.Struct, frozen=True):
    kind: RouteKind
    model: str = ""
    stream: bool = False


_GEMINI_CALL = re.compile(
    r"^/(?:v1beta|v1|v1alpha)/(?:models|tunedModels)/([^/:]+):(generateContent|"
    r"streamGenerateContent|countTokens)$"
)
_GEMINI_MODEL = re.compile(r"^/(?:v1beta|v1alpha)/models/([^/:]+)$")
_MODEL = re.compile(r"^(?:/v1)?/models/([^/:]+)$")

_POSTS: dict[str, RouteKind] = {
    "/v1/chat/completions": "openai-chat", "/chat/completions": "openai-chat",
    "/v1/responses": "openai-responses", "/responses": "openai-responses",
    "/v1/messages": "anthropic", "/messages": "anthropic",
    "/v1/messages/count_tokens": "anthropic-count", "/messages/count_tokens": "anthropic-count",
}


def route(method: str, path: str) -> Route:
    path = path.rstrip("/") or "/"
    if method == "HEAD":
        return Route("head")
    if method == "GET":
        if path in ("/", "/health", "/healthz"):
            return Route("health")
        if path in ("/v1/models", "/models"):
            return Route("models")
        if path in ("/v1beta/models", "/v1alpha/models"):
            return Route("gemini-models")
        if m := _GEMINI_MODEL.match(path):
            return Route("gemini-model", model=m.group(1))
        if m := _MODEL.match(path):
            return Route("model", model=m.group(1))
        return Route("not-found")
    if method == "POST":
        if path in _POSTS:
            return Route(_POSTS[path])
        if m := _GEMINI_CALL.match(path):
            model, call = m.group(1), m.group(2)
            if call == "countTokens":
                return Route("gemini-count", model=model)
            return Route("gemini", model=model, stream=call == "streamGenerateContent")
    return Route("not-found")
