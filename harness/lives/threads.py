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
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

__all__ = ["GATE", "active", "quiet", "running_besides_this_one"]

GATE = threading.Lock()
_QUIET: set[int] = set()  # native ids


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
        _QUIET.discard(native)
    try:
        yield
    finally:
        if was_quiet:
            _QUIET.add(native)


def running_besides_this_one() -> int:
    """How many threads of this process may write while this one waits: all but the caller and
    the quiet ones. -1 when the kernel's list cannot be read (not Linux): count unknown."""
    try:
        tasks = {int(name) for name in os.listdir("/proc/self/task")}
    except OSError:
        return -1
    return len(tasks - {threading.get_native_id()} - _QUIET)
