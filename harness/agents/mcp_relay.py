"""The MCP server an agent talks to: a separate process, a protocol translator only.

    python -m crashmatrix.harness.agents.mcp_relay --life URL [--http HOST:PORT | --http-fd FD]
        [--upstream-command JSON | --upstream-url URL]

(``crashmatrix mcp-serve`` is the same.) Built on the official ``mcp`` SDK's low-level
``Server``: stdio (the agent spawns it: its MCP client configuration gets ``{mcp_command}``)
or streamable HTTP (the life starts it before the agent and hands it a listening socket,
``--http-fd``, so that a relay killed by ``tool_server_died`` comes back on the same port with
no race for it; the agent gets ``{mcp_url}``). Every decision about a case -- which model tool
call a request is, crash edges, tool-side faults, counting -- is the life's, in the loopback
server's ``/mcp/*`` routes (``harness.agents.loopback``), reached at ``--life``. Per call::

    POST /mcp/begin    -> {call_id, fault}     the life attributes it, passes after_running
    (tool_result_error: answered isError at once; nothing runs)
    POST /mcp/execute  -> {result}             served: the mock tools run it in the world
                                               (proxy: the upstream server is called instead)
    POST /mcp/end      -> {action, result}     the life passes after_side_effect and acts:
                                               send (maybe malformed), drop, or kills this pid
    POST /mcp/sent                             once the response is written: after_side_effect
                                               for a stoppable agent (then not at /mcp/end)

A real process means "the MCP server died" is a real SIGKILL of it. The relay dies with its
parent (the agent that spawned it, or the life), and in a process group of its own, so that
stopping the agent's group never stops the relay that must write the agent its answer.

In a life the relay is started warm (``harness.agents.mcp_warm``): forked by a server that
imported the SDK once, ``{mcp_command}`` a stdlib launcher handing it the agent's pipes
(``harness.agents.mcp_launch``); ``serve`` is the relay proper in both. Started as above
(``crashmatrix mcp-serve``), it imports the SDK itself: 1-6 s.

The response is shaped on the wire, after the SDK produced it: the SDK validates what a
handler returns, so a malformed result and a dropped one are made where the JSON-RPC response
is written (stdio: the line to stdout; HTTP: the SSE event in the POST's response).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from io import TextIOWrapper
from pathlib import Path
from typing import Any, NoReturn, Protocol, cast

import anyio
import httpx

__all__ = [
    "ForkedRelay",
    "HttpRelay",
    "RelayForks",
    "ToolBackend",
    "at_exit",
    "kill_stdio_relay",
    "main",
    "parser",
    "relay_command",
    "sdk_problem",
    "serve",
    "warm_up",
]


# The warm relay server as HttpRelay uses it (``harness.agents.mcp_warm.WarmRelays`` and its
# ``RelayHandle``): a protocol here, so that the relay does not import the server that imports it.
class ForkedRelay(Protocol):
    pid: int

    def wait(self) -> int | None: ...

    def close(self) -> None: ...


class RelayForks(Protocol):
    def start(self, relay_args: Sequence[str], *, listening: int, stderr: int) -> ForkedRelay: ...


# Seconds a call to the life may take: the life may hold it at an edge while it decides, and a
# stopped agent makes nothing faster. A dead life refuses the connection at once.
LIFE_TIMEOUT = 120.0


class ToolBackend(Protocol):
    """Where the relay's tools are: the life's mock tools (served), or a real MCP server
    (proxy: ``harness.agents.mcp_upstream``). Results are ``CallToolResult`` dicts."""

    async def list_tools(self) -> list[dict[str, Any]]: ...

    async def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any], call_id: str
    ) -> dict[str, Any]: ...


def relay_command(life_url: str, *, python: str = sys.executable) -> list[str]:
    """The stdio relay's command line for a life at ``life_url`` (``{mcp_command}``)."""
    return [python, "-m", "crashmatrix.harness.agents.mcp_relay", "--life", life_url]


