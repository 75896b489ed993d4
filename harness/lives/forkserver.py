"""Start agent lives as processes: forked from a warm server, or as fresh interpreters.

Why not ``multiprocessing``'s forkserver: before running its target, every child re-runs
the harness's ``__main__`` (``multiprocessing.spawn.prepare``). Under the ``pytest`` and
``crashmatrix`` console scripts that re-imports pytest in every life, which doubled the
cost of a case; it also pickles the parent's whole preparation data per child, and keeps
one server per interpreter whatever preload list later callers ask for.

This module is a small fork server without those costs (the same design as CPython's):

* The harness starts ``python -c 'from crashmatrix.harness.lives.forkserver import serve; serve()'`` with a
  listening Unix socket it created (on Linux in the abstract namespace: no file to leave
  behind), and sends it ``sys.path`` and the modules to preload.
  The server ties its life to the harness (``parent_death``), imports the modules once
  (``harness.lives.warmup`` runs one throwaway life, so caches are warm), then waits.
* Each life is one connection: the harness sends the pickled ``(target, args, cwd)``; the
  server forks; the child runs ``target(*args)`` and leaves with ``os._exit`` (no
  interpreter teardown); the server answers the child's pid, then its wait status when it
  ends, then the processes the life left behind (``harness.lives.descendants``: the server
  is a child subreaper, so they are its children now; it stops, names and kills them).
  Connections are independent, so several threads may run lives at once.
* A deadline is the harness's: it SIGKILLs the pid and still reads the status.

``spawn`` runs the same request in a fresh interpreter (``python -c ... run_once()``): the
fallback for agents that cannot be forked, and the baseline the benchmark compares with.
That interpreter forks the life itself and is its subreaper, so a spawned life's leftovers
are found the same way.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import gc
import io
import json
import os
import pickle
import secrets
import select
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from crashmatrix.harness.errors import HarnessError
from crashmatrix.harness.lives import descendants
from crashmatrix.harness.lives.server_state import in_server, serving, warming

__all__ = ["Exited", "ForkServer", "in_server", "run_spawned", "serve", "stop_all", "warming"]

_LEN = struct.Struct("!Q")
_PID = struct.Struct("!q")
_STATUS = struct.Struct("!i")
# Exit code of a child whose target raised (multiprocessing's convention).
EXIT_TARGET_RAISED = 1


@dataclass(frozen=True, slots=True)
class Exited:
    """How a child ended: ``code`` as ``Popen.returncode`` gives it (-N: killed by signal N)."""

    pid: int
    code: int
    hung: bool = False
    # The processes the life left running when it ended, stopped and killed by the process
    # that started it (``harness.lives.descendants``); None: they could not be tracked here.
    survivors: tuple[str, ...] | None = ()


# ---------------------------------------------------------------------------- wire format
def _send(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(_LEN.pack(len(payload)) + payload)


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks: list[bytes] = []
    while size:
        chunk = sock.recv(size)
        if not chunk:
            raise EOFError("the fork server closed the connection")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _recv(sock: socket.socket) -> bytes:
    (size,) = _LEN.unpack(_recv_exact(sock, _LEN.size))
    return _recv_exact(sock, size)


def _returncode(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


# ---------------------------------------------------------------------------- the child
_MOST_NAMED = 50  # survivors named one by one in a life's report


def _left_behind(parent: int, started: Collection[int]) -> bytes:
    """The descendants ``parent`` adopted from lives that ended, killed; as the wire's JSON."""
    if not descendants.tracking():
        return b"null"
    left = [survivor.describe() for survivor in descendants.kill_adopted(parent, started)]
    if len(left) > _MOST_NAMED:  # all killed; a bounded report (a pipe holds 64 KiB unread)
        left = [*left[:_MOST_NAMED], f"... and {len(left) - _MOST_NAMED} more"]
    return json.dumps(left).encode()


def _survivors(payload: bytes) -> tuple[str, ...] | None:
    found = json.loads(payload)
    return None if found is None else tuple(found)


def _request(target: Callable[..., object], args: tuple[Any, ...]) -> bytes:
    # sys.path first, on its own: the child needs it to unpickle the target (pytest adds
    # test directories to sys.path while it collects, after the server started).
    return pickle.dumps(list(sys.path)) + pickle.dumps((target, args, os.getcwd()))


