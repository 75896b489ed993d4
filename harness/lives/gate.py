"""The starting gate of a double resume, inside each concurrent life.

Two lives resuming one session race only if each reads the session before the other writes
it. Started together they rarely do by chance: one is a few milliseconds ahead, writes its
first line, and the other reads it. So each concurrent life stops at its first step -- the
first boundary it passes, session line it is about to append, or model request, whichever
comes first; for a recovering agent that is the pending call's recovery decision, taken and
not yet acted on -- writes a ``gate`` event, and waits. The harness
(``harness.lives.double_resume``) lets them go together once every concurrent life has
arrived or ended. An agent without a lease thus always has both lives past their reading of
the session before either acts: the double resume is deterministic, not a lucky
interleaving. An agent with a lease never reaches the gate in the second life (it stops at
the lease, before its first step), and the first is let go when the second has ended.

An agent in a process of its own (``command:``) or one whose requests the life serves
(``python:``) reaches the harness first through the life's loopback server: its first request
there -- the model, a tool, a service, a lookup -- is its first step too (``GatedTracer.hold``,
the life context's ``arrive``: the server calls it at the arrival of every request, before it
reads the body). An agent that reads its
session and decides before it asks anything is thus held past its decision, as a native one.

The gate is a FIFO the harness holds open for writing: a life opens it for reading (never
blocking: ``O_NONBLOCK``) and reads, which blocks until the harness closes its end (EOF
for every reader at once); a life that comes after the release reads EOF at once.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.double_resume import GATE_EVENT, WROTE_EVENT
from crashmatrix.harness.lives.tracer import Tracer

__all__ = ["GatedTracer", "wait_at"]


def wait_at(gate: str) -> None:
    """Block until the harness releases ``gate`` (closes its end of the FIFO)."""
    fd = os.open(gate, os.O_RDONLY | os.O_NONBLOCK)
    try:
        os.set_blocking(fd, True)
        while os.read(fd, 64):
            pass  # nothing is ever written: EOF is the release
    finally:
        os.close(fd)


class GatedTracer(Tracer):
    """A life's tracer that holds the life at its first step until the gate opens, and
    notes every session line the life appends (``wrote``: whose lines they are, when two
    lives append to one session). Everything else is the wrapped tracer's."""

    def __init__(self, inner: Tracer, gate: str) -> None:
        # Not Tracer.__init__: the wrapped tracer keeps the counters and the trace's descriptor.
        self.inner = inner
        self.life = inner.life
        self.crash = inner.crash
        self.path = inner.path
        self.seen = inner.seen
        self.gate = gate
        self._held = False
        # Steps come from several threads (the loopback server's, one a request): the one
        # that arrives first writes the gate event, the others wait for the same release.
        self._lock = threading.Lock()

    def hold(self) -> None:
        """The life reached a step: held there until the gate opens if it is its first, else
        let through at once."""
        with self._lock:
            if self._held:
                return
            self._held = True
            self.inner.write({"life": self.life, "event": GATE_EVENT})
            wait_at(self.gate)

    def write(self, record: dict[str, Any]) -> None:
        self.inner.write(record)

    def close(self) -> None:
        self.inner.close()

    def __del__(self) -> None:
        pass  # the wrapped tracer closes its own descriptor

    def boundary(self, boundary: str, tool_call_id: str) -> None:
        self.hold()
        self.inner.boundary(boundary, tool_call_id)

    def model_request(self) -> None:
        self.hold()
        self.inner.model_request()

    def before_append(self, path: Path, line: bytes) -> None:
        self.hold()
        self.inner.write({"life": self.life, "event": WROTE_EVENT, "bytes": len(line)})
        self.inner.before_append(path, line)
