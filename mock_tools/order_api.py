"""A mocked HTTP order service that honours ``Idempotency-Key`` (Stripe / IETF draft).

Base URL ``http://orders.crashmatrix.test``; respx routes requests to ``OrderAPI.handle``
and the state lives in the world's SQLite, so it survives the agent process. The loopback
server (``harness/agents/loopback.py``) serves the same handler over real HTTP.

``POST /orders`` with a key runs in two transactions, as a real service would::

    tx1  claim the key: insert (key, payload hash, 'in_flight', owner pid)     -> commit
         ... the service does its work (``hold_in_flight`` stretches this window) ...
    tx2  insert the order + its event, mark the key 'completed' with the response -> commit

A second request with the same key sees, in tx1: ``completed`` -> the stored response is
replayed (200, ``Idempotent-Replayed: true``); a different payload -> 422; ``in_flight``
with a live owner -> 409; ``in_flight`` whose owner process is dead -> it takes the claim
over (the owner died between tx1 and tx2, so no order was committed: tx2 is atomic).
That machinery is ``mock_tools/idempotency.py``, shared with the mail API; order keys are
the ``idempotency`` table's rows of service ``orders``.

Faults: the handler consumes ``world.take_fault(X-Tool-Name, X-Tool-Call-Id)``.
``timeout_before`` raises ``httpx.ConnectTimeout`` before anything is committed;
``response_lost`` lets the request complete and then raises ``httpx.ReadTimeout``;
``permission_denied`` answers 403.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import respx

from crashmatrix.mock_tools.idempotency import (
    IdempotencyKeys,
    error_response,
    json_response,
    payload_sha256,
)
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
        self._keys = IdempotencyKeys(world, "orders")

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.rstrip("/")
        if path != "/orders":
            return error_response(404, "not_found", f"no route {request.method} {request.url.path}")
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
            return error_response(403, "permission_denied", "the caller may not do this")
        if request.method == "POST":
            response = self._create(request)
        elif request.method == "GET":
            response = self._lookup(request)
        else:
            response = error_response(405, "method_not_allowed", f"{request.method} /orders is not supported")
        if fault == "response_lost":
            # Everything above is committed; only the answer disappears on the way back.
            raise httpx.ReadTimeout("injected fault: the response was lost", request=request)
        return response

    # -- GET /orders?idempotency_key=K ------------------------------------------------------

    def _lookup(self, request: httpx.Request) -> httpx.Response:
        key = request.url.params.get("idempotency_key")
        if not key:
            return error_response(400, "missing_parameter", "query parameter idempotency_key is required")
        row = (
            self.world.read()
            .execute("SELECT * FROM orders WHERE idempotency_key = ? ORDER BY id LIMIT 1", (key,))
            .fetchone()
        )
        if row is None:
            return error_response(404, "not_found", f"no order with idempotency key {key!r}")
        return json_response(200, _order_body(row["id"], key, json.loads(row["payload"])))

    # -- POST /orders -----------------------------------------------------------------------

    def _create(self, request: httpx.Request) -> httpx.Response:
        try:
            payload = json.loads(request.content or b"null")
        except ValueError:
            return error_response(400, "invalid_json", "the request body is not JSON")
        if not isinstance(payload, dict):
            return error_response(400, "invalid_body", "the request body must be a JSON object")
        key = request.headers.get("Idempotency-Key") or None

        def insert_order(conn: sqlite3.Connection) -> Mapping[str, Any]:
            return self._insert_order(conn, request, payload, key)

        return self._keys.run(
            key, payload, insert_order, hold_in_flight=self.hold_in_flight, on_in_flight=self.on_in_flight
        )

    def _insert_order(
        self, conn: sqlite3.Connection, request: httpx.Request, payload: Mapping[str, Any], key: str | None
    ) -> dict[str, Any]:
        """The order and its event, inside the caller's transaction (tx2)."""
        tool = request.headers.get("X-Tool-Name", _DEFAULT_TOOL)
        tool_call_id = request.headers.get("X-Tool-Call-Id")
        execution_id = request.headers.get("X-Execution-Id")
        order_id = conn.execute(
            "INSERT INTO orders (idempotency_key, payload, tool_call_id, execution_id, seq)"
            " VALUES (?, ?, ?, ?, 0)",
            (key, json.dumps(payload, sort_keys=True, ensure_ascii=False), tool_call_id, execution_id),
        ).lastrowid
        assert order_id is not None
        body = _order_body(order_id, key, payload)
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
        return body


def _order_body(order_id: int, key: str | None, payload: Mapping[str, Any]) -> dict[str, Any]:
    # The service's own fields win over same-named request fields.
    return {**payload, "id": f"ord_{order_id:06d}", "status": "created", "idempotency_key": key}


def install(router: respx.MockRouter, world: World, *, hold_in_flight: float = 0.0) -> OrderAPI:
    """Route every request to the order host through a new ``OrderAPI`` and return it."""
    api = OrderAPI(world, hold_in_flight=hold_in_flight)
    router.route(host=ORDERS_HOST).mock(side_effect=api.handle)
    return api
