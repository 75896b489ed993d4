"""Times every fsync a case makes, for the floor in ``benchmarks/matrix.py``.

Preloaded by the benchmark's fork server (and installed in the benchmark's own process): ``os.fsync`` and ``os.fdatasync`` are wrapped, in the server and
so in every life forked from it, and each call appends its duration in seconds to the file
named by ``$CRASHMATRIX_FSYNC_LOG`` (one ``write()`` per line, so a line survives the
SIGKILL that may follow). Session appends, directory syncs and the tools' atomic file
writes all count: they are the durable writes a case cannot do without.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

__all__ = ["LOG_VARIABLE", "install", "uninstall"]

LOG_VARIABLE = "CRASHMATRIX_FSYNC_LOG"

_ORIGINAL = {"fsync": os.fsync, "fdatasync": os.fdatasync}


def _timed(original: Callable[[int], None], log: str) -> Callable[[int], None]:
    def sync(fd: int) -> None:
        started = time.perf_counter()
        original(fd)
        took = time.perf_counter() - started
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(out, f"{took:.9f}\n".encode())
        finally:
            os.close(out)

    return sync


def install(log: str) -> None:
    os.fsync = _timed(_ORIGINAL["fsync"], log)  # type: ignore[assignment]
    os.fdatasync = _timed(_ORIGINAL["fdatasync"], log)  # type: ignore[assignment]


def uninstall() -> None:
    os.fsync = _ORIGINAL["fsync"]  # type: ignore[assignment]
    os.fdatasync = _ORIGINAL["fdatasync"]  # type: ignore[assignment]


if os.environ.get(LOG_VARIABLE):
    install(os.environ[LOG_VARIABLE])