def _run_request(request: bytes) -> int:
    """In the child: unpickle and run one request. Errors (an agent module that does not
    import, a target that raises) are the child's, printed to its stderr, never the server's."""
    try:
        data = io.BytesIO(request)
        sys.path[:] = pickle.load(data)
        target, args, cwd = pickle.load(data)
        os.chdir(cwd)
        target(*args)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = EXIT_TARGET_RAISED
    for stream in (sys.stdout, sys.stderr):  # os._exit follows: flush what the target printed
        with contextlib.suppress(Exception):
            stream.flush()
    return code


def _stdin_from_devnull() -> None:
    # Like multiprocessing: a life never reads the harness's stdin (an agent that wants input
    # gets it from its adapter).
    fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(fd, 0)
    os.close(fd)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - fd 0 lives as long as the process


# ---------------------------------------------------------------------------- the server
def serve() -> None:  # pragma: no cover - runs in the server process; tested through ForkServer
    """The server's main loop (its own process; see the module docstring)."""
    from crashmatrix.harness.lives.parent_death import die_with_parent

    die_with_parent(int(os.environ.pop(_PARENT_VARIABLE)))
    # Ctrl-C reaches the whole process group: the harness handles it (and stops us); the
    # lives get the harness's own disposition back -- Python's handler, or "ignored" when
    # the harness was started ignoring SIGINT (a background job of a script), so that a
    # signal the harness ignores does not kill the lives under it.
    inherited = signal.getsignal(signal.SIGINT)
    if inherited is None:  # set outside Python: Python's own handler is the harness's default
        inherited = signal.default_int_handler
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    listener = socket.socket(fileno=int(os.environ.pop("CRASHMATRIX_FORKSERVER_FD")))
    init = pickle.load(sys.stdin.buffer)
    _stdin_from_devnull()
    _prepare(init, clone=False)
    _loop(listener, inherited)


def _prepare(init: dict[str, Any], *, clone: bool) -> None:  # pragma: no cover - in a server
    """Import the preloads and prepare the agents ``init`` names: a framework agent's throwaway
    life after ``harness.lives.warmup`` (the reference agent's), then ``warm``. A clone has its
    base's preloads already (``__import__`` finds them, the warm-up's reference life is done)
    and does the rest for its own agents."""
    serving(tuple(init.get("warm", ())))
    sys.path[:] = init["sys_path"]
    for module in init["preload"]:
        # A module that fails here fails again, with its real error, in the life that needs
        # it; a preload is only ever a speed-up.
        with contextlib.suppress(Exception):
            __import__(module)
    if "crashmatrix.harness.lives.warmup" in init["preload"]:
        from crashmatrix.harness.lives.warmup import warm_framework

        for agent in warming():
            with contextlib.suppress(Exception):  # a cold life is slower, not wrong
                warm_framework(agent)
    for agent in warming():
        from crashmatrix.harness.lives.warm_agent import warm

        warm(agent)  # never raises: what fails here fails again, with its error, in a life
    if clone:
        gc.collect()  # as the warm-up ends a fresh server's preparation


