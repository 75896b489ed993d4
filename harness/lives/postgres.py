"""A real PostgreSQL server for agents whose store is one (LangGraph's ``PostgresSaver``, the
Agents SDK's ``SQLAlchemySession``), and each case's own database on it.

The server (``ensure_server``): the team's own when ``CRASHMATRIX_POSTGRES_URL`` is set (an
admin URL: a role that may create and drop databases); otherwise a throwaway cluster made
with Debian's binaries (``initdb``, ``pg_ctl``, ``postgres``: on PATH or in
``/usr/lib/postgresql/<version>/bin``) in a temporary directory: trust authentication, a
Unix socket in that directory, TCP on a free port of 127.0.0.1. Its URL is exported as
``CRASHMATRIX_POSTGRES_URL``, so xdist workers, the fork server and every life started
after it inherit the server instead of starting their own. Durability is what is tested,
so ``fsync``, ``synchronous_commit`` and ``full_page_writes`` are on; only settings that do
not change what a crash can leave are turned for speed (small ``shared_buffers``, no
autovacuum). PostgreSQL refuses to run as root, and CI runs as root: then initdb and the
server run as the ``postgres`` user Debian's package creates, the directory chowned to it.

Never a postmaster left behind: the process that started the cluster stops it (``pg_ctl
stop -m immediate``, then the directory goes) at its exit and at pytest's session finish
(``stop_server``); the postmaster is its child and shuts down with it (SIGQUIT through
``PR_SET_PDEATHSIG``: start it from the thread that lives as long as the run) if that
process is SIGKILLed, and the next cluster started removes the directory such a run left
in ``$TMPDIR``. Processes forked from the owner (lives, the fork server) inherit its exit
handlers but never stop the server (the owner's pid is checked, as for world templates in
``harness.lives.casedir``).

A case's database (``case_database_url``): created on first use, named in
``case_dir/postgres.json``; the name is derived from the case directory's path (unique
across xdist workers, whose case directories differ) and from the run (``RUN_ENV``), so
two runs sharing a team's server never meet. A copy of a case directory gets its own copy
of the database (``copy_case_database``: ``CREATE DATABASE new TEMPLATE old``, once every
backend still attached to ``old`` is terminated: a SIGKILLed agent's backend may not have
noticed its client died yet); a removed case directory's databases are dropped
(``drop_case_databases``, best effort). At the end of the run every database the run made
goes: with the throwaway cluster, or dropped one by one on a team's server.

psycopg (3) is imported only here and only when a database is touched: crashmatrix without
a PostgreSQL store needs neither it nor the server.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import hashlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from crashmatrix.harness.errors import HarnessError

__all__ = [
    "ENV",
    "RECORD",
    "RUN_ENV",
    "PostgresUnavailable",
    "case_database_url",
    "copy_case_database",
    "drop_case_databases",
    "ensure_server",
    "ensure_servers",
    "find_binaries",
    "owns_server",
    "started_seconds",
    "stop_server",
]

ENV = "CRASHMATRIX_POSTGRES_URL"
# The run's token: every database the run makes is named ``cm_<token>_...``, so the run's
# owner can drop exactly its own on a team's server, and two runs there never collide.
RUN_ENV = "CRASHMATRIX_POSTGRES_RUN"
RECORD = "postgres.json"
INSTALL = "apt-get install postgresql"
_DEBIAN = Path("/usr/lib/postgresql")
_BINARIES = ("initdb", "pg_ctl", "postgres")
_PREFIX = "crashmatrix-postgres-"
_OWNER = "owner.pid"  # the pid that started the cluster in this directory
_PR_SET_PDEATHSIG = 1
# Seconds the server may take to accept connections (a loaded 2-core CI machine).
_START_WITHIN = 120.0
_PORT_TRIES = 3
# The settings the server runs with. fsync, synchronous_commit and full_page_writes are
# PostgreSQL's defaults, stated so that no postgresql.conf can turn a crash test into one
# of a server that acknowledges commits it may lose. The rest change speed and footprint
# only: a small buffer cache (one cluster per run, many small databases), no autovacuum
# (background work on 2 shared cores), dynamic shared memory as files in the data
# directory (nothing left in /dev/shm if the server is ever SIGKILLed).
SETTINGS = (
    ("fsync", "on"),
    ("synchronous_commit", "on"),
    ("full_page_writes", "on"),
    ("shared_buffers", "16MB"),
    ("max_connections", "200"),
    ("autovacuum", "off"),
    ("dynamic_shared_memory_type", "mmap"),
    ("logging_collector", "off"),
)


class PostgresUnavailable(HarnessError):
    """No PostgreSQL server can be had: one line naming what is missing and what to install."""


@dataclass(frozen=True)
class _Cluster:
    """A throwaway cluster this process started."""

    owner: int  # the pid that started it: only it stops the server
    directory: Path
    process: subprocess.Popen[bytes]
    pg_ctl: Path
    as_user: pwd.struct_passwd | None  # whom the server runs as, when we are root
    url: str
    seconds: float  # initdb + start, measured


_LOCK = threading.Lock()
# The servers named by CRASHMATRIX_POSTGRES_URL this process has reached once.
_reached: set[str] = set()
_cluster: _Cluster | None = None
# The run token this process made (with its pid), when it is the run's owner on a team's
# server: at the end it drops the databases named with it.
_own_run: tuple[int, str] | None = None


# ---------------------------------------------------------------------------- the server


def find_binaries(path: str | None = None, debian: Path | None = None) -> dict[str, Path]:
    """initdb, pg_ctl and postgres from one installation: the first directory of ``path``
    (default: $PATH) holding initdb, else Debian's newest ``/usr/lib/postgresql/N/bin``."""
    search = os.environ.get("PATH", "") if path is None else path
    debian = _DEBIAN if debian is None else debian
    found = shutil.which("initdb", path=search)
    candidates: list[Path] = []
    if found:
        candidates.append(Path(found).resolve().parent)  # Debian's PATH entries are symlinks
    versions = sorted(debian.glob("*/bin"), key=lambda p: _version(p.parent.name), reverse=True)
    candidates += versions
    for folder in candidates:
        binaries = {name: folder / name for name in _BINARIES}
        if all(os.access(b, os.X_OK) for b in binaries.values()):
            return binaries
    raise PostgresUnavailable(
        f"no PostgreSQL server binaries (initdb, pg_ctl, postgres) on PATH or in {debian}/*/bin: "
        f"{INSTALL} (or set {ENV} to an admin URL of a server of yours)"
    )


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as error:
        raise PostgresUnavailable(
            f"a PostgreSQL store needs psycopg (3): pip install 'psycopg[binary]' "
            f"(or crashmatrix's langgraph / openai-agents extra) ({error})"
        ) from error
    return psycopg


