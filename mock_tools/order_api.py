"""A mocked HTTP order service that honours ``Idempotency-Key`` (Stripe / IETF draft).

Base URL ``http://orders.crashmatrix.test``; respx routes requests to ``OrderAPI.handle``
and the state lives in the world's SQLite, so it survives the agent process.

``POST /orders`` with a key runs in two transactions, as a real service would::

    tx1  claim the key: insert (key, payload hash, 'in_flight', owner pid)     -> commit
         ... the service does its work (``hold_in_flight`` stretches this window) ...
    tx2  insert the order + its event, mark the key 'completed' with the response -> commit

A second request with the same key sees, in tx1: ``completed`` -> the stored response is
replayed (200, ``Idempotent-Replayed: true``); a different payload -> 422; ``in_flight``
with a live owner -> 409; ``in_flight`` whose owner process is dead -> it takes the claim
over (the owner died between tx1 and tx2, so no order was committed: tx2 is atomic).

Faults: the handler consumes ``world.take_fault(X-Tool-Name, X-Tool-Call-Id)``.
``timeout_before`` raises ``httpx.ConnectTimeout`` before anything is committed;
``response_lost`` lets the request complete and then raises ``httpx.ReadTimeout``;
``permission_denied`` answers 403.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import respx

from crashmatrix.mock_tools.world import World

__all__ = [
    "BASE_URL",
    "ORDERS_HOST",
    "OrderAPI",
    "install",
    "payload_sha256",
]

ORDERS_HOST = "orders.crashmatrix.test"
BASE_URL = f"http://{ORDERS_HOST}"
_DEFAULT_TOOL = "create_order"


def _json_response(
    status: int, body: Mapping[str, Any] | str, headers: Mapping[str, str] | None = None
) -> httpx.Response:
    """A JSON response; ``body`` may be stored JSON text, replayed byte for byte."""
    text = body if isinstance(body, str) else json.dumps(dict(body), sort_keys=True, ensure_ascii=False)
    return httpx.Response(
        status,
        content=text.encode("utf-8"),
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def _error(status: int, code: str, message: str) -> httpx.Response:
    return _json_response(status, {"error": {"code": code, "message": message}})


def payload_sha256(payload: Mapping[str, Any]) -> str:
    """The fingerprint the service compares for a reused key (canonical JSON, sorted keys)."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) of a process from /proc (Linux), or None where there is no /proc."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 2 (comm) may contain spaces and parentheses; everything after the LAST ')' is safe.
    fields = raw[raw.rfind(")") + 2 :].split()
    if len(fields) < 20:
        return None
    return fields[0], fields[19]


def _process_start(pid: int) -> str | None:
    stat = _proc_stat(pid)
    return stat[1] if stat else None


