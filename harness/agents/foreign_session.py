"""A foreign agent's session read as our records: field and status vocabularies mapped (seed
000 and seed 004 out of the box), offsets of a normalised copy.

Where the session is, is pluggable (``SessionSource``): a JSONL file (seed 000's or 004's
shape, the default), the rows of a SQLite query (a framework's checkpointer, an agent's own
state database), any ``module:function`` that returns the records, or nowhere the harness
can read (``none``: the verdict then judges the conversation the model saw).

A between-lives ``tamper_arguments`` edits a saved tool call in the agent's own JSONL file
(``tamper_saved_arguments``), in the agent's encoding, where the same mapping finds it."""

from __future__ import annotations

import importlib
import json
import os
import sqlite3
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from crashmatrix.harness.agents.readonly_db import connect_readonly
from crashmatrix.harness.agents.session_records import JsonlLines
from crashmatrix.harness.core.ledger import TERMINAL, normalise_status
from crashmatrix.harness.core.records import Entry, MessageEntry, entry_from_json
from crashmatrix.harness.core.session_log import SessionLog, encode_line, split_lines
from crashmatrix.harness.errors import SessionCorruption

__all__ = [
    "FIELD_ALIASES",
    "AppendWatch",
    "LedgerMap",
    "SessionSource",
    "Tampered",
    "read_foreign",
    "read_foreign_session",
    "tamper_saved_arguments",
    "tamper_unreachable",
    "tear_last_line",
    "with_arguments",
]
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


@dataclass(frozen=True, slots=True)
class SessionSource:
    """Where and how to read a foreign agent's session (the adapter file's ``session:``)."""

    kind: Literal["jsonl", "sqlite", "reader", "none"] = "jsonl"
    path: str = ""  # jsonl: the file; sqlite: the database; relative to the case workspace
    query: str = ""  # sqlite: rows in order; a one-column row is a JSON record, else its columns
    reader: str = ""  # "module:function": function(workspace: Path) -> iterable of records
    here: Path = Path()  # the adapter file's directory (where a reader module is found)
    ledger: LedgerMap = field(default_factory=LedgerMap)

    @property
    def readable(self) -> bool:
        return self.kind != "none"


def _normalised(
    path: Path, records: Sequence[tuple[int, Any]], mapping: LedgerMap
) -> tuple[list[Entry], list[bytes], list[int]]:
    entries: list[Entry] = []
    lines: list[bytes] = []
    ends: list[int] = []
    executions: dict[str, tuple[str, str, int]] = {}
    size = 0
    for number, raw in records:
        try:
            record = normalise_line(raw, mapping, executions)
            if record is not None:
                entry = entry_from_json(record, line=number)
                encoded = encode_line(entry.to_json())
                entries.append(entry)
                lines.append(encoded)
                size += len(encoded)
                ends.append(size)
        except ValueError as error:
            raise SessionCorruption(path, number, 0, str(error)) from error
    return entries, lines, ends


def _sqlite_records(path: Path, query: str) -> list[tuple[int, Any]]:
    if not path.exists():
        return []
    conn = connect_readonly(path)
    try:
        try:
            cursor = conn.execute(query)
            rows = cursor.fetchall()
        except sqlite3.OperationalError as error:
            if "no such table" in str(error):
                return []  # nothing saved yet
            raise SessionCorruption(path, 0, 0, f"the session query failed ({error})") from error
        names = [column[0] for column in cursor.description or ()]
    finally:
        conn.close()
    out: list[tuple[int, Any]] = []
    for number, row in enumerate(rows, start=1):
        if len(row) == 1 and isinstance(row[0], str | bytes):
            try:
                out.append((number, json.loads(row[0])))
            except ValueError as error:
                raise SessionCorruption(
                    path, number, 0, f"row {number} is not a JSON record ({error})"
                ) from error
        else:
            out.append((number, dict(zip(names, row, strict=True))))
    return out


def _reader_records(source: SessionSource, workspace: Path) -> list[tuple[int, Any]]:
    module_name, _, attr = source.reader.partition(":")
    if str(source.here) not in sys.path:
        sys.path.insert(0, str(source.here))  # a reader module beside the adapter file
    function = getattr(importlib.import_module(module_name), attr)
    return list(enumerate(function(workspace), start=1))