def ensure_server() -> str:
    """The admin URL of a running PostgreSQL: ``CRASHMATRIX_POSTGRES_URL`` when set (a team's
    server, or the cluster a parent process started), else a throwaway cluster started now
    and exported there. Raises ``PostgresUnavailable`` when none can be had."""
    global _own_run
    with _LOCK:
        _psycopg()  # the harness's side talks to the server through it: missing, say so first
        url = os.environ.get(ENV)
        if (
            not url
            and _cluster is not None
            and _cluster.owner == os.getpid()
            and _cluster.process.poll() is None
        ):
            url = os.environ[ENV] = _cluster.url  # ours, still running: exported again
        if not url:
            url = _start().url
            _reached.add(url)
        elif url not in _reached:
            with _admin():  # a team's server that cannot be reached: one line, now, not per case
                _reached.add(url)
        if not os.environ.get(RUN_ENV):
            token = secrets.token_hex(4)
            os.environ[RUN_ENV] = token
            if _cluster is None:  # a team's server: the run's own databases are dropped at its end
                _own_run = (os.getpid(), token)
                _register_stop()
        return url


def ensure_servers(adapter: object) -> None:
    """Start what the adapter says its agent's store needs (``servers``, e.g. ``("postgres",)``)."""
    if "postgres" in tuple(getattr(adapter, "servers", ())):
        ensure_server()


def owns_server() -> bool:
    """Whether this process started what ``stop_server`` would end: its own cluster, or the
    run on a team's server whose databases it drops."""
    pid = os.getpid()
    return (_cluster is not None and _cluster.owner == pid) or (_own_run is not None and _own_run[0] == pid)


def started_seconds() -> float | None:
    """How long this process took to make and start its throwaway cluster (initdb + start);
    None when it started none."""
    return None if _cluster is None else _cluster.seconds


