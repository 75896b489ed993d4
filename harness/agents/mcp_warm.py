"""The MCP relay started warm: a process with the ``mcp`` SDK imported forks a relay per request.

Importing the SDK took a relay 1 s on a quiet machine, 3-6 s under load, and every MCP case
started at least one relay per life (benchmarks/mcp_relay.py). Here it is imported once: the
fork server preloads it for an agent with ``tools: mcp`` (``PRELOAD``), each life forks its
warm server (``WarmRelays.fork``) before its agent starts, and every relay of the life is a
fork of that: a stdio relay for each ``{mcp_command}`` the agent runs (a stdlib launcher,
``harness.agents.mcp_launch``, hands the server its pipes), the HTTP relay on the life's port
and each restart of it.

Processes, and what ties them::

    life ── agent ── launcher ({mcp_command})        dies with the agent (PR_SET_PDEATHSIG)
      └── warm server                                dies with the life
            └── relay (one per launcher / HTTP start) dies with the warm server, and when
                  └── (proxy) the team's server        its launcher's connection closes

The relay is the process that serves the agent's session (it reads the agent's pipe, or
accepts on the life's port): ``tool_server_died`` SIGKILLs it, and the agent reads end of file
or a broken connection, the launcher exiting with it. The warm server is single-threaded: a
relay is forked from a process no other thread can have left holding a lock.

Linux only (``available``: abstract unix sockets, PR_SET_PDEATHSIG); elsewhere the relay is
started cold, as ``crashmatrix mcp-serve``.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from crashmatrix.harness.agents.mcp_launch import ended, request, unix_address

__all__ = ["PRELOAD", "RelayHandle", "WarmRelays", "available"]

# What a relay imports, imported before the fork (the fork server's preload for a tools: mcp
# agent, then the warm server's own start): stdio and streamable HTTP, served and proxied.
PRELOAD = (
    "mcp.types",
    "mcp.server.lowlevel",
    "mcp.server.stdio",
    "mcp.server.streamable_http_manager",
    "mcp.client.stdio",
    "mcp.client.streamable_http",
    "uvicorn",
    "crashmatrix.harness.agents.mcp_relay",
    "crashmatrix.harness.agents.mcp_tools",
    "crashmatrix.harness.agents.mcp_upstream",
)
LAUNCHER = Path(__file__).with_name("mcp_launch.py")


def available() -> bool:
    """Whether relays can be started warm here (Linux: abstract sockets, parent-death ties)."""
    return sys.platform.startswith("linux") and hasattr(socket, "send_fds")


class RelayHandle:
    """One relay the warm server forked, held by whoever asked for it: its pid, and the
    connection whose closing ends it."""

    def __init__(self, connection: socket.socket, pid: int) -> None:
        self._connection = connection
        self.pid = pid

    def wait(self) -> int | None:
        """Until the relay is gone: its exit status, None if it was killed."""
        return ended(self._connection)

    def close(self) -> None:
        """Let the relay go (it kills itself when the connection closes)."""
        self._connection.close()


class WarmRelays:
    """A life's warm relay server: ``command`` is the launcher an agent spawns, ``start`` a
    relay on given descriptors (the life's HTTP relay), ``close`` ends the server and, by
    their parent-death ties, every relay it forked.

    Made in two steps: the socket is bound at once (its address goes into ``{mcp_command}``;
    a launcher connecting before the server runs waits in the backlog, never refused), the
    server is started by ``fork`` or ``spawn``, inside the block whose end closes it."""

    def __init__(self) -> None:
        name = f"crashmatrix-mcp-{os.getpid()}-{secrets.token_hex(6)}"
        self.address = f"@{name}"  # an abstract unix socket
        self._listener: socket.socket | None = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._listener.bind(unix_address(self.address))
        self._listener.listen(64)
        self.pid: int | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @classmethod
    def spawned(cls) -> WarmRelays:
        """A server spawned at once (a test process, the benchmark)."""
        warm = cls()
        warm.spawn()
        return warm

    def fork(self) -> None:
        """Start the server as a fork of this process (a life: the SDK is in memory already
        when the fork server preloaded it). Call it before this process starts threads."""
        listener = self._take()
        me = os.getpid()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the server's side; tested through its relays
            _serve(listener, parent=me)
        listener.close()
        self.pid = pid

    def spawn(self) -> None:
        """Start the server as a new process that imports the SDK itself (one import for all
        the relays of a test process, nothing forked from its threads)."""
        listener = self._take()
        code = "from crashmatrix.harness.agents.mcp_warm import _main; _main()"
        self._process = subprocess.Popen(
            [sys.executable, "-c", code, str(listener.fileno()), str(os.getpid())],
            pass_fds=(listener.fileno(),),
            stdin=subprocess.DEVNULL,
        )
        listener.close()
        self.pid = self._process.pid

    def _take(self) -> socket.socket:
        listener, self._listener = self._listener, None
        if listener is None:
            raise RuntimeError("this warm relay server was started already")
        return listener

    def command(self, relay_args: Sequence[str]) -> list[str]:
        """``{mcp_command}``: the launcher, asking this server for a relay with ``relay_args``
        (``--life URL`` and proxy mode's ``--upstream-*``)."""
        return [sys.executable, "-I", "-S", str(LAUNCHER), self.address, *relay_args]

    def start(self, relay_args: Sequence[str], *, listening: int, stderr: int) -> RelayHandle:
        """A streamable HTTP relay on the ``listening`` socket, its stderr on ``stderr``."""
        connection, pid = request(self.address, "http", relay_args, (listening, stderr))
        return RelayHandle(connection, pid)

    def close(self) -> None:
        if self._listener is not None:  # never started
            self._listener.close()
            self._listener = None
        if self.pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            if self._process is not None:
                self._process.wait()
            else:
                os.waitpid(self.pid, 0)


def _main() -> None:  # pragma: no cover - the spawned server's entry
    _serve(socket.socket(fileno=int(sys.argv[1])), parent=int(sys.argv[2]))


def _serve(listener: socket.socket, *, parent: int) -> NoReturn:  # pragma: no cover - a server
    """The warm server's loop: accept a request, fork its relay, reap the relays that exit."""
    from crashmatrix.harness.lives.parent_death import die_with_parent

    try:
        die_with_parent(parent)
        _only_fds({0, 1, 2, listener.fileno()})
        # Fresh stdio objects: a lock another thread of the life held as it forked is not ours.
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        signal.signal(signal.SIGCHLD, _reap)
        for name in PRELOAD:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
        from crashmatrix.harness.agents.mcp_relay import warm_up

        warm_up()
        # What is in memory now is every relay's, unchanged: kept out of the collector's
        # passes, which would write to (and so copy) its pages in each relay.
        gc.freeze()
        me = os.getpid()
        while True:
            connection, _ = listener.accept()
            try:
                message, fds, _, _ = socket.recv_fds(connection, 1 << 16, 4)
            except OSError:
                connection.close()
                continue
            if os.fork() == 0:
                listener.close()
                _relay(connection, message, fds, me)
            connection.close()
            for fd in fds:
                os.close(fd)
    except BaseException:
        traceback.print_exc()
    os._exit(1)


def _reap(signum: int, frame: object) -> None:  # pragma: no cover - in the server
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _only_fds(keep: set[int]) -> None:  # pragma: no cover - in the server
    """Close every descriptor the life had but ``keep``: a pipe held here would hide its end
    of file from whoever reads it (the agent's, the fork server's)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def _relay(  # pragma: no cover - a relay process
    connection: socket.socket, message: bytes, fds: list[int], server: int
) -> NoReturn:
    """A forked relay: the caller's descriptors as its own, tied to the caller's connection,
    then the relay proper (``harness.agents.mcp_relay.serve``)."""
    code = 1
    try:
        from crashmatrix.harness.agents import mcp_relay
        from crashmatrix.harness.lives.parent_death import die_with_parent

        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # proxy mode waits for its own children
        # Its own group (as a cold relay): the life stops the agent's group while a
        # response waits unread, and this process must still write it.
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        die_with_parent(server)
        asked = json.loads(message)
        sock = None
        if asked["mode"] == "stdio":
            for target, fd in zip((0, 1, 2), fds, strict=True):
                os.dup2(fd, target)
        else:
            listening, stderr = fds
            null = os.open(os.devnull, os.O_RDWR)
            for target, fd in ((0, null), (1, null), (2, stderr)):
                os.dup2(fd, target)
            sock = socket.socket(fileno=os.dup(listening))
        for fd in {*fds} - {0, 1, 2}:
            os.close(fd)
        threading.Thread(target=_watch, args=(connection,), daemon=True).start()
        connection.send(f"pid {os.getpid()}".encode())
        args = mcp_relay.parser().parse_args(asked["argv"])
        mcp_relay.at_exit(lambda status: _tell_exit(connection, status))
        mcp_relay.serve(args, sock)
    except SystemExit as stop:  # argparse's: its message is on stderr
        code = stop.code if isinstance(stop.code, int) else 2
    except BaseException:
        traceback.print_exc()
    _tell_exit(connection, code)
    sys.stderr.flush()
    os._exit(code)


def _tell_exit(connection: socket.socket, status: int) -> None:  # pragma: no cover - in a relay
    with contextlib.suppress(OSError):
        connection.send(f"exit {status}".encode())


def _watch(connection: socket.socket) -> None:  # pragma: no cover - in a relay
    """The caller sends nothing after its request: end of file is its death (the launcher's
    agent closed or killed it, or died), and the relay goes with it, as a killed server."""
    with contextlib.suppress(OSError):
        while connection.recv(256):
            pass
    os.kill(os.getpid(), signal.SIGKILL)