def read_foreign(source: SessionSource, workspace: Path) -> tuple[SessionLog, list[bytes]]:
    """The session ``source`` describes, as our ``SessionLog`` plus the normalised lines (the
    copy whose offsets the verdict and the world's ``session_bytes`` share)."""
    if source.kind == "jsonl":
        return read_foreign_session(workspace / source.path, source.ledger)
    where = workspace / source.path if source.path else Path(source.reader)
    if source.kind == "sqlite":
        records = _sqlite_records(where, source.query)
    elif source.kind == "reader":
        records = _reader_records(source, workspace)
    else:
        return SessionLog(where, ()), []
    entries, lines, ends = _normalised(where, records, source.ledger)
    return SessionLog(where, tuple(entries), None, ends[-1] if ends else 0, tuple(ends)), lines


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
    """crashmatrix's normalised copy, replaced whole (a temporary file renamed over it: a
    SIGKILL mid-write leaves the old copy or the new one). Never synced: a SIGKILL keeps what
    the page cache holds, and a power loss does not cut the copy (``harness.lives.power``
    tracks only its directory's existence: the next life rebuilds it from the agent's own
    session). Its two syncs were 3-6 ms of every tool call of a framework life on a busy disk."""
    target.parent.mkdir(parents=True, exist_ok=True)
    # Its own temporary: two writers at once (the requests of one life, two lives of a
    # double resume) would each rename the other's away.
    temporary = target.with_name(f"{target.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"".join(lines))
    finally:
        os.close(fd)
    os.replace(temporary, target)


# -- torn writes, done by a supervisor -------------------------------------------------------


class AppendWatch:
    """The lines a foreign agent appends to its JSONL session, seen at moments when it has
    done nothing since its last append: when it fsyncs the session (kind 2, in our process)
    and when one of its requests arrives at the loopback server (kind 3, blocked waiting).

    Only the LAST new line at such a moment is offered for tearing: a torn write means the
    writer died in that line, and nothing after it may have happened. A line followed, before
    the moment, by another line is not (what happened between the two is unknown)."""

    def __init__(self, path: Path, mapping: LedgerMap) -> None:
        self.path = path
        self.mapping = mapping
        self.seen = self._size()  # what earlier lives wrote is not this life's append

    def _size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0

    def last_new_line(self) -> bytes | None:
        """The normalised form (our vocabulary, what the tracer labels) of the last line
        appended since the previous call, if it is a ledger line or a Tool Result; else None."""
        try:
            with open(self.path, "rb") as stream:
                size = os.fstat(stream.fileno()).st_size
                if size <= self.seen:
                    self.seen = size  # nothing new, or the agent cut its file (a torn tail)
                    return None
                stream.seek(self.seen)
                new = stream.read(size - self.seen)
        except FileNotFoundError:
            return None
        if not new.endswith(b"\n"):
            return None  # a line still being written: not a moment to tear it
        self.seen = size
        last = new[:-1].rsplit(b"\n", 1)[-1]
        try:
            record = normalise_line(json.loads(last), self.mapping, {})
        except ValueError:
            return None  # not JSON, or a malformed ledger line: the judge reports it
        if record is None:
            return None
        return json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"


def tear_last_line(path: Path) -> tuple[int, int] | None:
    """After the writer's death: cut the file's last line in half, as if the writer had died
    in the middle of writing it (the first ``max(1, len // 2)`` bytes of the line stay, the
    rule ``harness.lives.tracer`` tears a native agent's line by). Returns (where the line
    starts, bytes kept of it), or None when the file has no complete last line to tear."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    if not data.endswith(b"\n"):
        return None
    start = data.rfind(b"\n", 0, len(data) - 1) + 1
    line = data[start:]
    kept = max(1, len(line) // 2)
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, start + kept)
        os.fsync(fd)
    finally:
        os.close(fd)
    return start, kept


# -- tampered arguments, done between lives --------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tampered:
    """What a tamper did: for the edited line, (where it ended before the edit, bytes it grew
    by) in the normalised copy's coordinates (the world's ``session_bytes``), empty when
    nothing was edited; ``detail`` says what was edited, or precisely why nothing was."""

    shifts: tuple[tuple[int, int], ...]
    detail: str
    tool: str = ""  # the edited call's tool, as the agent names it
    before: str = ""  # its arguments as the session held them before the edit (JSON text)


def tamper_unreachable(source: SessionSource) -> str:
    """Why ``tamper_arguments`` cannot edit a saved tool call in this session ("" when it can:
    a JSONL file, whose lines the adapter's mapping reads)."""
    if source.kind == "sqlite":
        return (
            f"its session is a SQLite database ({source.path}): the harness edits a saved tool "
            "call's arguments only in a JSONL session file"
        )
    if source.kind == "reader":
        return f"its session is read by {source.reader}: the harness does not know which file to edit"
    if source.kind == "none":
        return "the harness cannot read its session (readable: false), so it cannot find the saved tool call"
    return ""


def _message_of(raw: Any, mapping: LedgerMap) -> dict[str, Any] | None:
    """The chat message inside a foreign line, the object itself (``normalise_line``'s rule)."""
    if not isinstance(raw, dict):
        return None
    kind = raw.get(mapping.type_field)
    if kind != mapping.message_type and not (kind is None and "role" in raw):
        return None
    message = raw.get("message")
    return message if isinstance(message, dict) else raw


def with_arguments(
    raw: bytes, mapping: LedgerMap, call_id: str, arguments: Mapping[str, Any]
) -> bytes | None:
    """The foreign line ``raw`` with tool call ``call_id``'s arguments replaced, in the agent's
    own encoding: a JSON string stays a JSON string (what a model sends), an object stays an
    object. None: the line holds no such call."""
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    message = _message_of(record, mapping)
    calls = message.get("tool_calls") if message is not None else None
    matching = [c for c in calls or () if isinstance(c, dict) and c.get("id") == call_id]
    if not matching or not all(isinstance(c.get("function"), dict) for c in matching):
        return None
    for call in matching:
        if isinstance(call["function"].get("arguments"), dict):
            call["function"]["arguments"] = dict(arguments)
        else:
            call["function"]["arguments"] = json.dumps(arguments, ensure_ascii=False)
    # Compact, like the lines of every agent we know; the agent reads it back with a JSON parser.
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _arguments_in(raw: bytes, mapping: LedgerMap, call_id: str) -> list[Any]:
    """The arguments of each tool call ``call_id`` in the foreign line ``raw``, parsed."""
    message = _message_of(json.loads(raw), mapping) or {}
    out: list[Any] = []
    for call in message.get("tool_calls") or ():
        if isinstance(call, dict) and call.get("id") == call_id:
            held = (call.get("function") or {}).get("arguments")
            try:
                out.append(json.loads(held) if isinstance(held, str) else held)
            except ValueError:
                out.append(held)
    return out


def _latest_call(log: SessionLog, call_id: str) -> int | None:
    """The index of the LATEST message entry holding tool call ``call_id``: providers reuse ids
    across turns, and an earlier turn's call is finished history."""
    for index in range(len(log.entries) - 1, -1, -1):
        entry = log.entries[index]
        if isinstance(entry, MessageEntry) and any(c.id == call_id for c in entry.message.tool_calls):
            return index
    return None


def tamper_saved_arguments(
    source: SessionSource,
    workspace: Path,
    call_id: str,
    arguments: Mapping[str, Any],
    shape: Callable[[str, Mapping[str, Any]], Mapping[str, Any]] | None = None,
) -> Tampered:
    """Someone edits the saved tool call ``call_id``'s arguments in the agent's own session
    (the harness, not the agent, does this, between its lives). The line is found through
    the adapter's mapping, rewritten through ``JsonlLines`` (fsynced before the next life) and
    read back: the edit acted only if the mapped session now holds those arguments.

    ``arguments`` are the scenario's, in the suite's names; ``shape(tool, arguments)`` puts
    them in the agent's (its ``catalogue:`` renames them, as the scripted model does), the
    tool being the saved call's, as the agent names it."""
    why = tamper_unreachable(source)
    if why:
        return Tampered((), why)
    path = workspace / source.path
    try:
        before, _ = read_foreign(source, workspace)
    except SessionCorruption as error:
        return Tampered((), f"the agent's session is unreadable ({error}): no saved tool call to edit")
    index = _latest_call(before, call_id)
    if index is None:
        return Tampered((), f"no saved tool call {call_id} in {path.name}")
    entry = before.entries[index]
    assert isinstance(entry, MessageEntry)
    [call, *_] = [c for c in entry.message.tool_calls if c.id == call_id]
    records = JsonlLines(path)
    arguments = dict(shape(call.name, arguments) if shape is not None else arguments)
    edited = with_arguments(records.get(entry.line), source.ledger, call_id, arguments)
    if edited is None:
        return Tampered((), f"{path.name} line {entry.line} holds {call_id} in no form the harness can edit")
    records.replace(entry.line, edited)
    after, _ = read_foreign(source, workspace)
    held = _arguments_in(records.get(entry.line), source.ledger, call_id)
    if not held or any(value != arguments for value in held):
        return Tampered((), f"{path.name} line {entry.line}: the edit of {call_id}'s arguments did not hold")
    old_end = before.offsets[index]
    return Tampered(
        ((old_end, after.offsets[index] - old_end),),
        f"edited the saved arguments of {call_id} in {path.name} line {entry.line}",
        call.name,
        call.arguments,
    )
