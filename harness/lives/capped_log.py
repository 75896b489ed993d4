"""What an agent prints, kept bounded: the first ``HEAD`` bytes and the last ``TAIL`` bytes of
each log (its stdout copy, its stderr), with one line between them saying how many bytes were
left out. An agent printing 200 MB must neither fill the disk nor make its case slow.

Every byte is written through, never held back in memory: a life killed at a crash point
leaves what it printed last in the file, which is what explains it. When a file grows past
``HEAD + 2 * TAIL``, its last ``TAIL`` bytes are copied to just after the head (with the
marker line) and the file is cut there: one copy of ``TAIL`` bytes per ``TAIL`` bytes
written. The copy lands before the bytes it copies, so a death in the middle of it leaves
the old tail in place at the end of the file.

A leaf module (``os`` only): the lives (stderr, fd 2) and the adapters (stdout) share it.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from crashmatrix.harness.lives.threads import GATE, quiet

__all__ = ["HEAD", "TAIL", "CappedLog", "Watch", "cap_file", "compact", "left_out", "watch"]

HEAD = 1 << 20
TAIL = 1 << 20
# The marker line, and how a later compaction finds the one an earlier one wrote.
_MARKER = "\n[crashmatrix: {at_least}{count} bytes of output left out here]\n"
_FOUND = re.compile(rb"\n\[crashmatrix: (?:at least )?(\d+) bytes of output left out here\]\n")
_MARKER_MAX = len(_MARKER.format(at_least="at least ", count=10**20))


def _marker(count: int, *, at_least: bool) -> bytes:
    return _MARKER.format(at_least="at least " if at_least else "", count=count).encode()


def left_out(data: bytes, head: int = HEAD) -> int:
    """How many bytes the marker in a capped log (its bytes ``data``) says were left out."""
    found = _FOUND.match(data, head)
    return int(found.group(1)) if found else 0


def compact(fd: int, size: int, *, head: int = HEAD, tail: int = TAIL, at_least: bool = False) -> int:
    """Cut the file open on ``fd`` (``size`` bytes, opened without O_APPEND) to its first
    ``head`` bytes, the marker and its last ``tail`` bytes; returns its new size. Nothing
    happens below ``head + 2 * tail`` plus a marker. ``at_least``: the file has writers the
    harness does not see (an agent's fd 2), whose bytes appended during the cut are lost."""
    if size <= head + 2 * tail + _MARKER_MAX:
        return size
    before = os.pread(fd, _MARKER_MAX, head)
    found = _FOUND.match(before)
    earlier, marker_length = (int(found.group(1)), len(found.group(0))) if found else (0, 0)
    kept_tail = os.pread(fd, tail, size - tail)
    dropped = earlier + (size - head - marker_length - tail)
    new = _marker(dropped, at_least=at_least or (found is not None and b"at least" in found.group(0)))
    _pwrite_all(fd, new + kept_tail, head)
    end = head + len(new) + len(kept_tail)
    os.ftruncate(fd, end)
    return end


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


class CappedLog:
    """A log the harness writes an agent's output to, bounded (see the module)."""

    def __init__(self, path: Path, *, head: int = HEAD, tail: int = TAIL) -> None:
        self.head, self.tail = head, tail
        # Not O_APPEND: a positioned write on Linux would append regardless of its offset.
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.lseek(self.fd, 0, os.SEEK_END)  # a later life's lines follow the last's

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(self.fd, view, self.size)
            view, self.size = view[written:], self.size + written
        if self.size > self.head + 2 * self.tail + _MARKER_MAX:
            self.size = compact(self.fd, self.size, head=self.head, tail=self.tail)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> CappedLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Watch:
    """A daemon thread keeping a file others append to bounded (``watch``)."""

    def __init__(self, path: Path, every: float, head: int, tail: int) -> None:
        self.path, self.every, self.head, self.tail = path, every, head, tail
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"capped {path.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # Quiet between its cuts, each cut under the snapshots' gate: a clean life's snapshot
        # need not wait for this thread, nor leave its point to a killed life for it.
        with quiet():
            while True:
                stopping = self._stop.wait(self.every)
                with GATE:
                    cap_file(self.path, head=self.head, tail=self.tail)
                if stopping:
                    return

    def stop(self) -> None:
        """The last cut, made before this returns (the writers are done)."""
        self._stop.set()
        self._thread.join(5)


def watch(path: Path, *, every: float = 0.05, head: int = HEAD, tail: int = TAIL) -> Watch:
    """Keep ``path`` bounded while others append to it (an agent's fd 2, written by the
    kernel for it and its children): a daemon thread looks every ``every`` seconds and cuts
    it when it grew too long. Bytes appended while it cuts are lost, so its marker says "at
    least". ``stop()`` makes the last cut; a life killed before it leaves the file as the
    last look left it, plus what was written since (``cap_file`` once it is over)."""
    return Watch(path, every, head, tail)


def cap_file(path: Path, *, head: int = HEAD, tail: int = TAIL) -> None:
    """Cut ``path`` to its head, the marker and its tail, if it is longer (see ``compact``);
    a file that is not there is left so."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        compact(fd, os.fstat(fd).st_size, head=head, tail=tail, at_least=True)
    finally:
        os.close(fd)
