"""A foreign agent's session read as our records: field and status vocabularies mapped (seed
000 and seed 004 out of the box), offsets of a normalised copy."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.ledger import TERMINAL, normalise_status
from crashmatrix.harness.core.records import Entry, entry_from_json
from crashmatrix.harness.core.session_log import SessionLog, encode_line, split_lines
from crashmatrix.harness.errors import SessionCorruption
from crashmatrix.harness.session_file import fsync_directory

__all__ = ["FIELD_ALIASES", "LedgerMap", "read_foreign_session"]
# Seed 004's ledger entry (callId, stepId, toolName, inputHash, idempotencyKey) and common
# camelCase spellings of seed 000's fields; the YAML's ``fields`` are applied first.
FIELD_ALIASES: Mapping[str, str] = {
    "callId": "tool_call_id",
    "toolCallId": "tool_call_id",
    "stepId": "execution_id",
    "executionId": "execution_id",
    "toolName": "tool_name",
    "inputHash": "arguments_sha256",
    "argumentsSha256": "arguments_sha256",
    "idempotencyKey": "idempotency_key",
}
_OURS = (
    "execution_id",
    "tool_call_id",
    "status",
    "tool_name",
    "idempotency_key",
    "arguments_sha256",
    "result",
)


# -- the adapter file ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LedgerMap:
    """How to read a foreign session's lines as our records."""

    type_field: str = "type"
    message_type: str = "message"
    ledger_type: str = "tool_execution"
    fields: Mapping[str, str] = field(default_factory=dict)
    statuses: Mapping[str, str] = field(default_factory=dict)


# -- foreign sessions ----------------------------------------------------------------------


def _ledger_record(
    raw: Mapping[str, Any], mapping: LedgerMap, executions: dict[str, tuple[str, str, int]]
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_execution"}
    extra: dict[str, Any] = {}
    for key, value in raw.items():
        if key == mapping.type_field:
            continue
        ours = mapping.fields.get(key) or FIELD_ALIASES.get(key) or key
        if ours in _OURS:
            out[ours] = value
        else:
            extra[key] = value
    if "tool_call_id" not in out or "status" not in out:
        raise ValueError("ledger line has no tool call id or status; map its fields under session.fields")
    call_id = str(out["tool_call_id"])
    status = normalise_status(str(out["status"]), mapping.statuses)
    out["status"] = status
    current, previous, count = executions.get(call_id, ("", "", 0))
    if "execution_id" in out:
        current = str(out["execution_id"])
    elif not current or previous in TERMINAL:
        # No attempt id (seed 004 has none of its own): a new attempt starts after a terminal
        # status, the way our ledger gives a retry a new execution_id.
        count += 1
        current = f"{call_id}#{count}"
    out["execution_id"] = current
    executions[call_id] = (current, status, count)
    for key, value in extra.items():
        out.setdefault(key, value)
    return out


def normalise_line(
    raw: Any, mapping: LedgerMap, executions: dict[str, tuple[str, str, int]]
) -> dict[str, Any] | None:
    """One foreign JSON line as a record of ours, or None for a line we do not judge
    (the agent's own metadata). Raises ValueError for a ledger or message line that is
    malformed."""
    if not isinstance(raw, dict):
        return None
    kind = raw.get(mapping.type_field)
    if kind == mapping.ledger_type:
        return _ledger_record(raw, mapping, executions)
    if kind == mapping.message_type or (kind is None and "role" in raw):
        message = raw.get("message")
        if not isinstance(message, dict):
            message = {k: v for k, v in raw.items() if k != mapping.type_field}
        return {"type": "message", "message": message}
    if kind == "compaction":
        return dict(raw)
    return None


def read_foreign_session(path: Path, mapping: LedgerMap) -> tuple[SessionLog, list[bytes]]:
    """The foreign session as our ``SessionLog`` plus the normalised lines.

    Offsets are those of the normalised lines (the copy the judge reads), not of the foreign
    file. Torn final line: dropped and reported, as ``read_session`` does; a complete line
    that is not JSON is corruption, named by the foreign file's line."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return SessionLog(path, ()), []

    entries: list[Entry] = []
    lines: list[bytes] = []
    ends: list[int] = []
    executions: dict[str, tuple[str, str, int]] = {}
    size = 0
    complete, torn = split_lines(path, data)
    for line in complete:
        text = line.data.strip()
        if not text:
            continue
        try:
            raw = json.loads(text)
            record = normalise_line(raw, mapping, executions)
            if record is not None:
                entry = entry_from_json(record, line=line.number)
                encoded = encode_line(entry.to_json())
                entries.append(entry)
                lines.append(encoded)
                size += len(encoded)
                ends.append(size)
        except ValueError as error:
            raise SessionCorruption(path, line.number, line.offset, str(error)) from error
    return SessionLog(path, tuple(entries), torn, size, tuple(ends)), lines


def _write_copy(target: Path, lines: Sequence[bytes]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(target.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"".join(lines))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, target)
    fsync_directory(target.parent)
