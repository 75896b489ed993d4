"""A mocked HTTP mail service that honours ``Idempotency-Key``: the mail counterpart of
``order_api.OrderAPI``.

Base URL ``http://mail.crashmatrix.test`` (or the loopback server's, over real HTTP);
``MailAPI.handle`` answers, and the state lives in the world's SQLite::

    POST /emails    JSON {to, subject, body} (strings)                  -> 201 the email
                    optional Idempotency-Key: one email per key, whoever sends it
    GET  /emails?idempotency_key=K                                      -> 200 the email, or 404

An email is one ``outbox`` row and one ``email`` event committed in ONE transaction, the
same shape ``outbox.send_email`` (the in-process tool) writes, so a world counts emails the
same way whichever path sent them. Without a key every POST is one more email; with one,
the two-transaction claim/commit of ``mock_tools/idempotency.py`` applies (keys stored
under service ``emails``, apart from the order API's).

Headers: ``X-Tool-Name`` (default ``send_email``), ``X-Tool-Call-Id`` and ``X-Execution-Id``
end up on the event. Faults: a POST consumes ``world.take_fault(X-Tool-Name, X-Tool-Call-Id)``
as the order API does (``timeout_before`` -> ``httpx.ConnectTimeout``, nothing committed;
``response_lost`` -> committed, then ``httpx.ReadTimeout``; ``permission_denied`` -> 403).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from crashmatrix.mock_tools.idempotency import IdempotencyKeys, error_response, json_response
from crashmatrix.mock_tools.world import World

__all__ = ["EMAILS_PATH", "MAIL_BASE_URL", "MAIL_HOST", "MailAPI"]

MAIL_HOST = "mail.crashmatrix.test"
MAIL_BASE_URL = f"http://{MAIL_HOST}"
EMAILS_PATH = "/emails"
_DEFAULT_TOOL = "send_email"
_FIELDS = ("to", "subject", "body")


class MailAPI:
    """The mail service. ``hold_in_flight`` / ``on_in_flight`` are test hooks that run
    between tx1 and tx2, as in ``OrderAPI``."""

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
        self._keys = IdempotencyKeys(world, "emails")

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.rstrip("/") != EMAILS_PATH:
            return error_response(404, "not_found", f"no route {request.method} {request.url.path}")
        # A lookup consumes a fault only when it names its own tool: a fault armed for
        # send_email is meant for sending.
        tool = request.headers.get("X-Tool-Name", _DEFAULT_TOOL if request.method == "POST" else "")
        fault = (
            self.world.take_fault(
                tool,
                request.headers.get("X-Tool-Call-Id"),
                execution_id=request.headers.get("X-Execution-Id"),
            )
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
            response = self._send(request)
        elif request.method == "GET":
            response = self._lookup(request)
        else:
            response = error_response(
                405, "method_not_allowed", f"{request.method} {EMAILS_PATH} is not supported"
            )
        if fault == "response_lost":
            # Everything above is committed; only the answer disappears on the way back.
            raise httpx.ReadTimeout("injected fault: the response was lost", request=request)
        return response

    # -- GET /emails?idempotency_key=K ------------------------------------------------------

    def _lookup(self, request: httpx.Request) -> httpx.Response:
        key = request.url.params.get("idempotency_key")
        if not key:
            return error_response(400, "missing_parameter", "query parameter idempotency_key is required")
        row = (
            self.world.read()
            .execute("SELECT * FROM outbox WHERE idempotency_key = ? ORDER BY id LIMIT 1", (key,))
            .fetchone()
        )
        if row is None:
            return error_response(404, "not_found", f"no email with idempotency key {key!r}")
        return json_response(200, _email_body(row["id"], row["to_addr"], row["subject"], key))

    # -- POST /emails -----------------------------------------------------------------------

    def _send(self, request: httpx.Request) -> httpx.Response:
        try:
            payload = json.loads(request.content or b"null")
        except ValueError:
            return error_response(400, "invalid_json", "the request body is not JSON")
        if not isinstance(payload, dict) or not all(isinstance(payload.get(f), str) for f in _FIELDS):
            return error_response(
                400, "invalid_body", "the request body must be a JSON object with string to, subject, body"
            )
        key = request.headers.get("Idempotency-Key") or None

        def insert_email(conn: sqlite3.Connection) -> Mapping[str, Any]:
            return self._insert_email(conn, request, payload, key)

        return self._keys.run(
            key, payload, insert_email, hold_in_flight=self.hold_in_flight, on_in_flight=self.on_in_flight
        )

    def _insert_email(
        self, conn: sqlite3.Connection, request: httpx.Request, payload: Mapping[str, Any], key: str | None
    ) -> dict[str, Any]:
        """The outbox row and its event, inside the caller's transaction (tx2); the event
        first and the row pointing at it, as ``outbox.send_email`` writes them."""
        to, subject, body = (str(payload[f]) for f in _FIELDS)
        tool_call_id = request.headers.get("X-Tool-Call-Id")
        execution_id = request.headers.get("X-Execution-Id")
        seq = self.world.record_event(
            conn,
            "email",
            request.headers.get("X-Tool-Name", _DEFAULT_TOOL),
            tool_call_id=tool_call_id,
            execution_id=execution_id,
            idempotency_key=key,
            detail={"to": to, "subject": subject},
        )
        email_id = conn.execute(
            "INSERT INTO outbox (to_addr, subject, body, tool_call_id, execution_id, seq, idempotency_key)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (to, subject, body, tool_call_id, execution_id, seq, key),
        ).lastrowid
        assert email_id is not None  # an INSERT into an AUTOINCREMENT table always has one
        return _email_body(email_id, to, subject, key)


def _email_body(email_id: int, to: str, subject: str, key: str | None) -> dict[str, Any]:
    return {
        "id": f"msg_{email_id:06d}",
        "to": to,
        "subject": subject,
        "status": "sent",
        "idempotency_key": key,
    }
