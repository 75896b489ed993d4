"""The scripted model, the mock tools and the harness's HTTP services on 127.0.0.1, for agents
that are not Python objects the harness can hand an ``httpx.Client`` to.

One ``ThreadingHTTPServer`` bound to port 0 (the kernel picks a free port) serves::

    POST /v1/chat/completions   OpenAI chat completions (no streaming), answered by the
                                same ``ScriptedModel`` as in-process agents, request log included
    POST /tools/<name>          JSON arguments -> ToolObservation JSON, through ``MockToolbox``;
                                headers X-Tool-Call-Id (required), X-Execution-Id,
                                Idempotency-Key carry seed 000's three identities
    GET|POST /orders[...]       the ``"orders"`` service (``mock_tools.order_api.OrderAPI``);
                                ``orders_url`` is the base: ``POST {orders_url}/orders``
    GET|POST /emails[...]       the ``"mail"`` service (``mock_tools.mail_api.MailAPI``);
                                ``mail_url`` is the base: ``POST {mail_url}/emails``
    GET|POST /mcp/<step>        the MCP relay's calls (``harness.agents.mcp_relay``), with
                                ``mcp``: tools, begin, execute, end, sent (below)

Both service base URLs are ``http://127.0.0.1:<port>``, the server's own: the services speak
their real HTTP API (Idempotency-Key, ``Idempotent-Replayed``, 409/422, lookups by key),
with the world's counting. A service request is forwarded as an ``httpx.Request`` (method,
headers, query string, body) to the service's ``handle`` and its response written back.
A fault the service raises is a broken connection, as on a real network: on
``httpx.ConnectTimeout`` (``timeout_before``: nothing committed) or any other
``httpx.TransportError`` (``response_lost``'s ``ReadTimeout``: committed, answer lost) the
server closes the connection without writing a response. Retrying is the agent's business.

Crash points are the edges the server sees. ``on_edge(boundary, tool_call_id)`` is called
(and may never return: it is the life's hook)

* ``after_running``         a tool request, or a side-effecting (non-GET) service request,
                            arrived; nothing was executed yet
* ``after_side_effect``     the tool or service ran (what it did is committed); the response
                            is not sent (for a lost response: the connection is not closed yet)
* ``after_model_reply``     the model's reply with tool calls was sent (named by its first
                            call); the agent has not read it, so nothing of it is saved

A service request carries no tool_call_id, so the server attributes it. It remembers the
tool calls the model handed out (id and function name, from its replies) and the ones the
agent answered (``role: tool`` messages in later chat requests). A request for tool T
(``X-Tool-Name``, else ``service_tools``: orders -> ``create_order``, mail -> ``send_email``)
belongs to its ``X-Tool-Call-Id`` header if it has one; else to the OLDEST call of T handed
out and not answered; else to the LATEST call of T; with no call of T at all the request
passes no edge. The service is told the id and tool (``X-Tool-Call-Id`` / ``X-Tool-Name``
added when absent), so its events and faults carry them. A lookup (GET) is forwarded as it
came: no edges, and no tool name, so it never consumes a fault armed for the sending tool.

Every edge of a stoppable agent is passed with the agent stopped (``freeze``: the owner
stops its process group and resumes it after the hook returned). A hook that kills does so by
ending the life, and a dying process closes its sockets before the kernel sends its children
their parent-death SIGKILL: an agent left running sees its request's connection close in that
window and may write "uncertain" to its session before it dies. That is a tool failure it
survived, not the crash the case names, and its line can hide a bug (an ``after_running`` whose
``started`` line lands after the death made an effect look ledgered first). The
``after_model_reply`` edge is passed after the reply is written, still stopped: a reply that
reached the agent's socket but was never read is what "the process died right after the model
answered" means. An agent that cannot be stopped apart from the server (``stoppable=False``: a
kind-2 agent, in the server's own process) dies with it at once; it reaches the model edge just
before the reply is written, so it is in the same state, the reply asked for and not read.

An MCP call reaches the server as the relay's requests (docs/MCP: the relay is a protocol
translator, every decision is made here). ``/mcp/begin`` attributes it to a model tool call as
a service request is (``_meta.tool_call_id`` first), writes the ``mcp_call`` trace event, asks
``mcp.take_fault`` which tool-side fault acts on it and passes ``after_running``;
``/mcp/execute`` runs the mock tool; ``/mcp/end`` acts on the fault (kill the relay and never
answer, drop the response, malform it). The call's ``after_side_effect`` is ONE edge: for an
agent in this process (``stoppable=False``) at ``/mcp/end``, before the response is written;
for a stoppable agent the server stops it at ``/mcp/end`` and passes the edge at ``/mcp/sent``
(the response is in the agent's pipe or socket, unread), then resumes it. Both moments are the
same state for the agent -- the effect done, nothing of its answer read -- which is why the
response written is not ``before_tool_result`` (a terminal ledger line is durable there): the
later moment is taken where it can be, so a proxied server has finished the call. A call the
fault leaves without a response passes the edge at ``/mcp/end``.

``before_tool()`` runs before every tool and service request (the owner syncs the agent's
session copy, so the world's events measure ``session_bytes``), and ``on_request(route)``
at the arrival of every request, before anything else (even reading its body): ``"chat"``,
``"tool:<name>"``, ``"orders"``, ``"mail"`` (whether or not that route is served here), or
``"other"``. Both are called on the server's request threads, one per connection.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import MappingProxyType
from typing import Any, Protocol

import httpx

from crashmatrix.harness.core.boundaries import BoundaryHook
from crashmatrix.harness.core.ledger import arguments_sha256
from crashmatrix.harness.core.tools import ToolContext, ToolObservation, no_step
from crashmatrix.harness.errors import InputError
from crashmatrix.harness.lives.threads import GATE, active, quiet
from crashmatrix.mock_tools.calls import ToolSide
from crashmatrix.mock_tools.model import ScriptedModel

__all__ = ["EDGES", "MOUNTS", "SERVICE_TOOLS", "LoopbackServer", "McpLife", "ServiceHandler", "ToolRunner"]

EDGES = ("after_model_reply", "after_running", "after_side_effect")
# Service name -> the path it answers under (the paths OrderAPI and MailAPI serve).
MOUNTS: Mapping[str, str] = MappingProxyType({"orders": "/orders", "mail": "/emails"})
# Service name -> the tool a side-effecting request to it stands for, by default.
SERVICE_TOOLS: Mapping[str, str] = MappingProxyType({"orders": "create_order", "mail": "send_email"})
# Service name -> the lookup tool a GET to it stands for (the contract's reconcile.lookup_tool).
SERVICE_LOOKUPS: Mapping[str, str] = MappingProxyType({"orders": "get_order_by_idempotency_key"})
# What each tool-side fault does to a tools or services request (the trace's ``fault`` detail).
WIRE_FAULTS: Mapping[str, str] = MappingProxyType(
    {
        "tool_server_died": "the effect committed, then the connection was closed without a response "
        "(the service restarting mid-call)",
        "tool_response_lost": "the effect committed, then the response was cut off after its headers",
        "tool_result_error": "answered 503 Service Unavailable before anything ran",
        "tool_result_malformed": "the effect committed, then the body came back cut in half (not JSON)",
    }
)
# An agent has no business sending more than this in one request; refusing bigger bodies
# keeps a misbehaving agent from making the harness buffer without bound.
MAX_BODY = 1 << 20
# Seconds a connection may sit idle mid-request before the handler gives up on it.
SOCKET_TIMEOUT = 30.0
# Requests that change nothing: they pass no edge and are not attributed to a tool call.
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Headers of a service's response that describe its framing, not its content: the server
# frames the body it writes itself (``httpx.Response.read`` has already decoded it).
_FRAMING_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "content-encoding"})
_NO_SERVICES: Mapping[str, ServiceHandler] = MappingProxyType({})
# Seconds an agent stopped before its MCP response is written stays stopped if the relay
# never says it wrote it (a relay that died there): longer than any healthy relay takes.
SENT_TIMEOUT = 30.0


class ToolRunner(Protocol):
    """What the tools route needs from ``mock_tools.toolbox.MockToolbox``."""

    def execute(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolObservation: ...


class ServiceHandler(Protocol):
    """A service the server mounts: ``mock_tools.order_api.OrderAPI``, ``mock_tools.mail_api.MailAPI``."""

    def handle(self, request: httpx.Request) -> httpx.Response: ...


@dataclass(frozen=True, slots=True)
class McpLife:
    """What the ``/mcp/*`` routes need from the life (``harness.agents.foreign``).

    ``tools``: the MCP Tool dicts served (``mcp_tools.mcp_tools``); ``keyed``: the tools whose
    served schema added ``idempotency_key``; ``take_fault(call_id)``: the tool-side fault
    acting on that call, once (``tool_faults.take``); ``trace``: the life's trace;
    ``kill_relay(pid)``: SIGKILL the relay (and start an HTTP relay again on its port);
    ``attempt(call_id)``: the (execution id, idempotency key) the agent's ledger gives the
    call's running attempt, if it keeps one (the effect is then attributed to that attempt);
    ``step(call_id)``: the hook between the steps of a multi-step effect, for an agent in the
    life's own process (``during_side_effect``), None for a separate one."""

    tools: Sequence[Mapping[str, Any]]
    keyed: frozenset[str]
    take_fault: Callable[[str], str | None]
    trace: Callable[[Mapping[str, Any]], None]
    kill_relay: Callable[[int], None]
    attempt: Callable[[str], tuple[str, str] | None] = lambda call_id: None
    step: Callable[[str], None] | None = None


def _no_freeze() -> AbstractContextManager[None]:
    return contextlib.nullcontext()


class _Freezer:
    """The owner's ``freeze``, shared by the server's threads: the agent is stopped at the
    first freeze and resumed at the last one's end. Two request threads (or a response held
    until ``/mcp/sent``) can overlap; one resuming the agent while another's hook is about to
    kill it would let the agent act in the window the freeze closes."""

    def __init__(self, freeze: Callable[[], AbstractContextManager[None]]) -> None:
        self._freeze = freeze
        self._lock = threading.Lock()
        self._depth = 0
        self._held: AbstractContextManager[None] | None = None

    def enter(self) -> None:
        with self._lock:
            if self._depth == 0:
                held = self._freeze()
                held.__enter__()
                self._held = held
            self._depth += 1

    def exit(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0 and self._held is not None:
                held, self._held = self._held, None
                held.__exit__(None, None, None)

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        self.enter()
        try:
            yield
        finally:
            self.exit()


def _no_request(route: str) -> None:
    """The default ``on_request``: nobody is watching."""


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int
    body: dict[str, Any]
    # A tool-side fault that breaks this reply on the wire after the effect (``_Handler._write``).
    fault: str | None = None


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = SOCKET_TIMEOUT
    protocol_version = "HTTP/1.1"
    # A reply is written as headers, then body: with Nagle's algorithm the body waited for the
    # client's delayed ACK of the headers, 40 ms a request on a kept-alive connection
    # (measured: benchmarks/mcp_relay.py, a plain tool request 45 ms -> 3 ms, an MCP call
    # 108 -> 12 ms: it makes four).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Silence: the request log and the trace say what happened, not stderr."""

    def handle_one_request(self) -> None:
        # The thread is quiet (_Server.process_request_thread) but while it answers: waiting
        # for a request, a snapshot need not leave its point to a killed life for it, and a
        # request wakes it under the gate, so none is answered while a copy is made
        # (harness.lives.threads).
        try:
            self.rfile.peek(1)  # type: ignore[attr-defined]  # a BufferedReader (rbufsize -1)
        except TimeoutError:
            self.close_connection = True  # as the base class does when the request line times out
            return
        with active():
            super().handle_one_request()

    def _send(self, reply: _Reply) -> None:
        data = json.dumps(reply.body, ensure_ascii=False).encode("utf-8")
        self._write(reply.status, [("Content-Type", "application/json")], data, reply.fault)

    def _send_response(self, response: httpx.Response, fault: str | None = None) -> None:
        """A service's answer, as it gave it (status, its headers, its body bytes)."""
        data = response.read()
        headers = [(n, v) for n, v in response.headers.multi_items() if n.lower() not in _FRAMING_HEADERS]
        self._write(response.status_code, headers, data, fault)

    def _write(self, status: int, headers: Sequence[tuple[str, str]], data: bytes, fault: str | None) -> None:
        """One response; ``fault``, a tool-side kind acting after the effect, breaks it on the
        wire as the real failure would (``harness.core.tool_side``): ``tool_server_died``
        closes the connection without a byte (the client: "server disconnected without
        sending a response"), ``tool_response_lost`` sends the headers and half the body, then
        closes (an incomplete read), ``tool_result_malformed`` sends a body cut in half under
        its own length (a 2xx whose JSON does not parse)."""
        if fault == "tool_server_died":
            self._drop()
            return
        if fault == "tool_result_malformed":
            data = data[: max(1, len(data) // 2)]
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if fault == "tool_response_lost":
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(data)
        self.wfile.flush()

    def _drop(self) -> None:
        """Answer nothing: the client sees the connection closed without a response."""
        self.close_connection = True

    def _body(self) -> bytes | None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            self._send(_Reply(413, _error(f"request body over {MAX_BODY} bytes")))
            return None
        return self.rfile.read(length)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        app = self.server.app
        path = self.path.split("?", 1)[0]
        route = _route_of(path)
        body: bytes | None = None
        try:
            app.on_request(route)
            body = self._body()
            if body is None:
                return
            if route == "chat" and method == "POST":
                app.chat(self, body)
            elif route.startswith("tool:") and method == "POST" and app.tools is not None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                self._send(app.tool(route.removeprefix("tool:"), headers, body))
            elif route in app.services:
                app.service(self, route, method, body)
            elif route.startswith("mcp:") and app.mcp is not None:
                reply = app.mcp_route(route.removeprefix("mcp:"), method, body)
                if reply is None:
                    self._drop()
                else:
                    self._send(reply)
            else:
                self._send(_Reply(404, _error(f"no route {method} {path}; see harness/agents/loopback.py")))
        except Exception as error:  # a harness bug must reach the agent as a 500, not a hang
            app.errors.append(f"{path}: {type(error).__name__}: {error}")
            if body is None:
                self.close_connection = True  # its body is still unread: the stream is lost
            self._send(_Reply(500, _error(f"crashmatrix loopback error: {error}")))


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a handler stuck on a dead agent must not keep the life alive
    request_queue_size = 16
    app: LoopbackServer

    def process_request(self, request: Any, client_address: Any) -> None:
        # A handler thread starts only under the snapshots' gate (harness.lives.threads): one
        # never starts while a snapshot is being copied.
        with GATE:
            super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        # A connection's thread is quiet but while it answers a request (_Handler).
        with quiet():
            super().process_request_thread(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client gone mid-connection (an MCP relay killed or exiting, an agent killed
        between two requests of a kept-alive connection) is no error of the server's: no
        traceback in the life's stderr for it."""
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "crashmatrix"}}


def _json(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


def _route_of(path: str) -> str:
    """The short name ``on_request`` is told: the route the path names (served or not)."""
    if path.endswith("/chat/completions"):
        return "chat"
    if path.startswith("/tools/"):
        return f"tool:{path.removeprefix('/tools/')}"
    if path.startswith("/mcp/"):
        return f"mcp:{path.removeprefix('/mcp/')}"
    for name, mount in MOUNTS.items():
        if path == mount or path.startswith(f"{mount}/"):
            return name
    return "other"


@dataclass(frozen=True, slots=True)
class _HandedOut:
    """One tool call the model handed out (an id may come again in a later turn: models
    reuse ``call_0``; each time is a call of its own)."""

    call_id: str
    tool: str


class _ToolCalls:
    """The tool calls the model handed out and the ones the agent answered, as this server
    saw them (one life's worth: a restarted agent meets a new server)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handed_out: list[_HandedOut] = []
        self._answered: set[int] = set()  # indexes into _handed_out

    def saw_request(self, body: Any) -> None:
        """A chat request: a ``role: tool`` message answers the call whose id it names, if
        it comes after the last assistant message that handed that id out."""
        messages = body.get("messages") if isinstance(body, dict) else None
        answered: set[str] = set()
        for message in messages if isinstance(messages, list) else ():
            if not isinstance(message, dict):
                continue
            if message.get("role") == "assistant":
                calls = message.get("tool_calls")
                for call in calls if isinstance(calls, list) else ():
                    if isinstance(call, dict):
                        answered.discard(str(call.get("id")))
            elif message.get("role") == "tool" and message.get("tool_call_id"):
                answered.add(str(message["tool_call_id"]))
        with self._lock:
            self._answered |= {i for i, call in enumerate(self._handed_out) if call.call_id in answered}

    def saw_reply(self, completion: Mapping[str, Any]) -> None:
        """A chat reply: its tool calls are handed out."""
        calls = [
            _HandedOut(str(call.get("id")), str((call.get("function") or {}).get("name")))
            for choice in completion.get("choices") or ()
            for call in (choice.get("message") or {}).get("tool_calls") or ()
        ]
        with self._lock:
            self._handed_out.extend(calls)

    def saw_conversation(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """What a previous life already did: its tool calls, and the ones it answered (a
        restarted agent retries a request for a call this server never handed out)."""
        with self._lock:
            for message in messages:
                if message.get("role") == "assistant":
                    for call in message.get("tool_calls") or ():
                        if isinstance(call, Mapping):
                            name = str((call.get("function") or {}).get("name"))
                            self._handed_out.append(_HandedOut(str(call.get("id")), name))
                elif message.get("role") == "tool":
                    latest = [
                        i
                        for i, call in enumerate(self._handed_out)
                        if call.call_id == str(message.get("tool_call_id"))
                    ]
                    if latest:
                        self._answered.add(latest[-1])

    def attribute(self, tool: str) -> str | None:
        """The call a request for ``tool`` belongs to: the oldest one not answered yet (the
        agent is executing it), else the latest (a retry after its result), else None."""
        with self._lock:
            mine = [(i, call.call_id) for i, call in enumerate(self._handed_out) if call.tool == tool]
            pending = [call_id for i, call_id in mine if i not in self._answered]
        if pending:
            return pending[0]
        return mine[-1][1] if mine else None


class LoopbackServer:
    """The model (and, with ``tools`` and ``services``, the mock tools and the harness's HTTP
    services) on ``127.0.0.1:<port>``; see the module docstring for routes and edges.

    ``services`` maps a name of ``MOUNTS`` (``"orders"``, ``"mail"``) to its handler;
    ``service_tools`` overrides ``SERVICE_TOOLS`` (the tool each service's side-effecting
    requests stand for). Binding happens in the constructor, serving in ``start()``: the
    owner can start a child process between the two while it is still single-threaded (a
    fork from a threaded process may inherit a lock held by another thread)."""

    def __init__(
        self,
        model: ScriptedModel,
        *,
        tools: ToolRunner | None = None,
        idempotency: Mapping[str, str] | None = None,
        services: Mapping[str, ServiceHandler] = _NO_SERVICES,
        service_tools: Mapping[str, str] = SERVICE_TOOLS,
        on_edge: BoundaryHook,
        edges: frozenset[str] = frozenset(EDGES),
        freeze: Callable[[], AbstractContextManager[None]] = _no_freeze,
        stoppable: bool = True,
        before_tool: Callable[[], None] = lambda: None,
        on_request: Callable[[str], None] = _no_request,
        mcp: McpLife | None = None,
        tool_side: ToolSide | None = None,
    ) -> None:
        unknown = sorted(set(services) - set(MOUNTS))
        if unknown:
            raise InputError(
                f"LoopbackServer: no mount point for service {unknown[0]!r}; "
                f"name services {' or '.join(repr(name) for name in MOUNTS)}"
            )
        self.model = model
        self.tools = tools
        self.idempotency = dict(idempotency or {})
        self.services = dict(services)
        self.service_tools = {**SERVICE_TOOLS, **service_tools}
        self.on_edge = on_edge
        self.edges = edges
        self.freeze = _Freezer(freeze)
        self.stoppable = stoppable
        self.before_tool = before_tool
        self.on_request = on_request
        self.mcp = mcp
        # Where a tool-side column's fault reaches the tools and services routes (issue 32).
        self.tool_side = tool_side
        self.errors: list[str] = []
        self._mcp_lock = threading.Lock()
        # (relay pid, call id) -> the tool-side fault taken at its begin, until its end.
        self._mcp_faults: dict[tuple[int, str], str | None] = {}
        # (relay pid, call id) -> the agent stopped until the relay wrote its response.
        self._mcp_frozen: dict[tuple[int, str], tuple[AbstractContextManager[None], threading.Event]] = {}
        self._mcp_runs = 0
        self._mcp_unattributed = 0
        # One edge at a time: two threads racing into the hook would make "the n-th time this
        # boundary was reached" depend on scheduling.
        self._edge_lock = threading.Lock()
        self._calls = _ToolCalls()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.app = self
        self._thread: threading.Thread | None = None

    def remember(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Tell the server the conversation so far (a restarted life's): service requests
        for calls handed out before this server existed are attributed to them."""
        self._calls.saw_conversation(messages)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def model_url(self) -> str:
        return f"{self.base_url}/v1"

    @property
    def tools_url(self) -> str:
        return f"{self.base_url}/tools"

    @property
    def orders_url(self) -> str:
        """The order API's base URL, ``http://127.0.0.1:<port>``: ``POST {orders_url}/orders``,
        ``GET {orders_url}/orders?idempotency_key=K`` (404 unless ``services`` has "orders")."""
        return self.base_url

    @property
    def mail_url(self) -> str:
        """The mail API's base URL, ``http://127.0.0.1:<port>``: ``POST {mail_url}/emails``,
        ``GET {mail_url}/emails?idempotency_key=K`` (404 unless ``services`` has "mail")."""
        return self.base_url

    def start(self) -> None:
        # ``shutdown`` waits for the serving loop to wake up: up to one poll interval, at the
        # end of every life (0.05 s was ~40 ms of a kind-2 life's ~150). Waking 100 times a
        # second while idle costs nothing a life can measure.
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        # The accept loop writes nothing of the case: a snapshot need not wait for it
        # (harness.lives.threads); the handler threads it starts are counted.
        with quiet():
            self._httpd.serve_forever(poll_interval=0.01)

    def close(self) -> None:
        for key in list(self._mcp_frozen):
            self._thaw(key)
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(5)
        self._httpd.server_close()

    def __enter__(self) -> LoopbackServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _edge(self, boundary: str, tool_call_id: str) -> None:
        """Pass ``boundary``; a stoppable agent is stopped while the hook runs (a freeze
        nests), so a hook that kills leaves it no moment to act."""
        if boundary not in self.edges:
            return
        with self.freeze() if self.stoppable else contextlib.nullcontext(), self._edge_lock:
            self.on_edge(boundary, tool_call_id)

    # -- routes -----------------------------------------------------------------------------

    def chat(self, handler: _Handler, body: bytes) -> None:
        try:
            parsed = json.loads(body or b"{}")
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and parsed.get("stream"):
            handler._send(_Reply(400, _error("the scripted model does not stream; send stream: false")))
            return
        self._calls.saw_request(parsed)
        response = self.model.handle(
            httpx.Request("POST", f"{self.model_url}/chat/completions", content=body)
        )
        reply = _Reply(response.status_code, response.json())
        calls = _tool_call_ids(reply.body) if response.status_code == 200 else []
        if calls:
            # Before the reply is written: the agent may act on it at once.
            self._calls.saw_reply(reply.body)
        if not calls or "after_model_reply" not in self.edges:
            handler._send(reply)
            return
        if not self.stoppable:
            self._edge("after_model_reply", calls[0])
            handler._send(reply)
            return
        with self.freeze():
            handler._send(reply)
            self._edge("after_model_reply", calls[0])

    def tool(self, name: str, headers: Mapping[str, str], body: bytes) -> _Reply:
        """``headers`` with lower-case names (clients differ in how they spell them)."""
        assert self.tools is not None
        call_id = headers.get("x-tool-call-id")
        if not call_id:
            return _Reply(400, _error("send the model's tool_call_id in the X-Tool-Call-Id header"))
        try:
            arguments = json.loads(body or b"{}")
        except ValueError:
            return _Reply(400, _error("the body must be the tool's JSON arguments"))
        # A non-object reaches the toolbox as is: INVALID_ARGUMENTS is the tool's answer.
        digest = arguments_sha256(arguments) if isinstance(arguments, dict) else ""
        ctx = ToolContext(
            tool_call_id=call_id,
            execution_id=headers.get("x-execution-id") or f"{call_id}:exec",
            idempotency_key=headers.get("idempotency-key") or "",
            arguments_sha256=digest,
        )
        self.before_tool()
        fault = self.tool_side.reach(call_id, name) if self.tool_side is not None else None
        if fault == "tool_result_error":  # nothing runs, no edge is passed
            self._tool_fault(fault, call_id, name)
            return _Reply(503, _error(f"{name}: the tool service is restarting; nothing ran"))
        self._edge("after_running", call_id)
        observation = self.tools.execute(name, arguments, ctx)
        self._edge("after_side_effect", call_id)
        result = observation.to_result(
            execution_id=ctx.execution_id, idempotency=self.idempotency.get(name, "non_idempotent")
        )
        if fault is not None:
            self._tool_fault(fault, call_id, name)
        return _Reply(200, result, fault)

    def _tool_fault(self, kind: str, call_id: str, tool: str) -> None:
        """A tool-side fault acts on a tools or services request: the trace's proof."""
        assert self.tool_side is not None
        self.tool_side.acted(kind, call_id, f"{tool}: {WIRE_FAULTS[kind]}")

    def service(self, handler: _Handler, name: str, method: str, body: bytes) -> None:
        """Forward one request to the service ``name`` and write its answer back (or, for a
        fault on the wire, close the connection without one)."""
        headers = list(handler.headers.items())
        given = {key.lower() for key, _ in headers}
        call_id: str | None = None
        if method not in _SAFE_METHODS:
            tool = handler.headers.get("X-Tool-Name") or self.service_tools[name]
            call_id = handler.headers.get("X-Tool-Call-Id") or self._calls.attribute(tool)
            if "x-tool-name" not in given:
                headers.append(("X-Tool-Name", tool))
            if call_id is not None and "x-tool-call-id" not in given:
                headers.append(("X-Tool-Call-Id", call_id))
        request = httpx.Request(method, f"{self.base_url}{handler.path}", headers=headers, content=body)
        self.before_tool()
        fault: str | None = None
        if self.tool_side is not None and call_id is not None:
            fault = self.tool_side.reach(call_id, tool)
        elif self.tool_side is not None:
            # A lookup: what the agent asks after a fault (its call, as a request is attributed).
            seen = handler.headers.get("X-Tool-Call-Id") or self._calls.attribute(self.service_tools[name])
            if seen is not None:
                self.tool_side.saw(seen, SERVICE_LOOKUPS.get(name, f"{method} {MOUNTS[name]}"))
        if fault == "tool_result_error" and call_id is not None:  # nothing runs, no edge is passed
            self._tool_fault(fault, call_id, tool)
            refused = _error(f"{name}: the service is restarting; nothing ran")
            headers = [("Content-Type", "application/json"), ("Retry-After", "1")]
            handler._write(503, headers, _json(refused), None)
            return
        if call_id is not None:
            self._edge("after_running", call_id)
        try:
            response = self.services[name].handle(request)
        except httpx.ConnectTimeout:
            handler._drop()  # the request "never reached the service": nothing ran, no edge
            return
        except httpx.TransportError:
            # The service committed and its answer is lost on the way back.
            if call_id is not None:
                self._edge("after_side_effect", call_id)
            handler._drop()
            return
        if call_id is not None:
            self._edge("after_side_effect", call_id)
        if fault is not None and call_id is not None:
            self._tool_fault(fault, call_id, tool)
        handler._send_response(response, fault)

    # -- MCP: the relay's requests ------------------------------------------------------------

    def mcp_route(self, step: str, method: str, body: bytes) -> _Reply | None:
        """One request of the relay (None: close the connection without an answer)."""
        assert self.mcp is not None
        if step == "tools" and method == "GET":
            return _Reply(200, {"tools": [dict(tool) for tool in self.mcp.tools]})
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            request = None
        if not isinstance(request, dict) or not isinstance(request.get("pid"), int):
            return _Reply(400, _error("an MCP relay request is a JSON object with the relay's pid"))
        if method != "POST":
            return _Reply(404, _error(f"no route {method} /mcp/{step}"))
        if step == "tools":
            return _Reply(200, {})  # proxy mode: the upstream's tools, for the record
        if step == "begin":
            return self._mcp_begin(request)
        if step == "execute":
            return self._mcp_execute(request)
        if step == "end":
            return self._mcp_end(request)
        if step == "sent":
            return self._mcp_sent(request)
        return _Reply(404, _error(f"no route POST /mcp/{step}; see harness/agents/loopback.py"))

    def _mcp_begin(self, request: Mapping[str, Any]) -> _Reply:
        assert self.mcp is not None
        name = str(request.get("name") or "")
        meta = request.get("meta") if isinstance(request.get("meta"), dict) else {}
        given = meta.get("tool_call_id") if isinstance(meta, dict) else None
        call_id = str(given) if given else self._calls.attribute(name)
        if call_id is None:
            # No call of this tool was handed out: nothing to attribute it to, no edge.
            with self._mcp_lock:
                self._mcp_unattributed += 1
                number = self._mcp_unattributed
            call_id = f"mcp-unattributed-{number}"
            self.mcp.trace({"event": "mcp_call", "call": call_id, "tool": name, "attributed": False})
            return _Reply(200, {"call_id": call_id, "fault": None})
        self.mcp.trace({"event": "mcp_call", "call": call_id, "tool": name})
        self.before_tool()
        with self._edge_lock:  # one fault decision at a time, like the edges
            fault = self.mcp.take_fault(call_id)
        with self._mcp_lock:
            self._mcp_faults[(request["pid"], call_id)] = fault
        if fault == "tool_result_error":
            # Nothing runs: the relay answers isError at once (no edge is passed either).
            detail = f"the tool server answered {call_id} ({name}) isError before running it"
            event = {"event": "fault", "fault": fault, "call": call_id, "acted": True, "detail": detail}
            self.mcp.trace(event)
            return _Reply(200, {"call_id": call_id, "fault": fault})
        self._edge("after_running", call_id)
        return _Reply(200, {"call_id": call_id, "fault": fault})

    def _mcp_execute(self, request: Mapping[str, Any]) -> _Reply:
        assert self.mcp is not None
        from crashmatrix.harness.agents.mcp_tools import call_tool_result, split_key

        if self.tools is None:
            return _Reply(400, _error("this life serves no tools over MCP (proxy mode calls the upstream)"))
        name = str(request.get("name") or "")
        call_id = str(request.get("call_id") or "")
        raw = request.get("arguments")
        meta = request.get("meta") if isinstance(request.get("meta"), dict) else {}
        arguments, key = split_key(raw if isinstance(raw, dict) else {}, meta, keyed=name in self.mcp.keyed)
        with self._mcp_lock:
            self._mcp_runs += 1
            number = self._mcp_runs
        # The attempt the effect belongs to: the one the agent names (_meta.execution_id), else
        # its ledger's running attempt (the invariants match effects to running records by
        # it), else one of the relay's own.
        ledger = self.mcp.attempt(call_id)
        given = meta.get("execution_id") if isinstance(meta, dict) else None
        execution_id = str(given) if given else ledger[0] if ledger else f"{call_id}:mcp:{number}"
        step = self.mcp.step
        ctx = ToolContext(
            tool_call_id=call_id,
            execution_id=execution_id,
            idempotency_key=key or (ledger[1] if ledger else ""),
            arguments_sha256=arguments_sha256(arguments),
            step=no_step if step is None else (lambda: step(call_id)),
        )
        # A non-object reaches the toolbox as is: INVALID_ARGUMENTS is the tool's answer.
        given_arguments: Any = arguments if isinstance(raw, dict) else raw
        observation = self.tools.execute(name, given_arguments, ctx)
        result = observation.to_result(
            execution_id=ctx.execution_id, idempotency=self.idempotency.get(name, "non_idempotent")
        )
        return _Reply(200, {"result": call_tool_result(result)})

    def _mcp_end(self, request: Mapping[str, Any]) -> _Reply | None:
        from crashmatrix.harness.agents.mcp_tools import malformed_result

        assert self.mcp is not None
        pid: int = request["pid"]
        call_id = str(request.get("call_id") or "")
        raw = request.get("result")
        result: Mapping[str, Any] = raw if isinstance(raw, dict) else {}
        with self._mcp_lock:
            fault = self._mcp_faults.pop((pid, call_id), None)
        if call_id.startswith("mcp-unattributed-"):
            return _Reply(200, {"action": "send", "result": result})
        # Passed at /mcp/sent instead where the agent is stopped until its response is written.
        at_sent = self.stoppable and fault in (None, "tool_result_malformed")
        if not at_sent:
            self._edge("after_side_effect", call_id)
        if fault is not None:
            detail = {
                "tool_server_died": f"the MCP server (pid {pid}) was SIGKILLed after {call_id}'s effect, "
                "before its response",
                "tool_response_lost": f"{call_id}'s response was dropped after its effect",
                "tool_result_malformed": f"{call_id}'s result was sent malformed (a content block "
                "of an unknown type) after its effect",
            }.get(fault, fault)
            event = {"event": "fault", "fault": fault, "call": call_id, "acted": True, "detail": detail}
            self.mcp.trace({**event, "pid": pid})
        if fault == "tool_server_died":
            self.mcp.kill_relay(pid)
            return None  # nobody is left to answer
        if fault == "tool_response_lost":
            return _Reply(200, {"action": "drop"})
        if fault == "tool_result_malformed":
            result = malformed_result(result)
        if at_sent:
            # Stopped before the relay may write: the response then sits unread in its pipe.
            self._freeze_until_sent((pid, call_id))
        return _Reply(200, {"action": "send", "result": result})

    def _mcp_sent(self, request: Mapping[str, Any]) -> _Reply:
        key = (int(request["pid"]), str(request.get("call_id") or ""))
        with self._mcp_lock:
            frozen = key in self._mcp_frozen
        if frozen:
            try:
                self._edge("after_side_effect", key[1])
            finally:
                self._thaw(key)
        return _Reply(200, {})

    def _freeze_until_sent(self, key: tuple[int, str]) -> None:
        stop = self.freeze()
        stop.__enter__()  # left at _thaw, from /mcp/sent or after SENT_TIMEOUT
        sent, waiting = threading.Event(), threading.Event()
        with self._mcp_lock:
            self._mcp_frozen[key] = (stop, sent)
        threading.Thread(target=self._thaw_late, args=(key, sent, waiting), daemon=True).start()
        # Quiet before this handler answers: the edge at /mcp/sent, which the answer leads
        # to, may be copied (harness.lives.threads) only with no thread counted running.
        waiting.wait()

    def _thaw_late(self, key: tuple[int, str], sent: threading.Event, waiting: threading.Event) -> None:
        """The relay never said it wrote the response (it died writing): the agent goes on
        after SENT_TIMEOUT. Quiet while it waits; it thaws under GATE, never in a copy."""
        with quiet():
            waiting.set()
            if sent.wait(SENT_TIMEOUT):
                return
            with GATE:
                self._thaw(key)

    def _thaw(self, key: tuple[int, str]) -> None:
        with self._mcp_lock:
            frozen = self._mcp_frozen.pop(key, None)
        if frozen is not None:
            frozen[1].set()
            frozen[0].__exit__(None, None, None)


def _tool_call_ids(completion: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for choice in completion.get("choices") or ():
        for call in (choice.get("message") or {}).get("tool_calls") or ():
            out.append(str(call.get("id")))
    return out
