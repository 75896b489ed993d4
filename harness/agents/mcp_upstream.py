"""A team's real MCP server behind the relay (proxy mode), and a live server's tool list.

In proxy mode the relay (``harness.agents.mcp_relay``) stands between an agent and a real
MCP server: the agent's requests pass the same edges and tool-side faults as in served mode,
but the tool runs on the upstream server, and its effects are the server's own (counted
through the adapter's ``effects:``, e.g. files in the directory the server writes). This
module is that upstream end, and nothing else: a connection made with the official ``mcp``
client, the server's ``tools/list`` (every page) and ``tools/call``, each result as the
plain dict the relay hands to the life (``POST /mcp/end``).

Where the upstream is comes from the adapter YAML (``mcp: proxy: {command: [...], cwd:,
env:}`` or ``{url: ...}``) as an ``UpstreamSpec``; the harness fills its placeholders
(``{workspace}``, ``{here}``, ...) for the case (``UpstreamSpec.formatted``) and hands it
to the relay on its command line (``relay_args`` -> ``--upstream-command JSON`` or
``--upstream-url URL``, read back by ``from_relay_args``). A stdio upstream is a child of
the relay: when the relay is SIGKILLed (``tool_server_died``) the server's stdin closes
and a well-behaved server exits with it, as it does under any MCP client; the next relay
starts a new one.

``read_tools`` is ``crashmatrix import-mcp --server CMD`` / ``--url URL``: one connection,
the tool list, closed. Whatever stops it (the program does not start, is not an MCP
server, does not answer in time) is one ``InputError`` line naming the command and what to
do, with the last line the program wrote to stderr when it said why.

The ``mcp`` package is an extra (``crashmatrix[mcp]``): it is imported when a connection
is made, so the spec and its placeholders work without it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, TextIO, cast

from crashmatrix.harness.errors import InputError

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import RequestParamsMeta

__all__ = [
    "CONNECT_TIMEOUT",
    "Upstream",
    "UpstreamSpec",
    "connect",
    "read_tools",
]

# Seconds a server gets to start and answer the handshake and tools/list. npx resolving a
# package it has cached takes about a second; a cold download is not something to wait on.
CONNECT_TIMEOUT = 30.0
# What of a server's stderr and of a non-MCP stdout line an error quotes.
_QUOTE_CHARS = 200
_INSTALL = "pip install 'crashmatrix[mcp]'"


@dataclass(frozen=True, slots=True)
class UpstreamSpec:
    """Where the real MCP server is: a command the relay starts (stdio), or a URL
    (streamable HTTP). Exactly one of ``command`` and ``url``."""

    command: tuple[str, ...] = ()
    cwd: str = ""  # the stdio server's working directory ("": the relay's)
    env: Mapping[str, str] = field(default_factory=dict)  # added to the relay's environment
    url: str = ""

    def __post_init__(self) -> None:
        if bool(self.command) == bool(self.url):
            raise ValueError("an MCP upstream is a command or a URL, exactly one of them")

    @property
    def label(self) -> str:
        """The command line as a shell would take it, or the URL: how messages name it."""
        return shlex.join(self.command) if self.command else self.url

    def formatted(self, values: Mapping[str, str], *, here: str = "") -> UpstreamSpec:
        """The spec with ``{workspace}``-style placeholders filled, as ``command:`` and
        ``env:`` of an adapter are (``str.format``; ``{{`` is a literal brace); a relative
        ``cwd`` is taken in ``here`` (the adapter YAML's directory) when given."""
        cwd = self.cwd.format(**values)
        return UpstreamSpec(
            command=tuple(part.format(**values) for part in self.command),
            cwd=os.path.join(here, cwd) if cwd and here else cwd,
            env={key: value.format(**values) for key, value in self.env.items()},
            url=self.url.format(**values),
        )

    def relay_args(self) -> list[str]:
        """The relay's options naming this upstream (``from_relay_args`` reads them back)."""
        if self.url:
            return ["--upstream-url", self.url]
        body: dict[str, Any] = {"command": list(self.command)}
        if self.cwd:
            body["cwd"] = self.cwd
        if self.env:
            body["env"] = dict(self.env)
        return ["--upstream-command", json.dumps(body, separators=(",", ":"))]

    @classmethod
    def from_relay_args(cls, command_json: str | None, url: str | None) -> UpstreamSpec | None:
        """The relay's ``--upstream-command JSON`` / ``--upstream-url URL``; None for neither
        (served mode). ``JSON`` is ``{"command": [...], "cwd"?, "env"?}`` or the bare list."""
        if command_json is not None and url is not None:
            raise InputError("give --upstream-command or --upstream-url, not both")
        if url is not None:
            if not url.startswith(("http://", "https://")):
                raise InputError(
                    f"--upstream-url {url}: expected an http:// or https:// URL of an MCP endpoint"
                )
            return cls(url=url)
        if command_json is None:
            return None
        try:
            raw = json.loads(command_json)
        except ValueError as error:
            raise InputError(f"--upstream-command: not JSON ({error})") from error
        if isinstance(raw, list):
            raw = {"command": raw}
        command = raw.get("command") if isinstance(raw, dict) else None
        cwd = raw.get("cwd", "") if isinstance(raw, dict) else ""
        env = raw.get("env", {}) if isinstance(raw, dict) else {}
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(part, str) for part in command)
            or not isinstance(cwd, str)
            or not isinstance(env, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
        ):
            raise InputError(
                '--upstream-command: expected {"command": ["program", "arg", ...], "cwd": "...", '
                '"env": {"NAME": "value"}} (cwd and env optional) or the bare command list'
            )
        return cls(command=tuple(command), cwd=cwd, env=env)


class Upstream:
    """An open connection to the real server (from ``connect``)."""

    def __init__(self, spec: UpstreamSpec, client: Client) -> None:
        self.spec = spec
        self._client = client

    async def list_tools(self) -> list[dict[str, Any]]:
        """Every tool of the server (all pages of ``tools/list``), as MCP Tool dicts."""
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = await self._client.list_tools(cursor=cursor)
            tools.extend(
                tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in page.tools
            )
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], meta: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The server's ``CallToolResult`` for one call, as a dict. The agent's ``_meta``
        goes on as it came (a server may read a key or a call id from it). A JSON-RPC
        error (an unknown tool, arguments it refuses, a connection the server closed) is
        an ``isError`` result saying so: what the agent would learn from the server
        directly, in the one shape the relay's protocol carries."""
        from mcp import MCPError

        try:
            # RequestParamsMeta is a TypedDict open to any key: the agent's _meta as it came.
            sent = cast("RequestParamsMeta", dict(meta)) if meta else None
            result = await self._client.call_tool(name, dict(arguments), meta=sent)
        except MCPError as error:
            text = (
                f"the MCP server {self.spec.label} answered {name} with error {error.code}: {error.message}"
            )
            return {"content": [{"type": "text", "text": text}], "isError": True}
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)


