"""The records of an agent's session as the agent itself wrote them, for ``crashmatrix doctor``
to plant faults into (a Tool Result written twice, a final answer torn in half, an argument
changed): the rawest layer the harness can honestly write.

Numbers are 1-based and are the ``line`` of the observed session's entries: the doctor finds
the entry it wants in the adapter's observation and writes that record. ``JsonlLines`` is a
JSONL file (seed 000's session, a kind-2/3 agent's own), ``SqliteRows`` the rows of a
one-column query. An adapter whose agent keeps its session somewhere else (a framework's
checkpoints) returns its own ``SessionRecords`` from ``session_records(case_dir)``; a fault
its store cannot hold is ``CannotPlant`` (``not_applicable=True`` when no agent could show it
there). A write cut short is a torn line in a file and a row never committed in SQLite, which
commits a row whole.

The same layer edits a saved tool call between lives (``tamper_arguments`` of a JSONL session
the agent keeps itself): every write is fsynced before it returns, since the next life (or
a power loss) comes after it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from crashmatrix.harness.core.session_log import Line, split_lines

__all__ = ["CannotPlant", "JsonlLines", "SessionRecords", "SqliteRows"]


class CannotPlant(Exception):
    """This fault cannot be written into this session; the message says why."""

    def __init__(self, why: str, *, not_applicable: bool = False) -> None:
        super().__init__(why)
        self.not_applicable = not_applicable


class SessionRecords(Protocol):
    def name(self) -> str:
        """What the records are, for the doctor's table (a file name, a table)."""
        ...

    def get(self, number: int) -> bytes:
        """The raw bytes of record ``number``."""
        ...

    def again(self, number: int) -> str:
        """Write record ``number`` a second time, right after itself; say where."""
        ...

    def replace(self, number: int, text: bytes) -> None:
        """Record ``number`` becomes ``text`` (same length for a JSONL line)."""
        ...

    def tear(self, number: int) -> str:
        """Cut the session in the middle of record ``number`` (the writer died mid-append)."""
        ...


@dataclass(frozen=True)
class JsonlLines:
    """A JSONL session: records are its lines."""

    path: Path

    def name(self) -> str:
        return self.path.name

    def get(self, number: int) -> bytes:
        data: bytes = self._lines()[number - 1].data
        return data

    def _lines(self) -> list[Line]:
        return split_lines(self.path, self.path.read_bytes())[0]

    def again(self, number: int) -> str:
        line = self._lines()[number - 1]
        data = self.path.read_bytes()
        self._write(data[: line.end] + line.data + b"\n" + data[line.end :])
        return f"{self.path.name} line {number} written again after itself"

    def replace(self, number: int, text: bytes) -> None:
        """Record ``number`` becomes ``text``; a longer or shorter line moves every later one."""
        line = self._lines()[number - 1]
        data = self.path.read_bytes()
        self._write(data[: line.offset] + text + data[line.offset + len(line.data) :])

    def _write(self, data: bytes) -> None:
        """The file becomes ``data``, durable before returning: the agent's next life reads it."""
        fd = os.open(self.path, os.O_WRONLY | os.O_TRUNC)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)

    def tear(self, number: int) -> str:
        line = self._lines()[number - 1]
        cut = line.offset + max(1, len(line.data) // 2)
        self._write(self.path.read_bytes()[:cut])
        return f"{self.path.name} cut at byte {cut}, half of line {number} (the final answer)"


@dataclass(frozen=True)
class SqliteRows:
    """A SQLite session read by ``SELECT <column> FROM <table> <rest>``: records are the
    query's rows, each the row of ``table`` with that rowid. ``parameters`` bind ``rest``'s
    placeholders (a session id)."""

    path: Path
    table: str
    column: str
    rest: str  # the query after its table: WHERE / ORDER BY
    parameters: tuple[object, ...] = ()

    def name(self) -> str:
        return f"{self.path.name} table {self.table}"

    def _rowid(self, number: int) -> tuple[int, bytes]:
        with contextlib.closing(sqlite3.connect(self.path)) as conn:
            query = f"SELECT rowid, {self.column} FROM {self.table} {self.rest}"
            rows = conn.execute(query, self.parameters).fetchall()
        rowid, value = rows[number - 1]
        return int(rowid), value.encode() if isinstance(value, str) else bytes(value)

    def get(self, number: int) -> bytes:
        return self._rowid(number)[1]

    def again(self, number: int) -> str:
        rowid, _ = self._rowid(number)
        with contextlib.closing(sqlite3.connect(self.path)) as conn, conn:
            keep = [r[1] for r in conn.execute(f"PRAGMA table_info({self.table})") if not r[5]]
            names = ", ".join(keep)
            conn.execute(
                f"INSERT INTO {self.table} ({names}) SELECT {names} FROM {self.table} WHERE rowid = ?",
                (rowid,),
            )
        return f"{self.name()}: row {number} inserted again"

    def replace(self, number: int, text: bytes) -> None:
        rowid, _ = self._rowid(number)
        with contextlib.closing(sqlite3.connect(self.path)) as conn, conn:
            conn.execute(f"UPDATE {self.table} SET {self.column} = ? WHERE rowid = ?", (text.decode(), rowid))

    def tear(self, number: int) -> str:
        """SQLite commits a row whole: what a writer killed mid-write leaves is the row never
        committed. Record ``number`` and every later one are deleted."""
        rowid, _ = self._rowid(number)
        with contextlib.closing(sqlite3.connect(self.path)) as conn:
            query = f"SELECT rowid FROM {self.table} {self.rest}"
            rowids = [int(r[0]) for r in conn.execute(query, self.parameters).fetchall()]
        later = rowids[rowids.index(rowid) :]
        with contextlib.closing(sqlite3.connect(self.path)) as conn, conn:
            conn.executemany(f"DELETE FROM {self.table} WHERE rowid = ?", [(r,) for r in later])
        return (
            f"{self.name()}: row {number} (the final answer) never committed: deleted, "
            f"{len(later) - 1} after it too"
        )
