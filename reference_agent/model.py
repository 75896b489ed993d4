"""The model boundary: the official ``openai`` client, behind a one-method Protocol.

openai 3.x sends through ``httpx2``, which respx 0.23 does not patch. We therefore always
hand the client an ``httpx.Client`` (``http_client=``): in tests that client's transport is
what respx intercepts, and in production it is an ordinary pooled client. openai only uses
the client's ``send``/``build_request`` surface, which both packages share.

Requests go through ``client.post("/chat/completions", cast_to=ChatCompletion)`` rather
than ``chat.completions.create``: the same request without create()'s transform pass (see
``OpenAIChatModel.complete``; a test proves the two send the same thing).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import httpx
import openai
from openai.types.chat import ChatCompletion

from crashmatrix.harness.core.records import Message, ToolCall

__all__ = ["ChatModel", "ModelSettings", "OpenAIChatModel", "make_openai_client"]


class ChatModel(Protocol):
    def complete(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> Message:
        """Return the next assistant message for this conversation."""
        ...


@dataclass(frozen=True, slots=True)
class ModelSettings:
    base_url: str
    api_key: str
    model: str
    max_retries: int = 2
    timeout: float = 60.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ModelSettings:
        env = os.environ if env is None else env
        return cls(
            base_url=env.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
            api_key=env.get("OPENAI_API_KEY", ""),
            model=env.get("CRASHMATRIX_MODEL", env.get("OPENAI_MODEL", "gpt-4o-mini")),
        )


def make_openai_client(settings: ModelSettings, http_client: httpx.Client | None = None) -> openai.OpenAI:
    client = http_client if http_client is not None else httpx.Client(timeout=settings.timeout)
    return openai.OpenAI(
        base_url=settings.base_url,
        api_key=settings.api_key or "unset",
        max_retries=settings.max_retries,
        timeout=settings.timeout,
        # The annotation says httpx2.Client; an httpx.Client has the same interface and is
        # the one respx can intercept (see module docstring).
        http_client=cast(Any, client),
    )


class OpenAIChatModel:
    """Chat completions with tools, through the official client."""

    def __init__(self, client: openai.OpenAI, model: str) -> None:
        self._client = client
        self._model = model

    def complete(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> Message:
        body: dict[str, Any] = {"model": self._model, "messages": list(messages)}
        if tools:
            body["tools"] = list(tools)
        # What ``chat.completions.create(**body)`` sends, without its request transform: the
        # client's documented way to post a body as is, through the same client (auth,
        # retries, httpx) and parsed into the same ``ChatCompletion``. The transform walks
        # every message through each message type (~2 ms a request, 15% of a harness life)
        # and gives back the same JSON for the plain-JSON bodies this agent builds, which a
        # test checks on every request of the built-in scenarios.
        response = self._client.post(
            "/chat/completions",
            body=body,
            cast_to=ChatCompletion,
            options={"security": {"bearer_auth": True}},  # as create() passes it
        )
        choice = response.choices[0].message
        calls = tuple(
            ToolCall(id=call.id, name=function.name, arguments=function.arguments or "")
            for call in (choice.tool_calls or ())
            if (function := getattr(call, "function", None)) is not None  # not a custom tool call
        )
        return Message(role="assistant", content=choice.content or "", tool_calls=calls)
