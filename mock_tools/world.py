"""The durable, observable world a case's tool side effects land in.

A world is a directory that outlives the agent process::

    root/world.json      configuration (the agent's session path, for ``session_bytes``)
    root/world.sqlite    events, orders, outbox, releases, generic rows, idempotency, faults
    root/workspace/      the files the agent's file tools may touch

The harness runs in another process and COUNTS what happened afterwards: a second email
or order is a second row, however many times the agent crashed. Every side effect writes
an ``events`` row; where the effect itself is a SQLite row it is written in the SAME
transaction, so an effect without its event (or the reverse) cannot exist. A file effect
cannot share a transaction, so the file is written first and the event after: a crash in
between leaves an effect without an event, which the snapshot (hashes) still shows.

``session_bytes`` on each event is the size of the agent's session file at that moment, so
the harness can check that the ledger's ``running`` line was on disk BEFORE the effect.

SQLite runs in WAL mode (readers do not block writers) with ``synchronous=OFF``: a
committed transaction is in the OS's page cache when COMMIT returns, so it survives the
death of any process -- the failure this world models (the agent is SIGKILLed; the world
is the services it called, which stay up). Only an OS crash could lose commits, and no case
simulates one for the world: power-loss cases drop the AGENT's unsynced session bytes
(``harness/lives/power.py``), and the agent's own session is fsynced at every append.

Each ``World`` keeps one connection per (process, thread), opened on first use: opening one
costs more than the statement it runs (about a tenth of a life went to connect/close when
every operation had its own). Threads never share one (the order API is hit from many
threads at once), and a connection never crosses a fork: a forked child that uses a World
its parent opened gets its own connection and leaves the inherited one alone, never even
closing it: closing may checkpoint and clean up the parent's WAL (SQLite's rule: do not
carry an open connection across fork()). ``close()`` (or ``with World(...)``) closes this
process's connections; a life does not bother, its process dies with them.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from crashmatrix.harness.core.world_events import WorldEvent
from crashmatrix.harness.errors import HarnessError
from crashmatrix.mock_tools.faults import FaultSpec
from crashmatrix.mock_tools.fileops import append_durably, atomic_write, sha256_bytes, sha256_of_file
from crashmatrix.mock_tools.sandbox import resolve_in_workspace

__all__ = [
    "AUDIT_LOG",
    "EXTERNAL_TOOL",
    "World",
    "WorldEvent",
    "WorldSnapshot",
]

AUDIT_LOG = "audit.log"
EXTERNAL_TOOL = "(external)"
_AGENT_STATE = ".agent_state"
_NO_FILES: Mapping[str, str] = MappingProxyType({})
# Connections a forked child inherited from its parent: kept referenced, so that they are
# never closed (or garbage collected, which closes) in the child.
_INHERITED: list[sqlite3.Connection] = []

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    tool TEXT NOT NULL,
    tool_call_id TEXT,
    execution_id TEXT,
    idempotency_key TEXT,
    session_bytes INTEGER NOT NULL,
    detail TEXT NOT NULL,
    pid INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS faults (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tool TEXT NOT NULL,
    kind TEXT NOT NULL,
    tool_call_id TEXT,
    remaining INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS orders (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT,
    payload TEXT NOT NULL,
    tool_call_id TEXT,
    execution_id TEXT,
    seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS idempotency (
    -- Whose key: the same string sent to two services names two requests. 'orders' by
    -- default: a row written without a service is the order API's, its first user.
    service TEXT NOT NULL DEFAULT 'orders',
    key TEXT NOT NULL,
    payload_sha256 TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('in_flight', 'completed')),
    response TEXT,
    owner_pid INTEGER NOT NULL,
    owner_started TEXT,
    owner_token TEXT NOT NULL,
    PRIMARY KEY (service, key)
);
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    to_addr TEXT NOT NULL,
    subject TEXT NOT NULL,
    body TEXT NOT NULL,
    tool_call_id TEXT,
    execution_id TEXT,
    seq INTEGER NOT NULL,
    idempotency_key TEXT  -- the mail API's key (GET /emails?idempotency_key=); NULL otherwise
);
CREATE TABLE IF NOT EXISTS releases (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    version TEXT NOT NULL,
    command TEXT NOT NULL,
    tool_call_id TEXT,
    execution_id TEXT,
    seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rows (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    table_name TEXT NOT NULL,
    idempotency_key TEXT,
    payload TEXT NOT NULL,
    seq INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS rows_by_key ON rows (table_name, idempotency_key);
CREATE INDEX IF NOT EXISTS orders_by_key ON orders (idempotency_key);
CREATE INDEX IF NOT EXISTS outbox_by_key ON outbox (idempotency_key);
"""


