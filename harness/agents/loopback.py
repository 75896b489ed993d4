"""The scripted model and the mock tools as HTTP servers on 127.0.0.1, for agents that are
not Python objects the harness can hand an ``httpx.Client`` to.

Two routes, on one ``ThreadingHTTPServer`` bound to port 0 (the kernel picks a free port)::

    POST /v1/chat/completions   OpenAI chat completions (no streaming), answered by the
                                same ``ScriptedModel`` as in-process agents, request log included
    POST /tools/<name>          JSON arguments -> ToolObservation JSON, through ``MockToolbox``;
                                headers X-Tool-Call-Id (required), X-Execution-Id,
                                Idempotency-Key carry seed 000's three identities

Crash points are the edges the server sees. ``on_edge(boundary, tool_call_id)`` is called
(and may never return: it is the life's hook)

* ``after_running``         a tool request arrived; nothing was executed yet
* ``after_side_effect``     the tool ran (its effect is committed); the response is not sent
* ``after_tool_call_saved`` the model's reply with tool calls was sent

Only the last edge leaves the agent free to act between the edge and its death, so the
server brackets it with ``freeze``: the owner stops the agent before the reply is written
and resumes it after the hook returned. A reply that reached the agent's socket but was never
read is what "the process died right after the model answered" means.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

import httpx

from crashmatrix.harness.core.boundaries import BoundaryHook
from crashmatrix.harness.core.ledger import arguments_sha256
from crashmatrix.harness.core.tools import ToolContext, ToolObservation
from crashmatrix.mock_tools.model import ScriptedModel

__all__ = ["EDGES", "LoopbackServer", "ToolRunner"]

EDGES = ("after_tool_call_saved", "after_running", "after_side_effect")
# An agent has no business sending more than this in one request; refusing bigger bodies
# keeps a misbehaving agent from making the harness buffer without bound.
MAX_BODY = 1 << 20
# Seconds a connection may sit idle mid-request before the handler gives up on it.
SOCKET_TIMEOUT = 30.0


class ToolRunner(Protocol):
    """What the tools route needs from ``mock_tools.toolbox.MockToolbox``."""

    def execute(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolObservation: ...


def _no_freeze() -> AbstractContextManager[None]:
    return contextlib.nullcontext()


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int
    body: dict[str, Any]


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = SOCKET_TIMEOUT
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Silence: the request log and the trace say what happened, not stderr."""

    def _send(self, reply: _Reply) -> None:
        data = json.dumps(reply.body, ensure_ascii=False).encode("utf-8")
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _body(self) -> bytes | None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self.close_connection = True
            self._send(_Reply(413, _error(f"request body over {MAX_BODY} bytes")))
            return None
        return self.rfile.read(length)

    def do_POST(self) -> None:
        app = self.server.app
        body = self._body()
        if body is None:
            return
        path = self.path.split("?", 1)[0]
        try:
            if path.endswith("/chat/completions"):
                app.chat(self, body)
            elif path.startswith("/tools/") and app.tools is not None:
                self._send(
                    app.tool(
                        path.removeprefix("/tools/"), {k.lower(): v for k, v in self.headers.items()}, body
                    )
                )
            else:
                self._send(_Reply(404, _error(f"no route {path}; see harness/agents/loopback.py")))
        except Exception as error:  # a harness bug must reach the agent as a 500, not a hang
            app.errors.append(f"{path}: {type(error).__name__}: {error}")
            self._send(_Reply(500, _error(f"crashmatrix loopback error: {error}")))


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a handler stuck on a dead agent must not keep the life alive
    request_queue_size = 16
    app: LoopbackServer


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "crashmatrix"}}


class LoopbackServer:
    """The model (and, with ``tools``, the mock tools) on ``127.0.0.1:<port>``.

    Binding happens in the constructor, serving in ``start()``: the owner can start a child
    process between the two while it is still single-threaded (a fork from a threaded
    process may inherit a lock held by another thread)."""

    def __init__(
        self,
        model: ScriptedModel,
        *,
        tools: ToolRunner | None = None,
        idempotency: Mapping[str, str] | None = None,
        on_edge: BoundaryHook,
        edges: frozenset[str] = frozenset(EDGES),
        freeze: Callable[[], AbstractContextManager[None]] = _no_freeze,
        before_tool: Callable[[], None] = lambda: None,
    ) -> None:
        self.model = model
        self.tools = tools
        self.idempotency = dict(idempotency or {})
        self.on_edge = on_edge
        self.edges = edges
        self.freeze = freeze
        self.before_tool = before_tool
        self.errors: list[str] = []
        # One edge at a time: two threads racing into the hook would make "the n-th time this
        # boundary was reached" depend on scheduling.
        self._edge_lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.app = self
        self._thread: threading.Thread | None = None

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

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def close(self) -> None:
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
        if boundary in self.edges:
            with self._edge_lock:
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
        response = self.model.handle(
            httpx.Request("POST", f"{self.model_url}/chat/completions", content=body)
        )
        reply = _Reply(response.status_code, response.json())
        calls = _tool_call_ids(reply.body) if response.status_code == 200 else []
        if not calls or "after_tool_call_saved" not in self.edges:
            handler._send(reply)
            return
        with self.freeze():
            handler._send(reply)
            for call_id in calls:
                self._edge("after_tool_call_saved", call_id)

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
        self._edge("after_running", call_id)
        observation = self.tools.execute(name, arguments, ctx)
        self._edge("after_side_effect", call_id)
        result = observation.to_result(
            execution_id=ctx.execution_id, idempotency=self.idempotency.get(name, "non_idempotent")
        )
        return _Reply(200, result)


def _tool_call_ids(completion: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for choice in completion.get("choices") or ():
        for call in (choice.get("message") or {}).get("tool_calls") or ():
            out.append(str(call.get("id")))
    return out
