"""Which threads of a life may write while a snapshot is copied (``harness.lives.snapshots``).

A kill at a crash point stops every thread of the life at once; a snapshot pauses only the
thread at the boundary while a child copies the case directory. The copy is what the kill
leaves only if nothing else of the life writes meanwhile: so a point is snapshotted only when
the thread at the boundary is the life's only thread, besides the quiet ones.

A thread is quiet while it is inside ``quiet()``, and a quiet thread acts (writes to the case,
runs a tool, starts a thread) only while it holds ``GATE``; it leaves ``quiet()`` under
``GATE`` too. A snapshot holds ``GATE`` from its count to the end of its copy, so no quiet
thread acts or wakes up meanwhile. The harness's quiet threads in a life:

* the loopback server's accept loop (``harness.agents.loopback``), which starts each handler
  thread under ``GATE``: a handler is counted, or not started until the copy is made;
* a handler thread, except while it answers a request (``active()``, entered under ``GATE``
  when the request arrives): waiting for the next one on a kept-alive connection (an agent's
  HTTP client keeps it open between requests), or closing the connection once answered;
* the watcher that keeps the life's stderr file bounded (``harness.lives.capped_log``), which
  cuts it under ``GATE`` (a kind-3 agent's stderr file has one too);
* a kind-3 agent's pump (``harness.agents.supervised._pump``), except while it handles what
  the agent printed (``active()``): waiting for output, which a stopped agent never gives;
* a kind-3 life's main thread while it waits for the agent to exit;
* the loopback server's wait for an MCP relay's ``/mcp/sent`` (``LoopbackServer._thaw_late``),
  which lets the stopped agent go under ``GATE`` if it never comes.

Threads are counted from ``/proc/self/task``, the kernel's list: a C extension's threads
(a framework's runtime, a database driver's pool) are there, not only ``threading``'s.

A quiet thread inside ``active()`` is about to be quiet again: a handler that has sent its
answer (the agent already acting on it, up to the next boundary) still has to return from
the request, and on a loaded machine it can wait for a core for tens of milliseconds. A
snapshot waits for such threads (``settled``, bounded) rather than leave its point to a
killed life: what they do meanwhile is what they may do before a kill's signal lands, since
a kill of the life is not in step with its other threads either. A thread never declared
quiet (an agent's own) is not waited for: it may run on until the kill.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator

__all__ = ["GATE", "active", "quiet", "settled"]

GATE = threading.Lock()
_QUIET: set[int] = set()  # native ids
_ACTING: set[int] = set()  # native ids of quiet threads inside active()


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The calling thread is quiet inside: it acts only while holding ``GATE``. It leaves
    under ``GATE``: never in the middle of a snapshot's copy."""
    native = threading.get_native_id()
    _QUIET.add(native)
    try:
        yield
    finally:
        with GATE:
            _QUIET.discard(native)


@contextlib.contextmanager
def active() -> Iterator[None]:
    """Inside ``quiet()``: the calling thread acts for a while without holding ``GATE`` (a
    handler answering a request). It becomes active under ``GATE`` and quiet again after.
    Outside ``quiet()`` it changes nothing: a thread never declared quiet stays counted."""
    native = threading.get_native_id()
    with GATE:
        was_quiet = native in _QUIET
        if was_quiet:
            _ACTING.add(native)
        _QUIET.discard(native)
    try:
        yield
    finally:
        if was_quiet:
            # Quiet first: a snapshot looking in between sees it quiet, never as running
            # and not acting (a thread it would not wait for).
            _QUIET.add(native)
            _ACTING.discard(native)


def settled(within: float) -> int:
    """How many threads of this process may write while this one waits: all but the caller and
    the quiet ones, once those acting for a while (inside ``active()``) are quiet again,
    waiting up to ``within`` seconds for them (0: counted as they are). At once when a thread
    that never declared itself quiet runs (nothing to wait for); at the deadline, as they
    stand then: a thread acting may itself wait for ``GATE``, which the caller holds. -1 when
    the kernel's list cannot be read (not Linux): count unknown."""
    deadline = time.monotonic() + within
    me = threading.get_native_id()
    while True:
        try:
            tasks = {int(name) for name in os.listdir("/proc/self/task")}
        except OSError:
            return -1
        running = tasks - {me} - _QUIET
        if not running or running - _ACTING or time.monotonic() >= deadline:
            return len(running)
        time.sleep(0.0005)