@contextlib.asynccontextmanager
async def connect(
    spec: UpstreamSpec,
    *,
    timeout: float | None = CONNECT_TIMEOUT,
    errlog: IO[str] | None = None,
    tied: bool = True,
) -> AsyncIterator[Upstream]:
    """A connection to the server for the block: a stdio server started (and stopped at the
    end, as the ``mcp`` client does: stdin closed, then SIGTERM, then SIGKILL), or an HTTP
    endpoint reached. ``timeout`` bounds each request's wait for its answer (the handshake
    and ``tools/list``); ``None``: no bound, for a relay whose tool calls may take long.
    ``errlog``: where a stdio server's stderr goes (the relay's own by default). ``tied``: the
    stdio server dies with this process (``_tied``)."""
    import sys

    from mcp import Client, StdioServerParameters
    from mcp.client._transport import Transport
    from mcp.client.stdio import stdio_client

    if spec.url:
        target: Transport | str = spec.url
    else:
        command = _tied(spec) if tied else list(spec.command)
        params = StdioServerParameters(
            command=command[0],
            args=command[1:],
            # The relay's whole environment: a team's server reads its tokens from it as it
            # would under the agent (the SDK's default keeps only HOME, PATH and a few).
            env={**os.environ, **spec.env},
            cwd=spec.cwd or None,
        )
        target = stdio_client(params, errlog=cast(TextIO, errlog or sys.stderr))
    # cache=None: every tools/list reaches the server (the client caches by its TTL hints).
    async with Client(target, read_timeout_seconds=timeout, cache=None) as client:
        yield Upstream(spec, client)


