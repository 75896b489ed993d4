"""One tool call as the mock tools see it, the ToolObservations they commonly return, and
the boundary between a tool's client and its backend, where the tool side fails (issue 32).

A tool-side fault (``harness.core.tool_side``: the backend dies after the effect, the answer
is lost, an error comes back before anything ran, the answer is malformed) acts between the
client code of a mock tool and what it calls: the order API over (respx-mocked) HTTP, the
world's outbox, files and commands in process. The client sees what a real one would: an
HTTP client the exception httpx raises (``FaultyHttp``), an in-process backend the exception
its connection would (``backend_failure``). Which observation the agent then gets is decided
in ONE place, ``answer_lost``: a request sent without a readable answer is uncertain for a
side-effecting tool, never "failed" (the effect may have happened) and never "succeeded".
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

import httpx

from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.tools import ToolContext, ToolObservation
from crashmatrix.harness.errors import SandboxViolation
from crashmatrix.mock_tools.world import World

__all__ = [
    "Call",
    "FaultyHttp",
    "Handler",
    "ToolSide",
    "answer_lost",
    "backend_error",
    "backend_failure",
    "invalid",
    "refused",
    "tool_error",
]


class EventIds(TypedDict):
    """The keyword arguments of ``World.record_event`` that name a call's identities."""

    tool_call_id: str
    execution_id: str
    idempotency_key: str


@dataclass(frozen=True, slots=True)
class Call:
    """Everything a tool implementation needs: the world, HTTP, the call and its contract."""

    world: World
    http: httpx.Client | FaultyHttp  # FaultyHttp: a tool-side fault on the wire (below)
    name: str
    arguments: Mapping[str, Any]
    ctx: ToolContext
    contract: ToolContract

    def event_ids(self) -> EventIds:
        """The identities every event of this call carries (seed 000's three IDs)."""
        return {
            "tool_call_id": self.ctx.tool_call_id,
            "execution_id": self.ctx.execution_id,
            "idempotency_key": self.ctx.idempotency_key,
        }


Handler = Callable[[Call], ToolObservation]


def refused(error: SandboxViolation) -> ToolObservation:
    return ToolObservation(ok=False, code="PERMISSION_DENIED", content=f"{error}; nothing was done")


def invalid(message: str) -> ToolObservation:
    return ToolObservation(ok=False, code="INVALID_ARGUMENTS", content=message)


def tool_error(message: str) -> ToolObservation:
    return ToolObservation(ok=False, code="TOOL_ERROR", content=message)


# -- the tool side ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolSide:
    """How the harness reaches the tool side of the calls a toolbox or a loopback server runs.

    ``reach(call_id, tool)``: the call's request reached its backend; the harness writes the
    trace's ``mcp_call`` event and returns the tool-side fault armed for that call, once across
    the case's lives (``harness.agents.tool_faults.take``), else None. ``acted(kind, call_id,
    detail)``: that fault acted (the trace's ``fault`` event, the proof a case needs).
    ``saw(call_id, tool)``: a request that takes no fault reached the tool side (a loopback
    service's lookup): only the trace's ``mcp_call`` event, so a lookup after a fault counts."""

    reach: Callable[[str, str], str | None]
    acted: Callable[[str, str, str], None]
    saw: Callable[[str, str], None] = lambda call_id, tool: None


# What each kind does, said to the trace (``acted``'s detail).
FAULT_DETAILS: Mapping[str, str] = {
    "tool_server_died": "the backend died after the effect committed, before it answered "
    "(connection dropped: a service or sandbox restarting mid-call)",
    "tool_response_lost": "the effect committed and the answer was lost on the way (read timeout)",
    "tool_result_error": "the backend answered 503 Service Unavailable before running anything",
    "tool_result_malformed": "the effect committed and the answer came back truncated, not JSON",
}


def backend_failure(kind: str, tool: str) -> Exception:
    """What an in-process backend's client raises when ``kind`` hits it after the effect."""
    if kind == "tool_server_died":
        return ConnectionResetError(f"{tool}: connection reset by peer: the backend went away mid-call")
    if kind == "tool_response_lost":
        return TimeoutError(f"{tool}: timed out waiting for the backend's answer")
    if kind == "tool_result_malformed":
        return json.JSONDecodeError("Unterminated string starting at", '{"ok": true, "da', 14)
    raise ValueError(f"{kind} does not act after the effect")


def backend_error(tool: str) -> ToolObservation:
    """An in-process backend's error answer before it ran anything (``tool_result_error``)."""
    return ToolObservation(
        ok=False,
        code="TOOL_ERROR",
        retryable=True,
        content=f"{tool}: the backend answered 503 Service Unavailable (restarting); nothing was done.",
    )


def answer_lost(call: Call, error: Exception, *, side_effecting: bool) -> ToolObservation:
    """The observation of a request that went out and got no readable answer: the connection
    dropped, the answer timed out, or what came back could not be read (``error``).

    A read is harmless to repeat: a retryable error. For anything else the effect may have
    happened: ``SIDE_EFFECT_UNCERTAIN`` (the ledger says ``unknown``), with the contract's
    lookup tool named when it has one. Not "failed" (a retry with a new key sends twice) and
    not "succeeded" (nothing said so)."""
    from crashmatrix.mock_tools.faults import lost_response_observation

    what = f"{type(error).__name__}: {error}"
    if not side_effecting and isinstance(error, TimeoutError | httpx.TimeoutException):
        return lost_response_observation(call.name, call.contract, side_effecting=False)
    if not side_effecting:
        return ToolObservation(
            ok=False,
            code="TOOL_ERROR",
            retryable=True,
            content=f"{call.name}: no readable answer ({what}); it changes nothing, so retrying is safe",
        )
    lost = lost_response_observation(call.name, call.contract, side_effecting=True)
    return ToolObservation(
        ok=False,
        code=lost.code,
        uncertain=True,
        content=f"{call.name}: no readable answer ({what}). {lost.content}",
    )


class FaultyHttp:
    """A tool's HTTP client with one tool-side fault on the wire for its next request: what
    httpx raises or returns when the service dies after committing (``RemoteProtocolError``:
    "Server disconnected without sending a response."), the answer times out
    (``ReadTimeout``), the service answers 503 before doing anything, or a truncated body
    comes back under a 200. Later requests (a lookup, a retry) meet a healthy service."""

    def __init__(self, http: httpx.Client, kind: str) -> None:
        self.http = http
        self.kind: str | None = kind

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        kind, self.kind = self.kind, None
        if kind == "tool_result_error":
            request = self.http.build_request(method, url, **kwargs)
            body = {"error": {"type": "unavailable", "message": "the service is restarting; nothing ran"}}
            return httpx.Response(503, json=body, headers={"Retry-After": "1"}, request=request)
        response = self.http.request(method, url, **kwargs)  # the service commits
        if kind == "tool_server_died":
            message = "Server disconnected without sending a response."
            raise httpx.RemoteProtocolError(message, request=response.request)
        if kind == "tool_response_lost":
            raise httpx.ReadTimeout("timed out", request=response.request)
        if kind == "tool_result_malformed":
            cut = response.content[: max(1, len(response.content) // 2)]
            headers = {"Content-Type": response.headers.get("Content-Type", "application/json")}
            status = response.status_code
            return httpx.Response(status, content=cut, headers=headers, request=response.request)
        return response
