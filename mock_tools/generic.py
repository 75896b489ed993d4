"""Tools declared entirely in YAML (``mock:`` in a contract), so a new tool needs no Python.

* ``record_row``: insert the arguments as a row of ``table`` (+ a ``row`` event, one
  transaction). With ``honours_idempotency_key`` the service deduplicates on the runtime's
  key: a second call returns the first row (``replayed: true``) and inserts nothing.
* ``lookup_row``: find the row of ``table`` written with ``arguments.idempotency_key``; this
  is the ``reconcile.lookup_tool`` of a ``record_row`` tool.
* ``read_only``: return the contract's ``result`` constants.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

from crashmatrix.harness.core.contracts import MockSpec
from crashmatrix.harness.core.tools import ToolObservation
from crashmatrix.mock_tools.calls import Call, invalid

__all__ = ["RESERVED_RESULT_KEYS", "run_generic"]

# Keys ``ToolObservation.to_result`` writes itself; a ``result`` constant with one of these names
# would overwrite the ledger's own ``status`` (say), so such constants are not copied.
RESERVED_RESULT_KEYS = frozenset({"ok", "status", "execution_id", "code", "content", "metadata"})


def _row(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "table": row["table_name"],
        "idempotency_key": row["idempotency_key"],
        "payload": json.loads(row["payload"]),
        "seq": row["seq"],
    }


def _canonical(payload: Mapping[str, Any]) -> str:
    return json.dumps(dict(payload), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _constants(spec: MockSpec) -> dict[str, Any]:
    return {key: value for key, value in spec.result.items() if key not in RESERVED_RESULT_KEYS}


def run_generic(call: Call, spec: MockSpec) -> ToolObservation:
    if spec.kind == "read_only":
        return ToolObservation(ok=True, data=_constants(spec))
    if spec.kind == "lookup_row":
        return _lookup(call, spec)
    return _record(call, spec)


def _record(call: Call, spec: MockSpec) -> ToolObservation:
    key = call.ctx.idempotency_key
    payload = _canonical(call.arguments)
    with call.world.transaction() as conn:
        if spec.honours_idempotency_key:
            existing = conn.execute(
                "SELECT * FROM rows WHERE table_name = ? AND idempotency_key = ? ORDER BY id LIMIT 1",
                (spec.table, key),
            ).fetchone()
            if existing is not None:
                if _canonical(json.loads(existing["payload"])) != payload:
                    # As the order API's 422: one key names one business action, never two.
                    return ToolObservation(
                        ok=False,
                        code="ARGUMENTS_MISMATCH",
                        content=f"{call.name}: idempotency key {key!r} was already used with other arguments",
                    )
                return ToolObservation(
                    ok=True, data={**_constants(spec), "row": _row(existing), "replayed": True}
                )
        seq = call.world.record_event(
            conn,
            "row",
            call.name,
            **call.event_ids(),
            detail={"table": spec.table, "payload": dict(call.arguments)},
        )
        row_id = conn.execute(
            "INSERT INTO rows (table_name, idempotency_key, payload, seq) VALUES (?, ?, ?, ?)",
            (spec.table, key, payload, seq),
        ).lastrowid
        row = conn.execute("SELECT * FROM rows WHERE id = ?", (row_id,)).fetchone()
    return ToolObservation(ok=True, data={**_constants(spec), "row": _row(row), "replayed": False})


def _lookup(call: Call, spec: MockSpec) -> ToolObservation:
    key = call.arguments.get("idempotency_key")
    if not isinstance(key, str) or not key:
        return invalid(f"{call.name}: argument 'idempotency_key' (a non-empty string) is required")
    row = (
        call.world.read()
        .execute(
            "SELECT * FROM rows WHERE table_name = ? AND idempotency_key = ? ORDER BY id LIMIT 1",
            (spec.table, key),
        )
        .fetchone()
    )
    return ToolObservation(
        ok=True,
        data={**_constants(spec), "found": row is not None, "row": _row(row) if row is not None else None},
    )