class HttpRelay:
    """The life's streamable HTTP relay (``mcp: {transport: http}``): started before the
    agent, killed by ``tool_server_died`` and started again on the same port.

    The life binds the port and keeps it: each relay serves the listening socket it is given,
    so the port is listening from the start (an agent connecting before the relay is up waits
    in the backlog, never refused), and a restart cannot lose the port to another process.
    With ``warm`` (the life's ``harness.agents.mcp_warm`` server) each relay is forked there,
    the socket handed over; without, each is a new process (``--http-fd``), started from one
    thread of its own, which lives as long as the life: a relay dies with the thread that
    started it (``die_with_parent``), and a request thread of the loopback server ends with
    its request."""

    def __init__(
        self,
        life_url: str,
        stderr: Path,
        trace: Callable[[Mapping[str, Any]], None],
        *,
        upstream: Sequence[str] = (),
        warm: RelayForks | None = None,
    ) -> None:
        self._life_url = life_url
        self._upstream = tuple(upstream)  # proxy mode: --upstream-command/--upstream-url
        self._stderr = stderr
        self._trace = trace
        self._warm = warm
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.set_inheritable(True)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/mcp"
        self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-relay")
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | ForkedRelay | None = None

    @property
    def pid(self) -> int | None:
        """The running relay's pid (None before the start and after the close)."""
        with self._lock:
            return None if self._process is None else self._process.pid

    def start(self) -> None:
        process = self._forked() if self._warm is not None else self._starter.submit(self._spawn).result()
        with self._lock:
            self._process = process
        self._trace({"event": "mcp_relay", "pid": process.pid, "url": self.url})

    def _forked(self) -> ForkedRelay:
        assert self._warm is not None
        with open(self._stderr, "ab") as stderr:
            return self._warm.start(
                ["--life", self._life_url, *self._upstream],
                listening=self._sock.fileno(),
                stderr=stderr.fileno(),
            )

    def _spawn(self) -> subprocess.Popen[bytes]:
        fd = self._sock.fileno()
        with open(self._stderr, "ab") as stderr:
            return subprocess.Popen(
                [*relay_command(self._life_url), "--http-fd", str(fd), *self._upstream],
                pass_fds=(fd,),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
            )

    def kill(self, pid: int) -> None:
        """SIGKILL relay ``pid`` (the tool server died) and start a new one on the port."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with self._lock:
            process = self._process
        if process is not None and process.pid == pid:
            process.wait()  # gone: no longer accepting on the port
            if not isinstance(process, subprocess.Popen):
                process.close()
            self.start()

    def close(self) -> None:
        with self._lock:
            process, self._process = self._process, None
        if isinstance(process, subprocess.Popen):
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()
        elif process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            process.wait()
            process.close()
        self._starter.shutdown(wait=True)
        self._sock.close()


def kill_stdio_relay(pid: int) -> None:
    """``tool_server_died`` for a relay the agent spawned: its pipes close under the agent."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@functools.cache
def _tls() -> ssl.SSLContext:
    """httpx's default context, made once: loading the CA bundle took 90 ms of every relay's
    start, and a warm relay inherits the one its server made (``warm_up``)."""
    return httpx.create_ssl_context()


def warm_up() -> None:
    """What a relay would otherwise do first at each start, done once by the warm server
    before it forks relays (``harness.agents.mcp_warm``): httpx's transport imports httpcore
    on first use, the SSL context, anyio's asyncio backend."""
    import anyio._backends._asyncio  # noqa: F401
    import httpcore  # noqa: F401

    _tls()


class _Life:
    """The life's ``/mcp/*`` routes. A life that is gone ends the relay: its case is over."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.pid = os.getpid()
        self._client = httpx.AsyncClient(timeout=LIFE_TIMEOUT, verify=_tls())

    async def get(self, step: str) -> dict[str, Any]:
        return await self._ask(self._client.get(f"{self.url}/mcp/{step}"))

    async def post(self, step: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self._ask(self._client.post(f"{self.url}/mcp/{step}", json={"pid": self.pid, **body}))

    async def _ask(self, sending: Awaitable[httpx.Response]) -> dict[str, Any]:
        try:
            response = await sending
            response.raise_for_status()
            return cast(dict[str, Any], response.json())
        except httpx.TransportError:
            # The life died (a crash point killed it) or it dropped this request on purpose
            # (it killed this relay as it answered): nothing is left to serve.
            _exit(0)


class _Served:
    """``ToolBackend`` of the life's mock tools."""

    def __init__(self, life: _Life) -> None:
        self._life = life

    async def list_tools(self) -> list[dict[str, Any]]:
        return list((await self._life.get("tools"))["tools"])

    async def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any], call_id: str
    ) -> dict[str, Any]:
        body = {"call_id": call_id, "name": name, "arguments": arguments, "meta": meta}
        return dict((await self._life.post("execute", body))["result"])


