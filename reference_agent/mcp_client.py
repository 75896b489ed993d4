"""The reference agent's tools over MCP: ``McpToolbox``, a ``Toolbox`` whose ``execute`` is one
MCP ``tools/call`` through the official ``mcp`` SDK's ``ClientSession``.

Only the transport of a tool call changes; the agent's ledger, hooks and recovery stay its own
(``agent.Agent`` is handed this toolbox instead of the mock tools). What each part does, and why:

* The agent is synchronous and the SDK is async: one anyio blocking portal (an event loop in a
  thread of its own) holds the session for the toolbox's life, and each call is one
  ``portal.call``. The session is opened when first needed (a tool list, a call), and
  again after one was lost.
* Identities travel in the request's ``_meta`` (docs/adapters.md "Tools over MCP"): the
  model's ``tool_call_id`` (which tool call the server attributes the request to), the
  runtime's ``idempotency_key`` (what a keyed service deduplicates by) and the ledger's
  ``execution_id`` (the attempt its ``running`` record names). The arguments are the model's,
  unchanged.
* A result's ``structuredContent`` with an ``ok`` field is a tool result in crashmatrix's shape
  (``ToolObservation.to_result``) and becomes that observation again, so the ledger and the
  Tool Result are what they would be with the tools in process. Any other result: ``isError``
  is a failure with its text, else a success with its text (and its structured content as
  data).
* A request that went out and got no readable answer (the server died, the connection
  closed, a result the SDK refuses, no answer in time) is uncertain: the effect may have
  happened, so the ledger says ``unknown`` and recovery goes by the tool's contract (look it
  up by key, or tell the model it cannot be confirmed), never a blind retry. The session is
  then dropped and the next call opens a new one (a new server for stdio; the same URL for
  HTTP, where the server's owner restarts it). A request that never went out (the server
  could not be started or reached) failed, and nothing happened.
* ``plan`` and ``check_precondition`` are the runtime's own (seed 004's FileWritePlan: the
  hashes of the file where the agent runs) and only read: they are delegated to a local
  ``Planner`` and are no tool calls.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shlex
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager, AsyncExitStack, ExitStack
from dataclasses import dataclass
from typing import Any, Protocol

import anyio.from_thread
import mcp_types as types
from mcp.client._transport import TransportStreams
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from crashmatrix.harness.core.tools import PreconditionVerdict, ToolContext, ToolObservation

__all__ = [
    "McpServer",
    "McpToolbox",
    "McpUnavailable",
    "Planner",
    "observation_of",
    "server_from_env",
]

# The result fields ``ToolObservation.to_result`` writes itself; every other field is the
# tool's own data. ``execution_id`` is the serving side's name for the attempt: the agent's
# ledger names its own.
_RESULT_FIELDS = frozenset({"ok", "status", "code", "content", "metadata", "execution_id"})
# Long enough for any mock tool under load; a server that never answers is a hang only the
# client's own timeout ends (a stdio pipe loses no single message).
DEFAULT_TIMEOUT = 60.0

Transport = Callable[[], AbstractAsyncContextManager[TransportStreams]]


class McpUnavailable(RuntimeError):
    """No MCP server was named (neither ``CRASHMATRIX_MCP_URL`` nor ``CRASHMATRIX_MCP_COMMAND``)."""


class Planner(Protocol):
    """The runtime's own reads before and after an effect (``Toolbox.plan`` and
    ``Toolbox.check_precondition``): no tool call, no side effect."""

    def plan(self, name: str, arguments: Mapping[str, Any]) -> Mapping[str, Any]: ...

    def check_precondition(
        self, name: str, arguments: Mapping[str, Any], plan: Mapping[str, Any]
    ) -> PreconditionVerdict: ...


@dataclass(frozen=True, slots=True)
class McpServer:
    """Where the tools are: a URL (streamable HTTP) or a command line (stdio)."""

    url: str = ""
    command: tuple[str, ...] = ()

    def transport(self) -> Transport:
        if self.url:
            return functools.partial(streamable_http_client, self.url)
        # The server inherits the agent's environment, as a process it starts would.
        params = StdioServerParameters(
            command=self.command[0], args=list(self.command[1:]), env=dict(os.environ)
        )
        return functools.partial(stdio_client, params, sys.stderr)


def server_from_env(env: Mapping[str, str] | None = None) -> McpServer:
    """The server the harness (or a team's configuration) names: ``CRASHMATRIX_MCP_URL``, else
    ``CRASHMATRIX_MCP_COMMAND`` (a shell-quoted command line)."""
    env = os.environ if env is None else env
    url = env.get("CRASHMATRIX_MCP_URL", "").strip()
    if url:
        return McpServer(url=url)
    command = tuple(shlex.split(env.get("CRASHMATRIX_MCP_COMMAND", "")))
    if command:
        return McpServer(command=command)
    raise McpUnavailable(
        "no MCP server: set CRASHMATRIX_MCP_URL (streamable HTTP) or CRASHMATRIX_MCP_COMMAND "
        "(the stdio server's command line); an adapter with `tools: mcp` sets them"
    )


# -- results ---------------------------------------------------------------------------------------


def _text_of(result: types.CallToolResult) -> str:
    return "\n".join(item.text for item in result.content if isinstance(item, types.TextContent))


def observation_of(result: types.CallToolResult) -> ToolObservation:
    """What the agent records for an answered call (pure)."""
    structured = result.structured_content
    if not isinstance(structured, Mapping) or "ok" not in structured:
        # A text answer in crashmatrix's shape is read as one too (a server without an
        # output schema sends its JSON as text).
        try:
            parsed = json.loads(_text_of(result))
        except ValueError:
            parsed = None
        structured = parsed if isinstance(parsed, Mapping) and "ok" in parsed else structured
    if isinstance(structured, Mapping) and "ok" in structured:
        ok = structured.get("ok") is True and not result.is_error
        metadata = structured.get("metadata")
        code = structured.get("code")
        return ToolObservation(
            ok=ok,
            code=None if ok else (code if isinstance(code, str) else "TOOL_ERROR"),
            content=str(structured.get("content") or ""),
            retryable=isinstance(metadata, Mapping) and metadata.get("retryable") is True,
            data={k: v for k, v in structured.items() if k not in _RESULT_FIELDS},
            uncertain=structured.get("status") == "unknown",
        )
    data = dict(structured) if isinstance(structured, Mapping) else {}
    if result.is_error:
        return ToolObservation(ok=False, code="TOOL_ERROR", content=_text_of(result), data=data)
    return ToolObservation(ok=True, content=_text_of(result), data=data)


def _unanswered(name: str, error: BaseException) -> ToolObservation:
    return ToolObservation(
        ok=False,
        code="SIDE_EFFECT_UNCERTAIN",
        content=(
            f"{name} was sent to the MCP server and no readable answer came back "
            f"({_describe(error)}); whether it took effect is unknown, so it must not be "
            "repeated blindly."
        ),
        uncertain=True,
    )


def _unreachable(name: str, error: BaseException) -> ToolObservation:
    return ToolObservation(
        ok=False,
        code="TOOL_ERROR",
        content=f"{name} was not sent: the MCP server could not be reached ({_describe(error)}).",
        retryable=True,
    )


def _describe(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in error.exceptions)
    return f"{type(error).__name__}: {error}".strip()


# -- the session -----------------------------------------------------------------------------------


class _Connection:
    """One MCP session, opened in the portal's event loop and kept there until closed."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, transport: Transport) -> None:
        self._portal = portal
        self._context: AbstractContextManager[ClientSession] = portal.wrap_async_context_manager(
            _open_session(transport)
        )
        self.session = self._context.__enter__()

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self._portal.call(functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        # A session whose server died may fail to close cleanly: it is gone either way.
        with contextlib.suppress(Exception):
            self._context.__exit__(None, None, None)


@contextlib.asynccontextmanager
async def _open_session(transport: Transport) -> Any:
    async with AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(transport())
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        yield session


class McpToolbox:
    """A ``Toolbox`` whose tools are an MCP server's (see the module docstring)."""

    def __init__(
        self,
        server: McpServer | Transport,
        planner: Planner | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._transport = server.transport() if isinstance(server, McpServer) else server
        # Settable: an agent may learn its contracts (which the planner needs) from the
        # server's own tool list, through this toolbox.
        self.planner = planner
        self._timeout = timeout
        self._stack = ExitStack()
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._connection: _Connection | None = None

    # -- the connection

    def _connect(self) -> _Connection:
        if self._connection is None:
            if self._portal is None:
                self._portal = self._stack.enter_context(anyio.from_thread.start_blocking_portal())
            self._connection = _Connection(self._portal, self._transport)
        return self._connection

    def _drop(self) -> None:
        if self._connection is not None:
            connection, self._connection = self._connection, None
            connection.close()

    def close(self) -> None:
        """Closes the session (a stdio server exits with its input) and the portal's loop."""
        self._drop()
        self._stack.close()

    def __enter__(self) -> McpToolbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def list_tools(self) -> list[dict[str, Any]]:
        """The server's tools as MCP ``Tool`` dicts (camelCase keys, as on the wire)."""
        connection = self._connect()
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = connection.call(connection.session.list_tools, params=params)
            tools.extend(t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools

    # -- Toolbox

    def execute(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolObservation:
        meta = {"tool_call_id": ctx.tool_call_id, "idempotency_key": ctx.idempotency_key}
        if ctx.execution_id:
            meta["execution_id"] = ctx.execution_id
        try:
            connection = self._connect()
        except Exception as error:  # nothing was sent
            self._drop()
            return _unreachable(name, error)
        try:
            result = connection.call(
                connection.session.call_tool,
                name,
                dict(arguments),
                read_timeout_seconds=self._timeout,
                meta=meta,
            )
        except Exception as error:
            # Sent, and no readable answer: dropped so that the next call starts afresh.
            self._drop()
            return _unanswered(name, error)
        if not isinstance(result, types.CallToolResult):
            return ToolObservation(
                ok=False, code="TOOL_ERROR", content=f"{name}: unexpected answer {result!r}"
            )
        return observation_of(result)

    def plan(self, name: str, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        return self.planner.plan(name, arguments) if self.planner is not None else {}

    def check_precondition(
        self, name: str, arguments: Mapping[str, Any], plan: Mapping[str, Any]
    ) -> PreconditionVerdict:
        if self.planner is None:
            # Nothing can prove a replay safe: the cautious verdict, as a tool without a check.
            return PreconditionVerdict("conflict", None, reason=f"no local check for {name!r}")
        return self.planner.check_precondition(name, arguments, plan)
