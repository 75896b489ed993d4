"""No process of the agent outlives its life unseen: descendants adopted, named, and killed.

A SIGKILL kills one process. Whatever the agent started (a shell running ``sleep 4; echo
late >> audit.log``, a worker it forked, a daemon that called ``setsid``) keeps running,
and would write to the world after the agent died -- after the case was judged, or while
the next life recovers, unseen by either. A real crash leaves such processes behind too,
which is exactly why the harness must find them rather than let them act on a later case.

How they are found: every life and the process that starts lives (the fork server, or the
small parent of a spawned life) are Linux *child subreapers* (``PR_SET_CHILD_SUBREAPER``).
An orphan is re-parented to its nearest living subreaper ancestor instead of init, so a
double fork or ``setsid`` does not escape: while the life lives its descendants stay under
it, and when it dies they become children of the process that started it. That process,
having reaped the life, takes every child it did not start itself (``adopted``), stops the
whole subtree (``SIGSTOP``, so nothing forks or writes while it is being listed), records
each process and kills it. No environment marker is needed, so an agent that clears its
environment or execs does not escape either (Jenkins' ProcessTreeKiller marks by
environment; systemd and tini use a subreaper or a cgroup, as here).

Processes already dying of a SIGKILL (the agent of a supervised life, killed by
``PR_SET_PDEATHSIG`` as its life died) are not survivors, and neither are the children such a
process takes with it: the search waits (briefly) until the dying have exited, since a child
armed with ``PR_SET_PDEATHSIG`` (the MCP relay an agent spawned) is sent its SIGKILL only then.

Linux only; elsewhere ``tracking()`` is False and the check that reads the survivors
(``no_effect_after_death``) is not applicable, with that reason.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass

__all__ = ["TIE_MARK", "Survivor", "become_subreaper", "kill_adopted", "state", "tracking"]

_PR_SET_CHILD_SUBREAPER = 36
_SIGKILL_BIT = 1 << (signal.SIGKILL - 1)
_PF_EXITING = 0x4  # include/linux/sched.h: the task is in do_exit
_ROUNDS = 20  # a subtree that keeps forking faster than it is stopped is cut off here
# Seconds the search waits for processes with a SIGKILL pending to exit (microseconds, unless
# one is in uninterruptible sleep: then it is listed as it is, never waited on for long). With
# 1 s, a node MCP server dying with its killed relay (PR_SET_PDEATHSIG) was listed as a survivor
# in about one case in four on a loaded machine (2 cores, load 9); the wait ends as soon as
# nothing is exiting, so a longer bound costs nothing when nothing is slow.
_SETTLE = 5.0
# What the command line of crashmatrix's tie holds while it runs (a small ``python -c`` that
# arms ``PR_SET_PDEATHSIG`` and then execs a real MCP server: harness/agents/mcp_upstream.py).
# Before its exec it is the harness's own code, which either execs tied to its parent or, its
# parent already gone, exits: waited for like the dying, never named a survivor. A kill while
# a relay was starting its server left it listed in that instant (a false no_effect_after_death).
TIE_MARK = b"ctypes.CDLL(None).prctl(1, signal.SIGKILL"


def tracking() -> bool:
    """Whether descendants can be tracked here: Linux, with the ``children`` files of /proc
    (``CONFIG_PROC_CHILDREN``). Without them every search would find nothing, a silent pass."""
    return sys.platform.startswith("linux") and os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def become_subreaper() -> bool:
    """Make this process a child subreaper (see the module docstring); False where the
    platform has none."""
    if not tracking():
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


@dataclass(frozen=True, slots=True)
class Survivor:
    """A process that outlived the life that started it."""

    pid: int
    command: str  # its command line, as ``ps`` shows it
    session: int  # its session id (a ``setsid`` daemon has its own)

    def describe(self) -> str:
        return f"pid {self.pid} `{self.command}` (session {self.session})"


def _children(pid: int) -> list[int]:
    """The children of ``pid`` (every thread's: a child belongs to the thread that forked it)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as stream:
                out += [int(part) for part in stream.read().split()]
        except OSError:
            continue
    return out


def state(pid: int, proc: str = "/proc") -> bytes:
    """A process's (or thread's) state letter (``/proc/PID/stat``; b"" once it is gone)."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as stream:
            return stream.read().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return b""


def _in_exit(pid: int, proc: str = "/proc") -> bool:
    """The kernel is tearing the process down (``PF_EXITING`` in its flags): its SIGKILL is
    taken, so no longer pending, and it is not a zombie yet. A large process (a node MCP
    server killed with its relay) stays in this state long enough to be seen."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as stream:
            flags = int(stream.read().rpartition(b")")[2].split()[6])
    except (OSError, IndexError, ValueError):
        return False
    return bool(flags & _PF_EXITING)


def _dying(pid: int, proc: str = "/proc") -> bool:
    """A zombie, or a process with a SIGKILL pending or being acted on: on its way out."""
    if _in_exit(pid, proc):
        return True
    try:
        with open(f"{proc}/{pid}/status", "rb") as stream:
            fields = dict(line.split(b":", 1) for line in stream.read().splitlines() if b":" in line)
    except OSError:
        return True  # gone already
    letter = fields.get(b"State", b"").strip()[:1]
    if letter in (b"Z", b"X"):
        return True
    pending = 0
    for name in (b"SigPnd", b"ShdPnd"):
        with contextlib.suppress(ValueError):
            pending |= int(fields.get(name, b"0").strip(), 16)
    return bool(pending & _SIGKILL_BIT)


def _exiting(pid: int) -> bool:
    """A SIGKILL pending and not exited yet (not a zombie): its children's death signals
    (``PR_SET_PDEATHSIG``) are not sent yet."""
    return state(pid) not in (b"Z", b"X", b"") and _dying(pid)


def _resolving(pid: int, proc: str = "/proc") -> bool:
    """A process that resolves by itself in a moment, to be waited for, not named: crashmatrix's
    tie before its exec (``TIE_MARK``), or a process inside ``execve``. Between the moment its
    close-on-exec descriptors close (``Popen`` returns in the parent) and the moment the new
    program's arguments are laid out, its command line reads empty; a relay killed right after
    it started its tie left the tie listed there, twice in a row, then stopped and named "?"
    (a false ``no_effect_after_death``, 1 in ~4000 tests under load). A zombie's command line
    is empty too: it is dying, not resolving."""
    try:
        with open(f"{proc}/{pid}/cmdline", "rb") as stream:
            command = stream.read()
    except OSError:
        return False
    if command:
        return TIE_MARK in command
    return state(pid, proc) not in (b"Z", b"X", b"")


def _settle(parent: int, started: Collection[int]) -> None:
    """Wait until no descendant of ``parent`` outside ``started`` is exiting (bounded by
    ``_SETTLE``). The orphans are listed again each round: a chain dying by
    ``PR_SET_PDEATHSIG`` (the life, its agent, the MCP relay the agent spawned, the real
    server the relay started) hands each process to ``parent`` only as the one above it exits,
    so the roots first seen are zombies with no children by then.

    Quiet means quiet twice over the same processes: a listing is not one instant. A process
    handed from its dying parent to ``parent`` between the read of ``parent``'s children and
    the read of its old parent's is in neither; its old parent, a zombie by the time it was
    looked at, was not exiting either. A tie (1 in ~150 chain tests under load) was then
    found by the search that followed, stopped and named a survivor."""
    deadline = time.monotonic() + _SETTLE
    quiet: list[int] | None = None
    while time.monotonic() < deadline:
        orphans = [pid for pid in _children(parent) if pid not in started]
        listed = sorted(_subtree(orphans))
        if any(_exiting(pid) or _resolving(pid) for pid in listed):
            quiet = None
        elif listed == quiet:
            return
        else:
            # At once, no sleep (a settle runs after every life): a hand-over the first
            # listing straddled was complete before its last read, so this one sees it.
            quiet = listed
            continue
        time.sleep(0.002)


def _describe(pid: int) -> Survivor:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as stream:
            argv = [part.decode("utf-8", "replace") for part in stream.read().split(b"\0") if part]
    except OSError:
        argv = []
    command = " ".join(argv) or "?"
    try:
        session = os.getsid(pid)
    except OSError:
        session = -1
    return Survivor(pid, command[:200], session)


def _subtree(roots: Iterable[int]) -> list[int]:
    seen: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.append(pid)
        todo += _children(pid)
    return seen


def kill_adopted(parent: int, started: Collection[int]) -> tuple[Survivor, ...]:
    """Stop, record and kill every descendant of ``parent`` that it did not start itself
    (``started``: its own children, the lives): the orphans of lives that ended. The
    caller reaps them (they are its children, or its children's)."""
    stopped: dict[int, Survivor] = {}
    _settle(parent, started)
    for _ in range(_ROUNDS):
        orphans = [pid for pid in _children(parent) if pid not in started]
        fresh = [pid for pid in _subtree(orphans) if pid not in stopped and not _dying(pid)]
        if not fresh:
            break
        for pid in fresh:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)  # frozen first: listed, then killed, no fork between
            if _dying(pid):
                # It exited on its own between the listing and the stop (its command line was
                # already gone: named "?"): it can act no more, and is no survivor.
                continue
            stopped[pid] = _describe(pid)
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return tuple(sorted(stopped.values(), key=lambda survivor: survivor.pid))