@dataclass(frozen=True, slots=True)
class _Mark:
    """What to do when the response to one JSON-RPC request is written."""

    call_id: str
    action: str  # "send" | "drop"
    result: dict[str, Any] | None = None  # the result to write instead of the SDK's (malformed)


class _Wire:
    """The responses being written: each tools/call response is replaced (a malformed result),
    withheld (drop) or written and then reported sent."""

    def __init__(self, life: _Life) -> None:
        self.life = life
        self.marks: MutableMapping[Any, _Mark] = {}

    def shape(self, text: str) -> tuple[str | None, _Mark | None]:
        """``text`` (one JSON-RPC message) as it goes out (None: dropped), and its mark."""
        try:
            message = json.loads(text)
        except ValueError:
            return text, None
        if not isinstance(message, dict) or "result" not in message:
            return text, None
        mark = self.marks.pop(message.get("id"), None)
        if mark is None:
            return text, None
        if mark.action == "drop":
            return None, mark
        if mark.result is not None:
            message = {**message, "result": mark.result}
            text = json.dumps(message, ensure_ascii=False)
        return text, mark

    async def written(self, mark: _Mark | None) -> None:
        if mark is not None and mark.action == "send":
            # Shielded: an HTTP response's task is cancelled once its stream ends, and the
            # life must hear the whole request (it passes an edge on it).
            with anyio.CancelScope(shield=True):
                await self.life.post("sent", {"call_id": mark.call_id})


def _plain_meta(meta: Any) -> dict[str, Any]:
    """A request's ``_meta`` as a plain dict (a mapping in SDK 2.x, a model in 1.x)."""
    if meta is None:
        return {}
    if hasattr(meta, "model_dump"):
        return dict(meta.model_dump(by_alias=True, mode="json", exclude_none=True))
    plain: dict[str, Any] = json.loads(json.dumps(dict(meta), default=str))
    return plain


def _model(model: Any, data: dict[str, Any]) -> Any:
    """``data`` as the SDK's result model: the SDK completes it for the client's protocol era
    (a 2026 client requires ``resultType`` and the cache fields a bare dict lacks). What the
    model cannot hold (an upstream's odd result) goes as the dict it is."""
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError:
        return data


def _server(backend: ToolBackend, life: _Life, wire: _Wire) -> Any:
    from mcp import types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> Any:
        return _model(types.ListToolsResult, {"tools": await backend.list_tools()})

    async def call_tool(ctx: Any, params: Any) -> Any:
        from crashmatrix.harness.agents.mcp_tools import error_result

        name = str(params.name)
        arguments = dict(params.arguments or {})
        meta = _plain_meta(params.meta)
        begun = await life.post("begin", {"name": name, "arguments": arguments, "meta": meta})
        call_id, fault = str(begun["call_id"]), begun.get("fault")
        if fault == "tool_result_error":
            return _model(types.CallToolResult, error_result(name))
        result = await backend.call_tool(name, arguments, meta, call_id)
        end = await life.post("end", {"call_id": call_id, "name": name, "result": result})
        action = str(end.get("action") or "send")
        sent = end.get("result") if isinstance(end.get("result"), dict) else result
        # The SDK validates what is returned: the life's answer is written on the wire
        # (malformed or not), the valid result only gets it there.
        wire.marks[ctx.request_id] = _Mark(call_id, action, sent if sent != result else None)
        return _model(types.CallToolResult, result)

    return Server("crashmatrix", on_list_tools=list_tools, on_call_tool=call_tool)