def _owner_alive(pid: int, started: str | None) -> bool:
    """Is the process that claimed a key still running (and still the same process)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists; it just is not ours to signal
    stat = _proc_stat(pid)
    if stat is None:
        return True  # no /proc: os.kill is all we can know
    state, now = stat
    # A zombie (killed, not yet reaped) still answers os.kill but will never finish the request.
    if state in ("Z", "X"):
        return False
    # The pid may have been reused by an unrelated process since the claim.
    return started is None or started == now


class OrderAPI:
    """The order service. ``hold_in_flight`` / ``on_in_flight`` are test hooks that run
    between tx1 and tx2, to make concurrent and dying requests reproducible."""

    def __init__(
        self,
        world: World,
        *,
        hold_in_flight: float = 0.0,
        on_in_flight: Callable[[str], None] | None = None,
    ) -> None:
        self.world = world
        self.hold_in_flight = hold_in_flight
        self.on_in_flight = on_in_flight

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.rstrip("/")
        if path != "/orders":
            return _error(404, "not_found", f"no route {request.method} {request.url.path}")
        tool = request.headers.get("X-Tool-Name", _DEFAULT_TOOL if request.method == "POST" else "")
        tool_call_id = request.headers.get("X-Tool-Call-Id")
        fault = (
            self.world.take_fault(tool, tool_call_id, execution_id=request.headers.get("X-Execution-Id"))
            if tool
            else None
        )
        if fault == "timeout_before":
            raise httpx.ConnectTimeout(
                "injected fault: the request never reached the service", request=request
            )
        if fault == "permission_denied":
            return _error(403, "permission_denied", "the caller may not do this")
        if request.method == "POST":
            response = self._create(request)
        elif request.method == "GET":
            response = self._lookup(request)
        else:
            response = _error(405, "method_not_allowed", f"{request.method} /orders is not supported")
        if fault == "response_lost":
            # Everything above is committed; only the answer disappears on the way back.
            raise httpx.ReadTimeout("injected fault: the response was lost", request=request)
        return response

    # -- GET /orders?idempotency_key=K ------------------------------------------------------

    def _lookup(self, request: httpx.Request) -> httpx.Response:
        key = request.url.params.get("idempotency_key")
        if not key:
            return _error(400, "missing_parameter", "query parameter idempotency_key is required")
        row = (
            self.world.read()
            .execute("SELECT * FROM orders WHERE idempotency_key = ? ORDER BY id LIMIT 1", (key,))
            .fetchone()
        )
        if row is None:
            return _error(404, "not_found", f"no order with idempotency key {key!r}")
        return _json_response(200, _order_body(row["id"], key, json.loads(row["payload"])))

    # -- POST /orders -----------------------------------------------------------------------

    def _create(self, request: httpx.Request) -> httpx.Response:
        try:
            payload = json.loads(request.content or b"null")
        except ValueError:
            return _error(400, "invalid_json", "the request body is not JSON")
        if not isinstance(payload, dict):
            return _error(400, "invalid_body", "the request body must be a JSON object")
        key = request.headers.get("Idempotency-Key")
        if not key:
            # Without a key the service cannot recognise a retry: every request is an order.
            return self._commit_order(request, payload, key=None, token=None)

        digest = payload_sha256(payload)
        token = uuid.uuid4().hex
        me, started = os.getpid(), _process_start(os.getpid())
        with self.world.transaction() as conn:  # tx1: claim the key
            row = conn.execute("SELECT * FROM idempotency WHERE key = ?", (key,)).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO idempotency (key, payload_sha256, state, response, owner_pid,"
                    " owner_started, owner_token) VALUES (?, ?, 'in_flight', NULL, ?, ?, ?)",
                    (key, digest, me, started, token),
                )
            elif row["payload_sha256"] != digest:
                return _error(
                    422,
                    "idempotency_key_reused",
                    "this Idempotency-Key was already used with a different request body",
                )
            elif row["state"] == "completed":
                # Replay the stored bytes, not a re-rendering: the IETF draft asks for the
                # original response, and a test can compare bodies exactly.
                return _json_response(200, row["response"], {"Idempotent-Replayed": "true"})
            elif _owner_alive(row["owner_pid"], row["owner_started"]):
                return _error(
                    409, "request_in_progress", "a request with this Idempotency-Key is in progress"
                )
            else:
                conn.execute(
                    "UPDATE idempotency SET owner_pid = ?, owner_started = ?, owner_token = ? WHERE key = ?",
                    (me, started, token, key),
                )
        try:
            if self.hold_in_flight > 0:
                time.sleep(self.hold_in_flight)
            if self.on_in_flight is not None:
                self.on_in_flight(key)
            return self._commit_order(request, payload, key=key, token=token)
        except BaseException:
            # An ordinary error (not a process death) must not leave the key claimed forever
            # by a live process: release the claim so a retry can proceed.
            with self.world.transaction() as conn:
                conn.execute(
                    "DELETE FROM idempotency WHERE key = ? AND owner_token = ? AND state = 'in_flight'",
                    (key, token),
                )
            raise

    def _commit_order(
        self, request: httpx.Request, payload: Mapping[str, Any], *, key: str | None, token: str | None
    ) -> httpx.Response:
        tool = request.headers.get("X-Tool-Name", _DEFAULT_TOOL)
        tool_call_id = request.headers.get("X-Tool-Call-Id")
        execution_id = request.headers.get("X-Execution-Id")
        with self.world.transaction() as conn:  # tx2: the order, its event, the stored response
            if token is not None:
                owner = conn.execute(
                    "SELECT owner_token, state FROM idempotency WHERE key = ?", (key,)
                ).fetchone()
                if owner is None or owner["owner_token"] != token or owner["state"] != "in_flight":
                    # Someone took the claim over (we were presumed dead): do not add a second order.
                    return _error(409, "request_in_progress", "this request lost its claim on the key")
            order_id = conn.execute(
                "INSERT INTO orders (idempotency_key, payload, tool_call_id, execution_id, seq)"
                " VALUES (?, ?, ?, ?, 0)",
                (key, json.dumps(payload, sort_keys=True, ensure_ascii=False), tool_call_id, execution_id),
            ).lastrowid
            assert order_id is not None
            body = _order_body(order_id, key, payload)
            stored = json.dumps(body, sort_keys=True, ensure_ascii=False)
            seq = self.world.record_event(
                conn,
                "order",
                tool,
                tool_call_id=tool_call_id,
                execution_id=execution_id,
                idempotency_key=key,
                detail={"order_id": body["id"], "payload": dict(payload)},
            )
            conn.execute("UPDATE orders SET seq = ? WHERE id = ?", (seq, order_id))
            if key is not None:
                conn.execute(
                    "UPDATE idempotency SET state = 'completed', response = ? WHERE key = ?",
                    (stored, key),
                )
        return _json_response(201, stored)


def _order_body(order_id: int, key: str | None, payload: Mapping[str, Any]) -> dict[str, Any]:
    # The service's own fields win over same-named request fields.
    return {**payload, "id": f"ord_{order_id:06d}", "status": "created", "idempotency_key": key}


def install(router: respx.MockRouter, world: World, *, hold_in_flight: float = 0.0) -> OrderAPI:
    """Route every request to the order host through a new ``OrderAPI`` and return it."""
    api = OrderAPI(world, hold_in_flight=hold_in_flight)
    router.route(host=ORDERS_HOST).mock(side_effect=api.handle)
    return api
