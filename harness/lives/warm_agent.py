"""What the fork server prepares for one agent besides importing modules, so that each life
forked from it starts where the last one would have been after its first second of work.

* The agent's adapter, loaded once (``adapter_for``: an adapter YAML parsed and validated,
  a framework's adapter built); a life forked from the server finds it in the cache instead
  of reading the file again (``harness.lives.life.run_life``).
* For a framework agent, one throwaway life of the agent itself: ``harness.lives.warmup``
  (``warm_framework``) runs it, after the reference agent's.
* openai's lazily built request transforms and response models (``warm_openai``).
* anyio's asyncio backend (``warm_async_http``): an async httpx client (the OpenAI Agents
  SDK's, LangChain's async path) looks it up on its first close, and anyio imports it then
  (~14 ms of every such life, measured with cProfile on the SDK example's lives).
* One TLS context for every HTTP client a life builds through ``httpcore2`` (what openai 3.x
  sends through): a foreign agent builds its own ``OpenAI()`` client in every life, and its
  default context loads the system's CA bundle each time (~100-150 ms, a kind-2 case's
  largest single cost). The context is created here once, with the same arguments and the
  same environment, and shared: an ``SSLContext`` is meant to be shared by connections, and
  a life talks plain HTTP to its loopback services anyway. The reference agent's own client
  gets the same treatment in ``harness.lives.life`` (``_TLS``).

The last three are for an agent that builds its own clients in the life. An adapter whose
lives only use the harness's client (``ctx.http``) says ``own_http_client = False`` (the
reference adapter does) and gets its adapter loaded only.

Anything that fails here is left for the life, which fails with its real error.
"""

from __future__ import annotations

import contextlib
import os
import ssl
from collections.abc import Callable
from typing import Any

__all__ = ["share_default_tls", "warm", "warm_async_http", "warm_openai"]


def warm(agent: str) -> None:
    from crashmatrix.harness.agents.loading import adapter_for

    adapter: object = None
    with contextlib.suppress(Exception):
        adapter = adapter_for(agent)
    if getattr(adapter, "own_http_client", True) is False:
        # Its lives build no HTTP or OpenAI client (the reference agent: they use the life's,
        # ``ctx.http``); the steps below would be ~115 ms of CPU at every server start, for
        # no life (benchmarks/forkserver_start.py).
        return
    with contextlib.suppress(Exception):
        share_default_tls()
    with contextlib.suppress(Exception):
        warm_openai()
    with contextlib.suppress(Exception):
        warm_async_http()


def warm_async_http() -> None:
    """Import what an async HTTP client's event loop needs on first use, where the agent's
    libraries use anyio at all (so an agent that never does is not made to import it)."""
    import importlib
    import sys

    if "anyio" in sys.modules:
        importlib.import_module("anyio._backends._asyncio")
        importlib.import_module("concurrent.futures.thread")


def warm_openai() -> None:
    """One chat completion with tools through the official client, answered in-process (no
    socket): openai builds its request transforms and response models lazily, on first use,
    ~50 ms of CPU that every life of an agent calling ``chat.completions.create`` paid again.
    Built here, before the fork, they are every life's already."""
    import httpx2
    import openai

    def answer(request: httpx2.Request) -> httpx2.Response:
        call = {"id": "warm", "type": "function", "function": {"name": "warm", "arguments": "{}"}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        choice = {"index": 0, "finish_reason": "tool_calls", "message": message}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        body = {"id": "warm", "object": "chat.completion", "created": 0, "model": "warm"}
        return httpx2.Response(200, json={**body, "choices": [choice], "usage": usage})

    transport = httpx2.MockTransport(answer)
    with openai.OpenAI(
        api_key="crashmatrix-warm",
        base_url="http://warm.invalid/v1",
        http_client=httpx2.Client(transport=transport),
    ) as client:
        call: Any = {"id": "warm", "type": "function", "function": {"name": "warm", "arguments": "{}"}}
        tool: Any = {
            "type": "function",
            "function": {
                "name": "warm",
                "description": "warm",
                "parameters": {"type": "object", "properties": {"a": {"type": "string"}}},
            },
        }
        client.chat.completions.create(
            model="warm",
            messages=[
                {"role": "system", "content": "warm"},
                {"role": "user", "content": "warm"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "warm", "content": "warm"},
            ],
            tools=[tool],
        )


def share_default_tls() -> None:
    """Memoise ``httpcore2.default_ssl_context`` by its argument and the environment it
    reads (``SSL_CERT_FILE``, ``SSL_CERT_DIR``), and create the usual one now."""
    try:
        import httpcore2
        import httpcore2._ssl
    except ImportError:
        return
    original: Callable[..., ssl.SSLContext] = httpcore2._ssl.default_ssl_context
    if getattr(original, "crashmatrix_shared", False):
        return
    made: dict[tuple[Any, ...], ssl.SSLContext] = {}

    def shared(*, _trust_env: bool = True) -> ssl.SSLContext:
        key = (_trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if key not in made:
            made[key] = original(_trust_env=_trust_env)
        return made[key]

    shared.crashmatrix_shared = True  # type: ignore[attr-defined]
    # Both names: httpx2 calls it through the package, others may import it from the module.
    httpcore2.default_ssl_context = shared
    httpcore2._ssl.default_ssl_context = shared
    shared()