class _WatchedStdout:
    """The relay's stdout as the SDK's stdio transport writes it: one JSON-RPC message a
    line, shaped by the wire, and reported sent once flushed into the agent's pipe."""

    def __init__(self, wire: _Wire) -> None:
        self._wire = wire
        self._out = anyio.wrap_file(TextIOWrapper(os.fdopen(os.dup(1), "wb"), encoding="utf-8"))
        self._pending: list[_Mark] = []

    async def write(self, text: str) -> int:
        line = text.rstrip("\n")
        shaped, mark = self._wire.shape(line)
        if mark is not None:
            self._pending.append(mark)
        if shaped is None:
            # A pipe does not lose one message: a dropped response is one never written, and
            # the agent waits for it until its own timeout.
            return len(text)
        return await self._out.write(shaped + "\n")

    async def flush(self) -> None:
        await self._out.flush()
        pending, self._pending = self._pending, []
        for mark in pending:
            await self._wire.written(mark)


async def _serve_stdio(server: Any, wire: _Wire) -> None:
    from mcp.server.stdio import stdio_server

    stdin = anyio.wrap_file(TextIOWrapper(os.fdopen(os.dup(0), "rb"), encoding="utf-8", errors="replace"))
    stdout = _WatchedStdout(wire)
    # Nothing else may write on the wire: a stray print goes to stderr.
    os.dup2(2, 1)
    async with stdio_server(stdin=stdin, stdout=cast(Any, stdout)) as (read, write):
        await server.run(read, write, server.create_initialization_options())


def _http_app(server: Any, wire: _Wire) -> Callable[..., Awaitable[None]]:
    """The streamable HTTP app, with the wire shaping the SSE events of tools/call responses
    (a drop: the response started, then the connection closed under it)."""
    app = server.streamable_http_app()

    async def shaped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        written: list[_Mark] = []

        async def shaping_send(message: dict[str, Any]) -> None:
            if message.get("type") == "http.response.body" and message.get("body"):
                body, marks = _shape_events(wire, bytes(message["body"]))
                if any(mark.action == "drop" for mark in marks):
                    raise _Dropped
                written.extend(marks)
                message = {**message, "body": body}
            await send(message)
            for mark in written:
                await wire.written(mark)
            written.clear()

        with contextlib.suppress(_Dropped):
            await app(scope, receive, shaping_send)

    return shaped


class _Dropped(Exception):
    """A response the life said to drop: the connection is closed instead of finishing it."""


def _shape_events(wire: _Wire, body: bytes) -> tuple[bytes, list[_Mark]]:
    """One chunk of a response: SSE events (``data: {...}`` lines) or a JSON body."""
    text = body.decode("utf-8", "replace")
    marks: list[_Mark] = []
    if not text.lstrip().startswith(("event:", "data:", "id:", "retry:", ":")):
        shaped, mark = wire.shape(text)
        if mark is not None:
            marks.append(mark)
        return (shaped or "").encode("utf-8"), marks
    lines = []
    for line in text.split("\n"):
        if line.startswith("data:"):
            shaped, mark = wire.shape(line.removeprefix("data:").strip())
            if mark is not None:
                marks.append(mark)
            line = f"data: {shaped}" if shaped is not None else line
        lines.append(line)
    return "\n".join(lines).encode("utf-8"), marks


async def _serve_http(server: Any, wire: _Wire, sock: socket.socket) -> None:
    import uvicorn

    config = uvicorn.Config(_http_app(server, wire), log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def _listening(http: str | None, fd: int | None) -> socket.socket | None:
    if fd is not None:
        return socket.socket(fileno=fd)
    if http is None:
        return None
    host, _, port = http.rpartition(":")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]") or "127.0.0.1", int(port)))
    sock.listen(64)
    return sock


class _Proxied:
    """``ToolBackend`` of a real MCP server (proxy mode, ``harness.agents.mcp_upstream``)."""

    def __init__(self, upstream: Any) -> None:
        self._upstream = upstream

    async def list_tools(self) -> list[dict[str, Any]]:
        return list(await self._upstream.list_tools())

    async def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any], call_id: str
    ) -> dict[str, Any]:
        return dict(await self._upstream.call_tool(name, arguments, meta))


