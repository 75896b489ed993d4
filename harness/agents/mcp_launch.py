"""``{mcp_command}``: the process an agent spawns as its MCP server, standing for a warm relay.

    python -I -S .../mcp_launch.py @ADDRESS --life URL [--upstream-command JSON | --upstream-url URL]

Standard library only, run without ``site`` (~20 ms to start, where importing the ``mcp`` SDK
took 1-6 s): it connects to the life's warm relay server (``harness.agents.mcp_warm``) and hands
it its stdin, stdout and stderr (``SCM_RIGHTS``). A relay forked there serves the agent's MCP
session on those very pipes, so the launcher keeps none of them (``/dev/null`` instead): when
``tool_server_died`` SIGKILLs the relay, the agent reads end of file on its server's stdout and
its writes break, as from a real server dying. The two are tied both ways through the
connection: the launcher exits when the relay does (with the relay's status; SIGKILLed itself
when the relay was killed, so the agent's view of its child matches), and the relay kills itself
when the launcher dies (the agent closed or killed it, or died: the launcher dies with its
parent, ``PR_SET_PDEATHSIG``).

Also imported by the harness: ``request`` and ``ended`` are the connection's protocol, the
same for the life's HTTP relay (``harness.agents.mcp_relay.HttpRelay``), which asks for its
relays as a launcher does.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from collections.abc import Sequence

__all__ = ["ended", "main", "request", "unix_address"]

# Messages from the relay, each one SEQPACKET datagram: b"pid N" once it runs, b"exit N" as it
# exits on its own. End of file without "exit": the relay was killed.
_PID = b"pid "
_EXIT = b"exit "


def unix_address(address: str) -> str:
    """``@name`` is Linux's abstract namespace (no file to clean up, no 108-byte path limit)."""
    return "\0" + address[1:] if address.startswith("@") else address


def request(address: str, mode: str, argv: Sequence[str], fds: Sequence[int]) -> tuple[socket.socket, int]:
    """Ask the warm server at ``address`` for a relay with ``argv`` (the relay's options) on
    ``fds`` (``stdio``: stdin, stdout, stderr; ``http``: the listening socket, stderr): the
    connection that ties it to the caller, and its pid. ``OSError`` when no server listens."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        connection.connect(unix_address(address))
        payload = json.dumps({"mode": mode, "argv": list(argv)}).encode("utf-8")
        socket.send_fds(connection, [payload], list(fds))
        first = connection.recv(256)
        if not first.startswith(_PID):
            raise ConnectionError(f"the warm relay server at {address} started no relay")
        return connection, int(first[len(_PID) :])
    except BaseException:
        connection.close()
        raise


def ended(connection: socket.socket) -> int | None:
    """Wait until the relay on ``connection`` is gone: its exit status, None if it was killed."""
    status = None
    while True:
        try:
            message = connection.recv(256)
        except ConnectionResetError:
            message = b""
        if not message:
            return status
        if message.startswith(_EXIT):
            status = int(message[len(_EXIT) :])


def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG: the agent that spawned this dies, this dies (Linux only)."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)


def main(argv: Sequence[str]) -> int:
    if not argv:
        print("usage: mcp_launch.py @ADDRESS --life URL [relay options]", file=sys.stderr)
        return 2
    _die_with_parent()
    try:
        connection, _ = request(argv[0], "stdio", argv[1:], (0, 1, 2))
    except OSError as error:
        print(
            f"crashmatrix MCP relay: no warm relay server at {argv[0]} ({error}); "
            "this command only runs inside the life that wrote it",
            file=sys.stderr,
        )
        return 1
    # The relay has the pipes now: none kept here, so the agent sees the relay's end of them.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    status = ended(connection)
    if status is None:
        # The relay was killed (tool_server_died): so is the server process the agent knows.
        os.kill(os.getpid(), signal.SIGKILL)
    return status or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