def _as_user() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresUnavailable(
            "PostgreSQL refuses to run as root and there is no 'postgres' user to run it as: "
            f"{INSTALL} creates one (or run as another user, or set {ENV})"
        ) from None


def _run_as(user: pwd.struct_passwd | None) -> dict[str, Any]:
    if user is None:
        return {}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _cluster_base(user: pwd.struct_passwd | None) -> Path:
    """Where the cluster's directory goes: ``$TMPDIR``, or ``/tmp`` when the server runs as
    another user (``postgres``, under root) who could not reach a directory there: a
    ``$TMPDIR`` under root's own 0700 directory (pytest's basetemp, a container's
    ``/root/tmp``) made initdb fail with "could not change directory ... Permission denied"."""
    base = Path(tempfile.gettempdir())
    if user is None or _reachable(base, user) or not _reachable(Path("/tmp"), user):
        return base
    return Path("/tmp")


def _reachable(path: Path, user: pwd.struct_passwd) -> bool:
    """Whether ``user`` may pass through every directory down to ``path`` (search permission)."""
    for directory in (path.resolve(), *path.resolve().parents):
        try:
            status = directory.stat()
        except OSError:
            return False
        if status.st_uid == user.pw_uid:
            bit = stat.S_IXUSR
        elif status.st_gid == user.pw_gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not status.st_mode & bit:
            return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _start() -> _Cluster:
    global _cluster
    binaries = find_binaries()
    user = _as_user()
    started = time.monotonic()
    base = _cluster_base(user)
    _sweep(base)
    directory = Path(tempfile.mkdtemp(prefix=_PREFIX, dir=base))
    try:
        (directory / _OWNER).write_text(str(os.getpid()), encoding="ascii")
        if user is not None:
            os.chown(directory, user.pw_uid, user.pw_gid)
        data = directory / "data"
        # --no-sync: initdb's own files are not flushed before it returns (a power loss of
        # this machine is not what is tested, and the throwaway cluster would not survive
        # it anyway); the server itself runs with fsync on.
        _checked(
            [
                str(binaries["initdb"]),
                "-D",
                str(data),
                "--auth=trust",
                "--username=crashmatrix",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ],
            user,
            directory,
            "initdb",
        )
        # Every process of the cluster carries the directory's name in its title (``postgres:
        # crashmatrix-postgres-...: ...``): what was left running can be found by name.
        options = [f"-c{name}={value}" for name, value in (*SETTINGS, ("cluster_name", directory.name))]
        for attempt in range(_PORT_TRIES):
            # A free port now may be another process's by the time the server binds it: then
            # the server exits at once, and another port is tried.
            port = _free_port()
            url = f"postgresql://crashmatrix@127.0.0.1:{port}/postgres"
            cluster = _Cluster(
                os.getpid(),
                directory,
                _postmaster(binaries, data, port, options, user),
                binaries["pg_ctl"],
                user,
                url,
                0.0,
            )
            _cluster = cluster
            _register_stop()
            if _wait_ready(cluster, last=attempt == _PORT_TRIES - 1):
                break
        _cluster = cluster = replace(cluster, seconds=time.monotonic() - started)
    except BaseException:
        _stop_cluster()
        shutil.rmtree(directory, ignore_errors=True)
        raise
    os.environ[ENV] = url
    return cluster