@dataclass(frozen=True, slots=True)
class WorldSnapshot:
    """What the world looks like: workspace file hashes and row counts.

    ``counts`` has ``orders``, ``emails``, ``releases``, ``audit_lines``, ``events`` and one
    ``rows:<table>`` per generic table that has rows (a missing ``rows:`` key means zero).
    """

    files: Mapping[str, str]
    counts: Mapping[str, int]
    contents: Mapping[str, bytes] = field(default_factory=dict, repr=False, compare=False)

    def file_text(self, path: str) -> str | None:
        """The text of a workspace file at snapshot time, or None if it did not exist."""
        data = self.contents.get(path)
        return None if data is None else data.decode("utf-8", errors="replace")

    def to_json(self) -> dict[str, Any]:
        return {"files": dict(sorted(self.files.items())), "counts": dict(sorted(self.counts.items()))}


class World:
    """An existing world directory. ``World.create`` makes one."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        config_path = self.root / "world.json"
        try:
            self.config: Mapping[str, Any] = json.loads(config_path.read_text(encoding="utf-8"))
        except FileNotFoundError as error:
            raise HarnessError(
                f"{config_path}: no world here; create it first with World.create({self.root!s})"
            ) from error
        self.db_path = self.root / "world.sqlite"
        self.workspace = self.root / "workspace"
        session = self.config.get("session_path")
        # Relative to the world when it lives inside it: a world (a case directory) can be
        # copied or moved and still guard its own session file.
        self.session_path: Path | None = self.root / session if session else None
        self._pid = os.getpid()
        self._connections: dict[int, sqlite3.Connection] = {}  # by thread ident
        self._connections_lock = threading.Lock()

    def __enter__(self) -> World:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections this process opened (never a parent's, see the module doc)."""
        with self._connections_lock:
            self._adopt()
            connections, self._connections = self._connections, {}
        for conn in connections.values():
            conn.close()

    def _adopt(self) -> None:
        # Called with the lock held: in a forked child, set the parent's connections aside.
        if self._pid != os.getpid():
            _INHERITED.extend(self._connections.values())
            self._connections = {}
            self._pid = os.getpid()

    def _connection(self) -> sqlite3.Connection:
        """This process's and this thread's connection, opened on first use."""
        ident = threading.get_ident()
        with self._connections_lock:
            self._adopt()
            conn = self._connections.get(ident)
            if conn is None:
                conn = self._connections[ident] = self.connect()
        return conn

    @classmethod
    def create(
        cls,
        root: Path,
        *,
        session_path: Path | None = None,
        files: Mapping[str, str] = _NO_FILES,
        faults: Sequence[FaultSpec] = (),
    ) -> World:
        root = Path(root)
        if (root / "world.json").exists():
            raise HarnessError(f"{root}: a world already exists here; open it with World({root!s})")
        workspace = root / "workspace"
        workspace.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(root / "world.sqlite", isolation_level=None) as conn:
            # WAL is a property of the database file, so it is set once here.
            conn.execute("PRAGMA synchronous=OFF")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
        conn.close()
        session: str | None = None
        if session_path is not None:
            absolute = Path(session_path).absolute()
            inside = absolute.is_relative_to(root.absolute())
            session = str(absolute.relative_to(root.absolute()) if inside else absolute)
        config = {"version": 1, "session_path": session}
        # world.json is written last: its presence is what makes the directory a world.
        atomic_write(root / "world.json", json.dumps(config, indent=2).encode("utf-8"))
        world = cls(root)
        for relative, text in files.items():
            target = resolve_in_workspace(workspace, relative)
            atomic_write(target, text.encode("utf-8"))
        for spec in faults:
            world.add_fault(spec)
        # Closed, so the files on disk are the whole world (a template is copied as files).
        world.close()
        return world

    # -- plumbing ---------------------------------------------------------------------------

    @property
    def forbidden(self) -> tuple[Path, ...]:
        """Paths no tool may touch: the agent's session file and ``.agent_state/``."""
        paths = [self.workspace / _AGENT_STATE]
        if self.session_path is not None:
            paths.append(self.session_path)
        return tuple(paths)

    def resolve(self, relative: str) -> Path:
        """``relative`` inside the workspace, or SandboxViolation."""
        return resolve_in_workspace(self.workspace, relative, forbidden=self.forbidden)

    def connect(self) -> sqlite3.Connection:
        """A fresh autocommit connection that the caller closes. ``read`` and
        ``transaction`` reuse this World's own connection instead."""
        conn = sqlite3.connect(self.db_path, timeout=60.0, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        # Per connection, not per file. OFF: no process death can lose a commit (see the
        # module docstring). Each sync would only guard against an OS crash: FULL cost ~25
        # fdatasyncs per case (strace).
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA busy_timeout=60000")
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``: take the write lock up front, so a
        read-check-write cannot interleave with another writer's."""
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def read(self) -> sqlite3.Connection:
        """The connection to run reads on (autocommit: each statement sees what is committed)."""
        return self._connection()

    def session_bytes(self) -> int:
        """Size of the agent's session file now; -1 when not configured or missing."""
        if self.session_path is None:
            return -1
        try:
            return self.session_path.stat().st_size
        except OSError:
            return -1

    def record_event(
        self,
        conn: sqlite3.Connection,
        kind: str,
        tool: str,
        *,
        tool_call_id: str | None = None,
        execution_id: str | None = None,
        idempotency_key: str | None = None,
        detail: Mapping[str, Any] | None = None,
        session_bytes: int | None = None,
        pid: int | None = None,
    ) -> int:
        """Insert an event inside the caller's transaction; returns its ``seq``.

        ``session_bytes`` and ``pid`` default to now and this process: an effect found by
        probing the agent's own world passes the size known before it and the life's pid."""
        cursor = conn.execute(
            "INSERT INTO events (kind, tool, tool_call_id, execution_id, idempotency_key,"
            " session_bytes, detail, pid) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                kind,
                tool,
                tool_call_id,
                execution_id,
                idempotency_key,
                self.session_bytes() if session_bytes is None else session_bytes,
                json.dumps(dict(detail or {}), sort_keys=True, ensure_ascii=False),
                os.getpid() if pid is None else pid,
            ),
        )
        seq = cursor.lastrowid
        assert seq is not None  # an INSERT into an AUTOINCREMENT table always has one
        return seq

    def log_event(
        self,
        kind: str,
        tool: str,
        *,
        tool_call_id: str | None = None,
        execution_id: str | None = None,
        idempotency_key: str | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> int:
        """``record_event`` in its own transaction: for effects outside SQLite (files)."""
        with self.transaction() as conn:
            return self.record_event(
                conn,
                kind,
                tool,
                tool_call_id=tool_call_id,
                execution_id=execution_id,
                idempotency_key=idempotency_key,
                detail=detail,
            )

    # -- faults -----------------------------------------------------------------------------

    def add_fault(self, spec: FaultSpec) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO faults (tool, kind, tool_call_id, remaining) VALUES (?, ?, ?, ?)",
                (spec.tool, spec.kind, spec.tool_call_id, spec.times),
            )

    def take_fault(
        self, tool: str, tool_call_id: str | None, *, execution_id: str | None = None
    ) -> str | None:
        """Consume one armed fault matching this call and return its kind, or None.

        Consumed durably, so a fault that fired in one life does not fire again in the next.
        A fault bound to a tool_call_id takes precedence over a tool-wide one.
        """
        with self.transaction() as conn:
            row = conn.execute(
                "SELECT id, kind FROM faults WHERE tool = ? AND remaining > 0"
                " AND (tool_call_id IS NULL OR tool_call_id = ?)"
                " ORDER BY tool_call_id IS NULL, id LIMIT 1",
                (tool, tool_call_id),
            ).fetchone()
            if row is None:
                return None
            conn.execute("UPDATE faults SET remaining = remaining - 1 WHERE id = ?", (row["id"],))
            kind: str = row["kind"]
            self.record_event(
                conn,
                "fault",
                tool,
                tool_call_id=tool_call_id,
                execution_id=execution_id,
                detail={"fault": kind},
            )
            return kind

    # -- observation ------------------------------------------------------------------------

    def events(self, kind: str | None = None) -> list[WorldEvent]:
        """All events (or those of one kind) in ``seq`` order."""
        conn = self.read()
        if kind is None:
            rows = conn.execute("SELECT * FROM events ORDER BY seq").fetchall()
        else:
            rows = conn.execute("SELECT * FROM events WHERE kind = ? ORDER BY seq", (kind,)).fetchall()
        return [
            WorldEvent(
                seq=row["seq"],
                kind=row["kind"],
                tool=row["tool"],
                tool_call_id=row["tool_call_id"],
                execution_id=row["execution_id"],
                idempotency_key=row["idempotency_key"],
                session_bytes=row["session_bytes"],
                detail=json.loads(row["detail"]),
                pid=row["pid"],
            )
            for row in rows
        ]

    def snapshot(self) -> WorldSnapshot:
        files: dict[str, str] = {}
        contents: dict[str, bytes] = {}
        for directory, dirnames, filenames in os.walk(self.workspace, followlinks=False):
            base = Path(directory)
            # A symlink to a directory is listed in dirnames but not walked: record it as an entry.
            for name in sorted(filenames + [d for d in dirnames if (base / d).is_symlink()]):
                path = base / name
                relative = path.relative_to(self.workspace).as_posix()
                mode = os.lstat(path).st_mode
                if stat.S_ISLNK(mode):
                    data = b"symlink:" + os.fsencode(os.readlink(path))
                elif stat.S_ISREG(mode):
                    data = path.read_bytes()
                    contents[relative] = data
                else:
                    data = b"special:" + str(stat.S_IFMT(mode)).encode()
                files[relative] = sha256_bytes(data)
        conn = self.read()
        counts = {
            "orders": conn.execute("SELECT COUNT(*) FROM orders").fetchone()[0],
            "emails": conn.execute("SELECT COUNT(*) FROM outbox").fetchone()[0],
            "releases": conn.execute("SELECT COUNT(*) FROM releases").fetchone()[0],
            "events": conn.execute("SELECT COUNT(*) FROM events").fetchone()[0],
        }
        for row in conn.execute("SELECT table_name, COUNT(*) AS n FROM rows GROUP BY table_name"):
            counts[f"rows:{row['table_name']}"] = row["n"]
        audit = contents.get(AUDIT_LOG, b"")
        counts["audit_lines"] = len(audit.splitlines())
        return WorldSnapshot(files=files, counts=counts, contents=contents)

    # -- the harness's own hand -------------------------------------------------------------

    def external_write(self, path: str, content: str) -> None:
        """Someone other than the agent changes a workspace file (between crash and recovery)."""
        target = resolve_in_workspace(self.workspace, path)
        before = sha256_of_file(target)
        data = content.encode("utf-8")
        atomic_write(target, data)
        self.log_event(
            "external_write",
            EXTERNAL_TOOL,
            detail={"path": path, "base_sha256": before, "after_sha256": sha256_bytes(data)},
        )

    def external_append(self, path: str, content: str) -> None:
        """Someone else appends to a workspace file (e.g. another writer of ``audit.log``)."""
        target = resolve_in_workspace(self.workspace, path)
        append_durably(target, content.encode("utf-8"))
        self.log_event("external_write", EXTERNAL_TOOL, detail={"path": path, "appended": len(content)})