# Run in a small interpreter before the server's own program replaces it (execvp): the kernel
# SIGKILLs the server when its parent, the relay, dies (PR_SET_PDEATHSIG survives exec). A
# server left to notice its closed stdin outlives a killed agent by a moment, long enough to be
# a process the agent left behind (no_effect_after_death) and to act on a case already judged.
_EXEC_TIED = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]): os._exit(1)\n"  # the relay died before the prctl
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def _tied(spec: UpstreamSpec) -> list[str]:
    """The stdio server's command line, run so that it dies with this process (Linux; as it
    is elsewhere). A program that cannot be run is refused here, as a spawn would refuse it."""
    import sys

    program = spec.command[0]
    if not sys.platform.startswith("linux"):
        return list(spec.command)
    path = {**os.environ, **spec.env}.get("PATH", os.defpath)
    cwd = spec.cwd or os.getcwd()
    found = shutil.which(program, path=path) if os.sep not in program else os.path.join(cwd, program)
    if found is None or not os.path.exists(found):
        raise FileNotFoundError(2, "No such file or directory", program)
    if not os.access(found, os.X_OK) or os.path.isdir(found):
        raise PermissionError(13, "Permission denied", program)
    return [sys.executable, "-I", "-S", "-c", _EXEC_TIED, str(os.getpid()), *spec.command]


# -- import-mcp --server / --url ----------------------------------------------------------


def live_tools(server: str | None, url: str | None) -> tuple[str, list[dict[str, Any]]]:
    """``import-mcp --server CMD`` / ``--url URL``: what the contracts say they came from
    (the command as given: no temporary path in a committed file) and the server's tools.
    ``{workspace}`` in ``CMD`` is an empty temporary directory, so the command line of an
    adapter's ``proxy:`` can be pasted as it is; it is removed afterwards."""
    if url is not None:
        spec = UpstreamSpec.from_relay_args(None, url)
        assert spec is not None
        return f"MCP server {url}", read_tools(spec)
    assert server is not None
    try:
        words = shlex.split(server)
    except ValueError as error:
        raise InputError(
            f"--server {server!r}: cannot split it as a shell would ({error}); check its quotes"
        ) from error
    if not words:
        raise InputError("--server: an empty command; give the command line that starts the MCP server")
    with tempfile.TemporaryDirectory(prefix="crashmatrix-import-mcp-") as workspace:
        try:
            spec = UpstreamSpec(command=tuple(words)).formatted({"workspace": workspace})
        except (KeyError, IndexError, ValueError) as error:
            raise InputError(
                f"--server {server!r}: {{{error.args[0] if error.args else ''}}} is no placeholder here "
                "({workspace} is the only one; write {{ and }} for literal braces)"
            ) from error
        return f"MCP server {server}", read_tools(spec)