def _upstream(args: argparse.Namespace) -> AbstractAsyncContextManager[Any] | None:
    if args.upstream_command is None and args.upstream_url is None:
        return None
    # Proxy mode's module (issue 28, M3), imported only when asked for.
    from crashmatrix.harness.agents.mcp_upstream import UpstreamSpec, connect

    spec = UpstreamSpec.from_relay_args(args.upstream_command, args.upstream_url)
    # No timeout: a tool call may take as long as the real tool takes.
    return None if spec is None else connect(spec, timeout=None)


async def _run(args: argparse.Namespace, sock: socket.socket | None) -> None:
    life = _Life(args.life)
    wire = _Wire(life)
    upstream = _upstream(args)
    async with contextlib.AsyncExitStack() as stack:
        backend: ToolBackend = (
            _Served(life) if upstream is None else _Proxied(await stack.enter_async_context(upstream))
        )
        if upstream is not None:
            await life.post("tools", {"tools": await backend.list_tools()})
        server = _server(backend, life, wire)
        if sock is None:
            await _serve_stdio(server, wire)
        else:
            await _serve_http(server, wire, sock)


def parser() -> argparse.ArgumentParser:
    """The relay's options (``crashmatrix mcp-serve``, and a warm relay's request)."""
    parser = argparse.ArgumentParser(
        prog="crashmatrix mcp-serve",
        description="Serve a crashmatrix case's tools over MCP (stdio, or streamable HTTP with --http).",
    )
    parser.add_argument(
        "--life", required=True, help="the life's loopback server, e.g. http://127.0.0.1:PORT"
    )
    parser.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP at http://HOST:PORT/mcp")
    parser.add_argument(
        "--http-fd", type=int, metavar="FD", help="serve streamable HTTP on this listening socket"
    )
    upstream = parser.add_mutually_exclusive_group()
    upstream.add_argument("--upstream-command", metavar="JSON", help="proxy: the real server's argv, as JSON")
    upstream.add_argument(
        "--upstream-url", metavar="URL", help="proxy: the real server's streamable HTTP URL"
    )
    return parser


def sdk_problem() -> str:
    """Why the installed ``mcp`` SDK cannot serve ("" when it can): the extra is missing, or
    a 1.x SDK (its low-level Server registers handlers by decorators, not ``on_*=``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        installed = version("mcp")
    except PackageNotFoundError:
        return "the MCP server needs the mcp package: pip install 'crashmatrix[mcp]'"
    major = installed.split(".")[0]
    if not major.isdigit() or int(major) != 2:
        return f"mcp {installed} is installed; the MCP server needs mcp>=2.0.0,<3 (crashmatrix[mcp])"
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    problem = sdk_problem()
    if problem:
        print(f"crashmatrix mcp-serve: {problem}", file=sys.stderr)
        return 2
    from crashmatrix.harness.lives.parent_death import die_with_parent

    # Its own group: the life stops the agent's group while a response waits unread, and
    # this process must still write it. It dies with whoever started it.
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    die_with_parent(os.getppid())
    serve(args, _listening(args.http, args.http_fd))


def serve(args: argparse.Namespace, sock: socket.socket | None) -> NoReturn:
    """Serve until the client closes the session (stdio) or the relay is killed, then exit
    this process: over stdio, or streamable HTTP on the listening ``sock``."""
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(_run, args, sock)
    _exit(0)


_AT_EXIT: list[Callable[[int], None]] = []


def at_exit(hook: Callable[[int], None]) -> None:
    """Run ``hook(status)`` as the relay exits on its own (a warm relay tells its launcher)."""
    _AT_EXIT.append(hook)


def _exit(status: int) -> NoReturn:
    # The client closed the session (or the life is gone): nothing is left to write or keep.
    # Tearing the interpreter down (the SDK's modules, the threads it started) took ~1.5 s,
    # which every agent's MCP client waits out when it closes (measured:
    # benchmarks/mcp_relay.py's exit line).
    for hook in _AT_EXIT:
        hook(status)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
