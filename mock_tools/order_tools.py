"""The client side of the order API: ``create_order``, ``create_order_unkeyed``,
``get_order_by_idempotency_key``.

These tools do not consume faults themselves: the service does (``order_api``), because a
lost response is something that happens on the wire, after the service committed. A
tool-side fault (``calls.FaultyHttp``) reaches them as httpx's own exceptions and answers; a
request sent without a readable answer -- the connection dropped, the answer timed out, a
2xx whose body is not the JSON object promised -- is ``calls.answer_lost``'s to word.
"""

from __future__ import annotations

from typing import Any

import httpx

import crashmatrix.mock_tools.calls as calls
from crashmatrix.harness.core.tools import ToolObservation
from crashmatrix.mock_tools.calls import Call, tool_error
from crashmatrix.mock_tools.order_api import BASE_URL

__all__ = ["create_order", "create_order_unkeyed", "get_order_by_idempotency_key"]


def _headers(call: Call) -> dict[str, str]:
    return {
        "X-Tool-Name": call.name,
        "X-Tool-Call-Id": call.ctx.tool_call_id,
        "X-Execution-Id": call.ctx.execution_id,
    }


def _error_message(response: httpx.Response) -> str:
    try:
        body: Any = response.json()
        return str(body["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200]


def _json_object(response: httpx.Response) -> dict[str, Any]:
    """The response's body as the JSON object it must be (ValueError: it is not one)."""
    body = response.json()
    if not isinstance(body, dict):
        raise ValueError(f"the answer is JSON {type(body).__name__}, not the object promised")
    return body


def _post_order(call: Call, *, keyed: bool) -> ToolObservation:
    headers = _headers(call)
    if keyed:
        # The key comes from the runtime (seed 004: never from the model), so a retry of the
        # same business action carries the same key and the service can deduplicate it.
        headers["Idempotency-Key"] = call.ctx.idempotency_key
    try:
        response = call.http.post(f"{BASE_URL}/orders", json=dict(call.arguments), headers=headers)
    except httpx.ConnectTimeout:
        return ToolObservation(
            ok=False,
            code="TIMEOUT",
            retryable=True,
            content=(
                f"{call.name}: the connection timed out before the request was sent; "
                "no order was created. Retrying is safe."
            ),
        )
    except httpx.TransportError as error:
        # ReadTimeout, a dropped connection and anything else after the request left: the
        # order may exist. (By module: a mutant swaps answer_lost for a broken one.)
        return calls.answer_lost(call, error, side_effecting=True)
    status = response.status_code
    if status in (200, 201):
        replayed = response.headers.get("Idempotent-Replayed") == "true"
        try:
            order = _json_object(response)
        except ValueError as error:  # the status says created, the body says nothing readable
            return calls.answer_lost(call, error, side_effecting=True)
        return ToolObservation(ok=True, data={"order": order, "replayed": replayed})
    message = _error_message(response)
    if status == 422:
        return ToolObservation(ok=False, code="ARGUMENTS_MISMATCH", content=f"{call.name}: {message}")
    if status == 409:
        return ToolObservation(ok=False, code="CONFLICT", retryable=True, content=f"{call.name}: {message}")
    if status == 403:
        return ToolObservation(ok=False, code="PERMISSION_DENIED", content=f"{call.name}: {message}")
    return tool_error(f"{call.name}: the order service answered {status}: {message}")


def create_order(call: Call) -> ToolObservation:
    return _post_order(call, keyed=True)


def create_order_unkeyed(call: Call) -> ToolObservation:
    return _post_order(call, keyed=False)


def get_order_by_idempotency_key(call: Call) -> ToolObservation:
    key = str(call.arguments["idempotency_key"])
    try:
        response = call.http.get(
            f"{BASE_URL}/orders", params={"idempotency_key": key}, headers=_headers(call)
        )
    except httpx.TransportError as error:
        return calls.answer_lost(call, error, side_effecting=False)
    if response.status_code == 200:
        try:
            order = _json_object(response)
        except ValueError as error:
            return calls.answer_lost(call, error, side_effecting=False)
        return ToolObservation(ok=True, data={"found": True, "order": order})
    if response.status_code == 404:
        return ToolObservation(ok=True, data={"found": False, "order": None})
    if response.status_code == 403:
        return ToolObservation(
            ok=False, code="PERMISSION_DENIED", content=f"{call.name}: {_error_message(response)}"
        )
    return tool_error(f"{call.name}: the order service answered {response.status_code}")