def read_tools(spec: UpstreamSpec, *, timeout: float = CONNECT_TIMEOUT) -> list[dict[str, Any]]:
    """The tool list of a live server, for ``crashmatrix import-mcp``; every way it can fail
    is one ``InputError`` naming the command (or URL) and what to do."""
    try:
        import anyio
        import mcp  # noqa: F401  (the extra, checked before anything starts)
    except ImportError as error:
        raise InputError(
            f"{spec.label}: reading a live MCP server needs the mcp package ({_INSTALL})"
        ) from error

    async def read(errlog: IO[str]) -> list[dict[str, Any]]:
        # The handshake has no timeout of its own in every mode; one deadline covers all.
        with anyio.fail_after(timeout):
            # Not tied: this process stops the server itself, and a read that never started
            # one must name the program it could not start.
            async with connect(spec, timeout=timeout, errlog=errlog, tied=False) as upstream:
                return await upstream.list_tools()

    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog, _noise() as noise:
        try:
            return anyio.run(read, errlog)
        except BaseException as error:  # an ExceptionGroup from the client's task groups too
            if isinstance(error, (KeyboardInterrupt, SystemExit)):
                raise
            errlog.seek(0)
            raise InputError(_why(spec, error, errlog.read(), noise, timeout)) from error


class _Noise(logging.Handler):
    """The ``mcp`` client's log records while a server is read: its "Failed to parse
    JSONRPC message" (with a traceback) is how a program that is not MCP shows; kept to
    quote, not printed."""

    def __init__(self) -> None:
        super().__init__()
        self.not_json: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            errors = getattr(record.exc_info[1], "errors", None)
            if callable(errors):
                with contextlib.suppress(Exception):
                    value = errors()[0].get("input")
                    if isinstance(value, str):
                        self.not_json.append(value)


@contextlib.contextmanager
def _noise() -> Iterator[_Noise]:
    logger = logging.getLogger("mcp")
    handler = _Noise()
    saved = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.propagate = saved


def _leaves(error: BaseException) -> Sequence[BaseException]:
    """The exceptions inside (nested) exception groups, in order."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= _QUOTE_CHARS else text[:_QUOTE_CHARS] + "...")


def _why(spec: UpstreamSpec, error: BaseException, stderr: str, noise: _Noise, timeout: float) -> str:
    """One line: what stopped the read and what to do."""
    from mcp import MCPError

    where = f"MCP server {spec.label}"
    said = [line for line in stderr.splitlines() if line.strip()]
    tail = f"; its stderr ended: {_quote(said[-1])}" if said else ""
    leaves = _leaves(error)
    for leaf in leaves:
        if isinstance(leaf, FileNotFoundError) and spec.command:
            return (
                f"{where}: cannot start {spec.command[0]!r} (no such program); "
                'give the command that starts the server, e.g. --server "npx -y PACKAGE ARGS"'
            )
        if isinstance(leaf, PermissionError) and spec.command:
            return f"{where}: cannot start {spec.command[0]!r} (not executable); check the command"
        if isinstance(leaf, TimeoutError):
            return (
                f"{where}: no answer to the MCP handshake and tools/list in {timeout:g} s{tail}; "
                "is it an MCP server speaking on stdio (not one waiting for a browser or a port)?"
            )
    if noise.not_json:
        return (
            f"{where}: not an MCP server: it printed {_quote(noise.not_json[0])} on stdout, "
            f"not JSON-RPC{tail}; give the command that starts an MCP server on stdio"
        )
    for leaf in leaves:
        if isinstance(leaf, MCPError):
            if leaf.message == "Connection closed":
                return (
                    f"{where}: the program exited before answering the MCP handshake{tail}; "
                    "run the command by hand to see why"
                )
            return (
                f"{where}: answered the MCP handshake with error {leaf.code}: {leaf.message}{tail}; "
                "is it an MCP server?"
            )
    first = leaves[0]
    if spec.url:
        return (
            f"{where}: cannot read its tools ({type(first).__name__}: {first}); "
            "is the server running and is this its MCP endpoint (usually ending in /mcp)?"
        )
    return f"{where}: cannot read its tools ({type(first).__name__}: {first}){tail}"
