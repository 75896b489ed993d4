"""The harness's own processes in a life, declared by the agent side for the snapshots
(``harness.lives.snapshots``): a life's warm MCP relay server (``harness.agents.mcp_warm``)
and the command its launchers start with. A leaf, like ``threads``: the agent side declares,
the snapshots read, and neither imports the other.

Both are tied to the life: the server dies with it, each relay with the server, and a
launcher with the agent that spawned it (PR_SET_PDEATHSIG); and none writes the case
directory but through the life (a relay asks the life's ``/mcp/*`` routes for every step,
and no handler serves one while a copy is made). So at a point where the agent is stopped,
a copy made with the server and its relays stopped too is what a kill leaves: nothing of
theirs outlives it.
"""

from __future__ import annotations

from collections.abc import Sequence

from crashmatrix.harness.lives.descendants import _children, state

__all__ = [
    "SERVERS",
    "declare_relay_server",
    "is_gone",
    "is_launcher",
    "live_children",
    "relay_server_closed",
]

# This life's warm relay servers (pids), and the argv (NUL-separated, as in
# /proc/PID/cmdline) a launcher of one starts with.
SERVERS: set[int] = set()
_LAUNCHERS: set[bytes] = set()


def declare_relay_server(server: int, launcher: Sequence[str]) -> None:
    """This life's warm MCP relay server (its pid), and its launcher's command (the
    ``{mcp_command}`` before the relay's options)."""
    SERVERS.add(server)
    _LAUNCHERS.add(b"\0".join(part.encode() for part in launcher) + b"\0")


def relay_server_closed(server: int) -> None:
    """The server declared by ``declare_relay_server`` is closed: its pid may be another's later."""
    SERVERS.discard(server)


def is_gone(pid: int) -> bool:
    """Dead, reaped or not: a zombie acts no more."""
    return state(pid) in (b"Z", b"X", b"")


def live_children(pid: int) -> list[int]:
    return [child for child in _children(pid) if not is_gone(child)]


def is_launcher(pid: int) -> bool:
    """A launcher of this life's warm relay server, alone (it only waits for its relay)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as stream:
            argv = stream.read()
    except OSError:
        return False
    return any(argv.startswith(prefix) for prefix in _LAUNCHERS) and not live_children(pid)