def _postmaster(
    binaries: dict[str, Path], data: Path, port: int, options: list[str], user: pwd.struct_passwd | None
) -> subprocess.Popen[bytes]:
    directory = data.parent
    parent = os.getpid()
    with open(directory / "server.log", "ab") as log:  # the server's own, kept beside it
        return subprocess.Popen(
            [
                str(binaries["postgres"]),
                "-D",
                str(data),
                "-p",
                str(port),
                "-h",
                "127.0.0.1",
                "-k",
                str(directory),
                *options,
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=directory,
            start_new_session=True,  # a Ctrl-C at the terminal is the harness's, not the server's
            # Runs after the uid change (a changed uid would clear the request): the
            # postmaster shuts down with this process's thread even if it is SIGKILLed.
            preexec_fn=lambda: _quit_with_parent(parent),
            **_run_as(user),
        )


def _quit_with_parent(parent: int) -> None:
    """In the postmaster before it runs: the kernel sends it SIGQUIT (PostgreSQL's immediate
    shutdown: its backends go, its shared memory is released) when its parent dies. Not
    ``parent_death.die_with_parent``'s SIGKILL: a SIGKILLed postmaster leaves its backends
    to notice on their own and its System V segment behind."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGQUIT, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGQUIT)


def _sweep(base: Path) -> None:
    """Remove the directories of clusters whose owner was SIGKILLed (no exit handler ran; the
    postmaster went with it): the next run leaves ``$TMPDIR`` as a clean run would have."""
    for directory in base.glob(f"{_PREFIX}*"):
        try:
            owner = int((directory / _OWNER).read_text(encoding="ascii"))
        except (OSError, ValueError):
            continue  # not ours, or being made right now
        postmaster = directory / "data" / "postmaster.pid"
        try:
            server = int(postmaster.read_text(encoding="ascii").split()[0])
        except (OSError, ValueError, IndexError):
            server = None
        if not _alive(owner) and (server is None or not _alive(server)):
            shutil.rmtree(directory, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _checked(command: list[str], user: pwd.struct_passwd | None, cwd: Path, what: str) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, check=False, **_run_as(user))
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).decode(errors="replace").split())[-400:]
        raise PostgresUnavailable(f"{what} failed (exit {done.returncode}): {said}")


def _wait_ready(cluster: _Cluster, *, last: bool) -> bool:
    """True once the server accepts connections; False if it exited at once and this was not
    the ``last`` try (its port taken); otherwise ``PostgresUnavailable`` with its log's tail.

    Asked through the cluster's own Unix socket (in its directory), not the TCP port: a port
    taken first is another process's, and a connection there reaches that process (a
    listener that never answers held each try for the 5 s connect timeout; another
    PostgreSQL would have answered for ours). The postmaster opens its TCP socket before
    its Unix socket and exits if it cannot, so an answer here is ours on the URL's port too."""
    psycopg = _psycopg()
    own = {"host": str(cluster.directory), "port": urllib.parse.urlsplit(cluster.url).port}
    deadline = time.monotonic() + _START_WITHIN
    while True:
        try:
            psycopg.connect(user="crashmatrix", dbname="postgres", connect_timeout=5, **own).close()
            return True
        except psycopg.OperationalError:
            pass
        if cluster.process.poll() is not None and not last:
            return False
        if cluster.process.poll() is not None or time.monotonic() > deadline:
            log = cluster.directory / "server.log"
            tail = " ".join(log.read_text(errors="replace").split()[-60:]) if log.exists() else ""
            state = "exited" if cluster.process.poll() is not None else "did not accept connections"
            raise PostgresUnavailable(f"the PostgreSQL server {state} ({cluster.url}): {tail}")
        time.sleep(0.05)


_registered = False


def _register_stop() -> None:
    global _registered
    if not _registered:
        _registered = True
        atexit.register(stop_server)


def stop_server() -> None:
    """End what this process started: its throwaway cluster (``pg_ctl stop -m immediate``,
    then its directory), or on a team's server the databases its run made. A process that
    did not start them (a life or the fork server, forked from the owner) does nothing."""
    global _own_run
    with _LOCK:
        if _cluster is not None and _cluster.owner == os.getpid():
            url = _cluster.url
            _stop_cluster()
            if os.environ.get(ENV) == url:
                os.environ.pop(ENV, None)
                os.environ.pop(RUN_ENV, None)
        elif _own_run is not None and _own_run[0] == os.getpid():
            _drop_run(_own_run[1])
            _own_run = None
            os.environ.pop(RUN_ENV, None)


def _stop_cluster() -> None:
    global _cluster
    cluster, _cluster = _cluster, None
    if cluster is None or cluster.owner != os.getpid():
        return
    if cluster.process.poll() is None:
        # Immediate: nothing of a throwaway cluster needs a shutdown checkpoint.
        subprocess.run(
            [str(cluster.pg_ctl), "stop", "-D", str(cluster.directory / "data"), "-m", "immediate", "-w"],
            cwd=cluster.directory,
            capture_output=True,
            check=False,
            **_run_as(cluster.as_user),
        )
        try:
            cluster.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            cluster.process.kill()  # the postmaster's children exit when it is gone
            cluster.process.wait()
    shutil.rmtree(cluster.directory, ignore_errors=True)


# ---------------------------------------------------------------------------- case databases