def _loop(listener: socket.socket, inherited: Any) -> None:  # pragma: no cover - in a server
    """Fork a life for each request on ``listener`` (a clone for a clone request), and report
    how each ended. Never returns."""
    from crashmatrix.harness.lives.parent_death import die_with_parent

    server = os.getpid()
    # What a life leaves running becomes ours when it dies, not init's (descendants.py).
    descendants.become_subreaper()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}

    def leave(conn: socket.socket) -> None:
        """In a child: drop what is the server's (it must not hold the server's sockets)."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        selector.close()
        for fd in (wake_r, wake_w):
            os.close(fd)
        listener.close()
        for other in children.values():
            other.close()
        conn.close()

    while True:
        for key, _ in selector.select():
            if key.fileobj is listener:
                conn, _ = listener.accept()
                if not _same_user(conn):
                    conn.close()
                    continue
                try:
                    request, fds = _recv_request(conn)
                except (EOFError, OSError):
                    conn.close()  # the harness gave up on this request
                    continue
                pid = os.fork()
                if pid == 0:
                    die_with_parent(server)  # before anything: the server may be dying too
                    leave(conn)
                    if request.startswith(_CLONE):
                        _become_clone(request, fds)
                    signal.signal(signal.SIGINT, inherited)
                    os._exit(_run_request(request))
                for fd in fds:
                    os.close(fd)
                try:
                    conn.sendall(_PID.pack(pid))
                    children[pid] = conn
                except OSError:
                    conn.close()
            else:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
                while True:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    waiting = children.pop(pid, None)
                    if waiting is not None:
                        left = _left_behind(server, children.keys())
                        with waiting, contextlib.suppress(OSError):  # the harness may be gone
                            waiting.sendall(_STATUS.pack(_returncode(status)))
                            _send(waiting, left)


def _become_clone(request: bytes, fds: Sequence[int]) -> None:  # pragma: no cover
    """In a child of a warm server: become a fork server of its own for the harness that asked
    (``ForkServer._clone``): its listening socket, standard output and error, environment,
    working directory, SIGINT disposition and preloads. Never returns."""
    try:
        init = pickle.loads(request[len(_CLONE) :])
        inherited = signal.SIG_IGN if init["sigint_ignored"] else signal.default_int_handler
        listener_fd, out, err = fds
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        # What the harness's environment and directory are now, as a new server gets them.
        os.environ.clear()
        os.environ.update(init["env"])
        os.chdir(init["cwd"])
        _prepare(init, clone=True)
        _loop(socket.socket(fileno=listener_fd), inherited)
    except BaseException:
        traceback.print_exc()
    os._exit(EXIT_TARGET_RAISED)


# A clone request's first bytes (a life's request is a pickle: it starts with b"\x80").
_CLONE = b"crashmatrix-clone\n"
_MAX_FDS = 3  # a clone request passes its listener, standard output and error


def _recv_request(conn: socket.socket) -> tuple[bytes, list[int]]:
    """One request, and the descriptors passed with its first bytes (a clone's)."""
    head, fds, _, _ = socket.recv_fds(conn, _LEN.size, _MAX_FDS)
    if not head:
        for fd in fds:
            os.close(fd)
        raise EOFError("the harness closed the connection")
    try:
        head += _recv_exact(conn, _LEN.size - len(head))
        (size,) = _LEN.unpack(head)
        request = _recv_exact(conn, size)
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    if fds and not (request.startswith(_CLONE) and len(fds) == _MAX_FDS):
        for fd in fds:  # descriptors with a life's request: not ours to keep
            os.close(fd)
        fds = []
    return request, fds


# sun_path holds 108 bytes on Linux (104 on macOS): a long $TMPDIR (pytest's tmp_path under
# xdist, a CI workspace) cannot hold the socket, and bind() fails with "AF_UNIX path too long".
_SUN_PATH = 100


def _socket_dir() -> str:
    """A fresh directory for the server's socket: under $TMPDIR, or /tmp when that path would
    be too long for a Unix socket address."""
    where = tempfile.mkdtemp(prefix="crashmatrix-forkserver-")
    if len(os.path.join(where, "socket").encode()) <= _SUN_PATH or not os.path.isdir("/tmp"):
        return where
    os.rmdir(where)
    return tempfile.mkdtemp(prefix="crashmatrix-forkserver-", dir="/tmp")


# Read at run time (not ``sys.platform`` in the condition): a type checker for one platform
# would call the other branch unreachable.
_ABSTRACT_NAMESPACE: bool = sys.platform.startswith("linux")


def _listen_address() -> tuple[str, str | None]:
    """Where a new server listens, and the directory to remove when it stops (None: none).

    On Linux, a name in the abstract socket namespace: no file at all, so nothing is left in
    $TMPDIR however the harness ends (an xdist worker ended with ``os._exit``, a SIGTERM, a
    SIGKILL), and the name vanishes with the server. Such a name has no file permissions,
    so the server serves only its own user (``_same_user``). Elsewhere, a socket file in a
    fresh private directory (mode 0700), removed when the server stops."""
    if _ABSTRACT_NAMESPACE:
        return f"\0crashmatrix-forkserver-{os.getpid()}-{secrets.token_hex(8)}", None
    where = _socket_dir()
    return os.path.join(where, "socket"), where


def _same_user(conn: socket.socket) -> bool:
    """Whether the process at the other end of ``conn`` runs as this user: an abstract
    socket can be reached by anyone on the machine, and a request is code to run."""
    if not hasattr(socket, "SO_PEERCRED"):
        return True  # not Linux: the socket's directory (0700) keeps others out
    credentials = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid: int = struct.unpack("3i", credentials)[1]
    return uid == os.getuid()


# The thread that starts fork servers for threads that end sooner than the run.
_starter: concurrent.futures.ThreadPoolExecutor | None = None
_starter_lock = threading.Lock()


def _from_a_lasting_thread(command: list[str], **options: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(command, **options)``, started from a thread that lives as long as
    this process. The server's ``PR_SET_PDEATHSIG`` follows the THREAD that started it
    (``parent_death``): a server started by a thread that then ended -- one of a double
    resume's two concurrent lives (``harness.lives.double_resume``), the clean lives run ahead
    of collection (``collection.clean_ahead``) -- was SIGKILLed with that thread, and every
    life it had forked with it (seen under load: 'the fork server ... ended' on the life still
    running). The main thread lasts; any other hands the start to one thread of its own that
    is never stopped before exit."""
    global _starter
    if threading.current_thread() is threading.main_thread():
        return subprocess.Popen(command, **options)
    with _starter_lock:
        if _starter is None:
            _starter = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="crashmatrix-forkserver")
        starter = _starter

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(command, **options)

    return starter.submit(start).result()


class _Clone:
    """A server forked from a warm one (``ForkServer._clone``), held as a ``Popen`` is. Its
    parent is the base server, which reaps it and reports its wait status on the connection
    that asked for it, as it reports a life's; the connection closing unanswered means the
    base died, and the clone with it (``parent_death``)."""

    def __init__(self, pid: int, conn: socket.socket) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._conn = conn
        # To signal this process and no other: the base reaps it, and its pid may be reused.
        self._pidfd: int | None = None
        with contextlib.suppress(OSError, AttributeError):
            self._pidfd = os.pidfd_open(pid)

    def poll(self) -> int | None:
        if self.returncode is None:
            ready, _, _ = select.select([self._conn], [], [], 0)
            if ready:
                self._ended()
        return self.returncode

    def wait(self) -> int:
        while self.returncode is None:
            self._ended()
        return self.returncode

    def kill(self) -> None:
        if self.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, OSError):
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)

    def _ended(self) -> None:
        self._conn.settimeout(None)
        try:
            (status,) = _STATUS.unpack(_recv_exact(self._conn, _STATUS.size))
        except (EOFError, OSError):
            status = -signal.SIGKILL  # the base died, and its parent-death signal killed us
        self.returncode = status
        self._conn.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


def _cloning() -> bool:
    """Whether a new server may be forked from a warm one (``CRASHMATRIX_SERVER_CLONES=0``:
    never; the benchmark's other side)."""
    return os.environ.get("CRASHMATRIX_SERVER_CLONES", "1") != "0"


# What a base server may have prepared beyond its preloads: the reference agent's adapter,
# which every server imports anyway. An agent's own modules (a framework team's ``agent``)
# must never be in another agent's server.
_BASE_WARM = frozenset({"reference"})


class ForkServer:
    """A warm process that forks lives on request. Started lazily; one per preload list
    (``shared``), stopped at exit. Dies with the harness even when the harness is
    SIGKILLed, and its lives die with it (``harness.lives.parent_death``).

    A server given a ``base`` is forked from a running shared one whose preloads are a subset
    of its own and which prepared no agent but the reference (``_clone``): the interpreter, the common
    imports and the reference warm-up (~75% of a start's CPU, docs/performance.md) are the
    base's already, and the clone imports and prepares only what its list adds. Its
    environment, working directory, ``sys.path`` and standard output and error are the
    harness's at that moment, as a new process's would be. The chain of parent deaths is one
    longer: harness -> base -> clone -> life, so stopping a base stops its clones (servers
    are stopped at exit, all together)."""

    _shared: ClassVar[dict[tuple[str, ...], ForkServer]] = {}  # by preload, "", warm
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        preload: Sequence[str],
        warm: Sequence[str] = (),
        base: tuple[Sequence[str], Sequence[str]] | None = None,
    ) -> None:
        self.preload = tuple(preload)
        # Agents whose adapter (and TLS context) the server prepares once (warm_agent.py).
        self.warm = tuple(warm)
        # The (preload, warm) of the shared server to fork this one from when none runs and
        # this process has started a server already (``_clone``); None: never forked.
        self.base = None if base is None else (tuple(base[0]), tuple(base[1]))
        if self.base == (self.preload, self.warm):
            self.base = None
        # Reentrant: an interrupt landing just after acquire() (before ``with`` can release
        # it) must not deadlock the atexit stop in the same thread.
        self._lock = threading.RLock()
        self._process: subprocess.Popen[bytes] | _Clone | None = None
        self._dir: str | None = None
        self._address = ""

    @classmethod
    def shared(
        cls,
        preload: Sequence[str],
        warm: Sequence[str] = (),
        base: tuple[Sequence[str], Sequence[str]] | None = None,
    ) -> ForkServer:
        with cls._shared_lock:
            key = (*preload, "", *warm)
            if key not in cls._shared:
                cls._shared[key] = cls(preload, warm, base)
            return cls._shared[key]

    def _ensure_running(self, *, restart: bool = False) -> str:
        with self._lock:
            if not restart and self._process is not None and self._process.poll() is None:
                return self._address
            self._stop_locked()
            self._address, self._dir = _listen_address()
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                listener.bind(self._address)
                # Listening before the server starts: a life requested while the server is
                # still importing waits in the backlog instead of being refused.
                listener.listen(64)
                init = {"sys_path": list(sys.path), "preload": self.preload, "warm": self.warm}
                clone = self._clone(init, listener)
                if clone is not None:
                    self._process = clone
                    return self._address
                env = _child_env(CRASHMATRIX_FORKSERVER_FD=str(listener.fileno()))
                process = _from_a_lasting_thread(
                    [sys.executable, "-c", f"from {__name__} import serve; serve()"],
                    stdin=subprocess.PIPE,
                    pass_fds=(listener.fileno(),),
                    env=env,
                    cwd=os.getcwd(),
                )
                self._process = process
            finally:
                listener.close()
            assert process.stdin is not None
            process.stdin.write(pickle.dumps(init))
            process.stdin.close()
            return self._address

    def _base(self) -> ForkServer | None:
        """A running shared server this one can be forked from: a fresh process (not a clone),
        whose preloads this one has too and which prepared no agent but the reference; the
        one with the most preloads."""
        with ForkServer._shared_lock:
            servers = list(ForkServer._shared.values())
        bases = [server for server in servers if server._can_fork(self)]
        return max(bases, key=lambda server: len(server.preload), default=None)

    def _can_fork(self, other: ForkServer) -> bool:
        """Whether ``other`` can be forked from this server now."""
        process = self._process
        return (
            self is not other
            and isinstance(process, subprocess.Popen)
            and process.poll() is None
            and set(self.preload) <= set(other.preload)
            and set(self.warm) <= _BASE_WARM
        )

    def _clone(self, init: dict[str, Any], listener: socket.socket) -> _Clone | None:
        """This server forked from a warm base, listening on ``listener``; None where there is
        no base, or it did not answer (a new process is started instead).

        Without a running base, the one ``base`` names is started first, but only in a process
        that has started a server already: one that needs a second server is likely to need
        more (tests, mutants, several agents), and each after it costs ~0.2 s instead of ~0.9;
        a run of one agent (``pytest --agent``, ``crashmatrix run``) starts just its own."""
        if self.base is None or not _cloning():
            return None
        base = self._base()
        if base is None:
            with ForkServer._shared_lock:
                started = any(s._process is not None for s in ForkServer._shared.values() if s is not self)
            if not started:
                return None
            base = ForkServer.shared(*self.base)
            base._ensure_running()
            if not base._can_fork(self):
                return None
        # As a new interpreter would start: SIGINT ignored if the harness ignores it now.
        ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        state = {"env": dict(os.environ), "cwd": os.getcwd(), "sigint_ignored": ignored}
        payload = _CLONE + pickle.dumps({**init, **state})
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(base._address)
            # Descriptors 1 and 2 as they are now: what a new process would inherit (under
            # pytest's capture, its files).
            socket.send_fds(conn, [_LEN.pack(len(payload))], [listener.fileno(), 1, 2])
            conn.sendall(payload)
            (pid,) = _PID.unpack(_recv_exact(conn, _PID.size))
        except (OSError, EOFError):
            conn.close()  # the base died just now, or descriptor 1 or 2 is closed
            return None
        return _Clone(pid, conn)

    def run(self, target: Callable[..., object], args: tuple[Any, ...], *, deadline: float) -> Exited:
        """Fork a child that runs ``target(*args)``; wait for it, SIGKILL it at ``deadline``."""
        address = self._ensure_running()
        request = _request(target, args)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with conn:
            # The server may still be importing its preloads: the pid comes once it is warm.
            try:
                conn.connect(address)
            except ConnectionRefusedError:
                # It died (its socket is gone) but is not reaped yet, so poll() missed it.
                conn.connect(self._ensure_running(restart=True))
            _send(conn, request)
            try:
                (pid,) = _PID.unpack(_recv_exact(conn, _PID.size))
            except EOFError as error:
                raise HarnessError(self._died_message()) from error
            hung = False
            conn.settimeout(deadline)
            try:
                raw = _recv_exact(conn, _STATUS.size)
            except TimeoutError:
                hung = True
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                conn.settimeout(10.0)
                raw = _recv_exact(conn, _STATUS.size)
            except EOFError as error:
                raise HarnessError(self._died_message()) from error
            survivors = _survivors(_recv(conn))
        (code,) = _STATUS.unpack(raw)
        return Exited(pid, code, hung, survivors)

    def _died_message(self) -> str:
        code = self._process.poll() if self._process else None
        return (
            f"the fork server (preload {', '.join(self.preload)}) ended with exit code {code}; "
            "run with --isolation=spawn to see the agent's import error"
        )

    def _stop_locked(self) -> None:
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait()
            self._process = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def stop(self) -> None:
        with self._lock:
            self._stop_locked()


@atexit.register
def stop_all() -> None:
    """Stop every shared server, and with it every life it forked (they die with it:
    ``parent_death``). At exit; and before an interrupted run removes its case directories,
    which its lives would otherwise go on writing into (``harness.front.cli``)."""
    for server in list(ForkServer._shared.values()):
        server.stop()


# ---------------------------------------------------------------------------- spawn
def run_once() -> None:  # pragma: no cover - runs in a spawned interpreter
    """Entry point of a spawned life: read one request from stdin and run it."""
    from crashmatrix.harness.lives.parent_death import die_with_parent

    die_with_parent(int(os.environ.pop(_PARENT_VARIABLE)))
    report = int(os.environ.pop(_SURVIVORS_FD))
    request = sys.stdin.buffer.read()
    _stdin_from_devnull()
    # The life is our child, so what it leaves behind is ours to find (as in the server).
    descendants.become_subreaper()
    me = os.getpid()
    pid = os.fork()
    if pid == 0:
        os.close(report)
        die_with_parent(me)  # the harness's deadline kills us; the life goes with us
        os._exit(_run_request(request))
    _, status = os.waitpid(pid, 0)
    os.write(report, _left_behind(me, ()))
    os.close(report)
    code = _returncode(status)
    if code < 0:  # die the same way, so the harness reads the same status
        with contextlib.suppress(OSError, ValueError):  # SIGKILL cannot be (and need not be) reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(me, -code)
    os._exit(code)


# The pid of the process that starts a fork server or a spawned life, for its die_with_parent.
_PARENT_VARIABLE = "CRASHMATRIX_PARENT_PID"
# The pipe a spawned life's parent reports the processes it left behind on.
_SURVIVORS_FD = "CRASHMATRIX_SURVIVORS_FD"


def _child_env(**extra: str) -> dict[str, str]:
    # The child imports this module by its installed name before it reads the parent's
    # sys.path (crashmatrix is an installed distribution, editable or not). Never the
    # repository root on PYTHONPATH: that would make the bare folder names (``harness``)
    # importable too, and a module imported under two names is two modules.
    return dict(os.environ, **{_PARENT_VARIABLE: str(os.getpid())}, **extra)


def run_spawned(target: Callable[..., object], args: tuple[Any, ...], *, deadline: float) -> Exited:
    """Run ``target(*args)`` in a fresh interpreter (no warm state at all)."""
    read, write = os.pipe()
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", f"from {__name__} import run_once; run_once()"],
            stdin=subprocess.PIPE,
            env=_child_env(**{_SURVIVORS_FD: str(write)}),
            pass_fds=(write,),
        )
    finally:
        os.close(write)
    with open(read, "rb") as report:
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            process.stdin.write(_request(target, args))
            process.stdin.close()
        try:
            code = process.wait(timeout=deadline)
        except subprocess.TimeoutExpired:
            # Killed mid-life, its parent cannot report: what the life left is not known.
            process.kill()
            return Exited(process.pid, process.wait(timeout=10.0), hung=True, survivors=None)
        payload = report.read()
    return Exited(process.pid, code, survivors=_survivors(payload) if payload else None)
