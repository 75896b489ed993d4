"""How much of an input file crashmatrix will read.

A scenario, contract or adapter file is a few KB (the built-in suite's largest is under
5 KB); a file of tens of MB is a mistake (a log or a generated dump passed by hand), and
reading it whole would take minutes and memory before any message. So every input file is
measured before it is read, and one past the limit is refused in one line that names the
file, its size, the limit and how to raise it.
"""

from __future__ import annotations

import os
from pathlib import Path

from crashmatrix.harness.errors import InputError

__all__ = ["ENV", "MAX_INPUT_BYTES", "input_limit", "oversize"]

# 4 MiB: some hundred times the largest scenario anyone writes by hand, and still read and
# checked in about a second.
MAX_INPUT_BYTES = 4 * 1024 * 1024
ENV = "CRASHMATRIX_MAX_INPUT_BYTES"


def input_limit() -> int:
    """The limit in force: ``$CRASHMATRIX_MAX_INPUT_BYTES`` when set, else ``MAX_INPUT_BYTES``."""
    raw = os.environ.get(ENV)
    if raw is None or raw == "":
        return MAX_INPUT_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(
            f"${ENV}={raw!r} is not a positive number of bytes; unset it or write one such as 8388608"
        )
    return value


def oversize(path: Path, limit: int | None = None) -> str | None:
    """Why ``path`` is too large to read (one line, without the path), or None if it is not
    (or cannot be measured: reading it then says why)."""
    limit = input_limit() if limit is None else limit
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size <= limit:
        return None
    return (
        f"file is {size} bytes, over crashmatrix's input limit of {limit} bytes; "
        f"is it the right file? (set ${ENV} to a larger number of bytes if it is)"
    )