def _server_url() -> str:
    url = os.environ.get(ENV)
    if url and not url.startswith(("postgresql://", "postgres://")):
        raise PostgresUnavailable(f"{ENV}={url!r}: write a URL, postgresql://USER@HOST:PORT/DATABASE")
    if not url:
        raise PostgresUnavailable(
            f"no PostgreSQL server for this run ({ENV} is unset): an adapter whose store is "
            "postgres declares servers = ('postgres',) so that crashmatrix starts one"
        )
    return url


def _database_url(name: str) -> str:
    """The server's URL with the database ``name`` in place of the admin's: a URL (not a
    libpq keyword string), since SQLAlchemy takes only URLs (``postgresql+psycopg://`` is
    the same URL with the driver named)."""
    server = urllib.parse.urlsplit(_server_url())
    return urllib.parse.urlunsplit(server._replace(path=f"/{name}"))


def _name_for(case_dir: Path) -> str:
    run = os.environ.get(RUN_ENV) or "norun"
    digest = hashlib.sha256(str(case_dir.resolve()).encode()).hexdigest()[:20]
    return f"cm_{run}_{digest}"


def _recorded(case_dir: Path) -> str | None:
    try:
        data = json.loads((case_dir / RECORD).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    name = data.get("database") if isinstance(data, dict) else None
    return name if isinstance(name, str) else None


def _record(case_dir: Path, name: str) -> None:
    temporary = case_dir / f".{RECORD}.tmp"
    temporary.write_text(json.dumps({"database": name}) + "\n", encoding="utf-8")
    os.replace(temporary, case_dir / RECORD)


@contextlib.contextmanager
def _admin() -> Iterator[Any]:
    psycopg = _psycopg()
    try:
        connection = psycopg.connect(_server_url(), autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as error:
        said = " ".join(str(error).split())
        raise PostgresUnavailable(f"cannot reach the PostgreSQL server at {_server_url()}: {said}") from error
    with connection:
        yield connection


def _quoted(name: str) -> Any:
    return _psycopg().sql.Identifier(name)


def case_database_url(case_dir: Path) -> str:
    """The URL of ``case_dir``'s own database: the one ``postgres.json`` names, or a new empty
    one created now and recorded there."""
    name = _recorded(case_dir)
    if name is None:
        name = _name_for(case_dir)
        with _admin() as admin:
            sql = _psycopg().sql
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_quoted(name)))
            admin.execute(sql.SQL("CREATE DATABASE {}").format(_quoted(name)))
        _record(case_dir, name)
    return _database_url(name)


def copy_case_database(source: Path, case_dir: Path) -> None:
    """Give the copy ``case_dir`` of ``source`` (already copied, ``postgres.json`` with it)
    its own copy of ``source``'s database. Nothing when ``source`` has none."""
    old = _recorded(source)
    if old is None:
        return
    new = _name_for(case_dir)
    sql = _psycopg().sql
    with _admin() as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_quoted(new)))
        # A template must have no other session: a SIGKILLed agent's backend may not have
        # seen its socket close yet (or the agent's process may still be going down).
        # PostgreSQL waits up to 5 s for sessions to leave; terminating them is what makes
        # them leave. Tried again for a backend that connects meanwhile.
        for attempt in range(5):
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (old,),
            )
            try:
                admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(_quoted(new), _quoted(old)))
                break
            except _psycopg().errors.ObjectInUse:
                if attempt == 4:
                    raise
            except _psycopg().errors.InvalidCatalogName:
                raise PostgresUnavailable(
                    f"{source / RECORD} names database {old}, which the server at {_server_url()} does "
                    "not have: a case directory kept from another run cannot be copied with its database"
                ) from None
    _record(case_dir, new)


def drop_case_databases(tree: Path) -> None:
    """Drop the databases of the case directories under ``tree`` (about to be removed); best
    effort: what is left goes when the run's server stops (or its databases are dropped)."""
    if not os.environ.get(ENV) or not tree.exists():
        return
    names = {name for record in tree.rglob(RECORD) if (name := _recorded(record.parent)) is not None}
    if not names:
        return
    with contextlib.suppress(Exception), _admin() as admin:
        sql = _psycopg().sql
        for name in sorted(names):
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_quoted(name)))


def _drop_run(token: str) -> None:
    with contextlib.suppress(Exception), _admin() as admin:
        sql = _psycopg().sql
        rows = admin.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", (f"cm\\_{token}\\_%",)
        ).fetchall()
        for (name,) in rows:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(_quoted(name)))
