"""``Idempotency-Key`` handling shared by the mocked HTTP services (Stripe / IETF draft).

``OrderAPI`` (``POST /orders``) and ``MailAPI`` (``POST /emails``) both run a keyed request
in two transactions, as a real service would::

    tx1  claim the key: insert (key, payload hash, 'in_flight', owner pid)   -> commit
         ... the service does its work (``hold_in_flight`` stretches this window) ...
    tx2  check the claim is still ours; the effect (its rows + event); mark the key
         'completed' with the response                                        -> commit

A second request with the same key sees, in tx1: ``completed`` -> the stored response is
replayed (200, ``Idempotent-Replayed: true``); a different payload -> 422; ``in_flight``
with a live owner -> 409; ``in_flight`` whose owner process is dead -> it takes the claim
over (the owner died between tx1 and tx2, so nothing was committed: tx2 is atomic).

Keys live in the world's ``idempotency`` table under their service (``orders``,
``emails``; the primary key is the pair): a key is the client's name for one request to
one service, so the same string sent to two services names two requests and must not
replay one as the other.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from crashmatrix.mock_tools.world import World

__all__ = [
    "Effect",
    "IdempotencyKeys",
    "error_response",
    "json_response",
    "payload_sha256",
]

# The work a request does inside tx2: write its rows and event on ``conn`` (the caller's
# transaction) and return the response body.
Effect = Callable[[sqlite3.Connection], Mapping[str, Any]]


def json_response(
    status: int, body: Mapping[str, Any] | str, headers: Mapping[str, str] | None = None
) -> httpx.Response:
    """A JSON response; ``body`` may be stored JSON text, replayed byte for byte."""
    text = body if isinstance(body, str) else _dumps(body)
    return httpx.Response(
        status,
        content=text.encode("utf-8"),
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def error_response(status: int, code: str, message: str) -> httpx.Response:
    """The services' error shape: ``{"error": {"code": ..., "message": ...}}``."""
    return json_response(status, {"error": {"code": code, "message": message}})


def payload_sha256(payload: Mapping[str, Any]) -> str:
    """The fingerprint the service compares for a reused key (canonical JSON, sorted keys)."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _dumps(body: Mapping[str, Any]) -> str:
    return json.dumps(dict(body), sort_keys=True, ensure_ascii=False)


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


@dataclass(frozen=True, slots=True)
class _Claim:
    """This request's hold on a key between tx1 and tx2."""

    key: str
    token: str  # unique per request: tells our claim from one that took ours over


class IdempotencyKeys:
    """The ``Idempotency-Key`` machinery of one service: its rows of the ``idempotency``
    table are those whose ``service`` column is ``service``."""

    def __init__(self, world: World, service: str) -> None:
        self.world = world
        self.service = service

    def run(
        self,
        key: str | None,
        payload: Mapping[str, Any],
        effect: Effect,
        *,
        hold_in_flight: float = 0.0,
        on_in_flight: Callable[[str], None] | None = None,
    ) -> httpx.Response:
        """Answer one POST: ``effect`` runs at most once per key (201), or not at all when
        the key decides otherwise (200 replay, 409, 422). ``hold_in_flight`` and
        ``on_in_flight(key)`` run between tx1 and tx2 (test hooks)."""
        if not key:
            # Without a key the service cannot recognise a retry: every request is an effect.
            with self.world.transaction() as conn:
                stored = _dumps(effect(conn))
            return json_response(201, stored)
        claimed = self._claim(key, payload_sha256(payload))
        if isinstance(claimed, httpx.Response):
            return claimed
        try:
            if hold_in_flight > 0:
                time.sleep(hold_in_flight)
            if on_in_flight is not None:
                on_in_flight(key)
            return self._complete(claimed, effect)
        except BaseException:
            # An ordinary error (not a process death) must not leave the key claimed forever
            # by a live process: release the claim so a retry can proceed.
            with self.world.transaction() as conn:
                conn.execute(
                    "DELETE FROM idempotency WHERE service = ? AND key = ? AND owner_token = ?"
                    " AND state = 'in_flight'",
                    (self.service, claimed.key, claimed.token),
                )
            raise

    def _claim(self, key: str, digest: str) -> _Claim | httpx.Response:
        """tx1: the claim, or the answer that makes the request stop here."""
        claim = _Claim(key, uuid.uuid4().hex)
        me, started = os.getpid(), _process_start(os.getpid())
        with self.world.transaction() as conn:
            row = conn.execute(
                "SELECT * FROM idempotency WHERE service = ? AND key = ?", (self.service, key)
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO idempotency (service, key, payload_sha256, state, response, owner_pid,"
                    " owner_started, owner_token) VALUES (?, ?, ?, 'in_flight', NULL, ?, ?, ?)",
                    (self.service, key, digest, me, started, claim.token),
                )
            elif row["payload_sha256"] != digest:
                return error_response(
                    422,
                    "idempotency_key_reused",
                    "this Idempotency-Key was already used with a different request body",
                )
            elif row["state"] == "completed":
                # Replay the stored bytes, not a re-rendering: the IETF draft asks for the
                # original response, and a test can compare bodies exactly.
                return json_response(200, row["response"], {"Idempotent-Replayed": "true"})
            elif _owner_alive(row["owner_pid"], row["owner_started"]):
                return error_response(
                    409, "request_in_progress", "a request with this Idempotency-Key is in progress"
                )
            else:
                conn.execute(
                    "UPDATE idempotency SET owner_pid = ?, owner_started = ?, owner_token = ?"
                    " WHERE service = ? AND key = ?",
                    (me, started, claim.token, self.service, key),
                )
        return claim

    def _complete(self, claim: _Claim, effect: Effect) -> httpx.Response:
        """tx2: the effect and the stored response, if the claim is still ours."""
        with self.world.transaction() as conn:
            owner = conn.execute(
                "SELECT owner_token, state FROM idempotency WHERE service = ? AND key = ?",
                (self.service, claim.key),
            ).fetchone()
            if owner is None or owner["owner_token"] != claim.token or owner["state"] != "in_flight":
                # Someone took the claim over (we were presumed dead): do not add a second effect.
                return error_response(409, "request_in_progress", "this request lost its claim on the key")
            stored = _dumps(effect(conn))
            conn.execute(
                "UPDATE idempotency SET state = 'completed', response = ? WHERE service = ? AND key = ?",
                (stored, self.service, claim.key),
            )
        return json_response(201, stored)
