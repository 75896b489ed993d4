"""Waiting for something another process does: poll a condition until a deadline.

A test never sleeps a fixed time and hopes: under load the event comes later (a flaky
failure) and without load it came long before (time wasted). It polls the condition it
needs, up to a deadline derived from what bounds the event (a case deadline, a harness
timeout), and asserts on the condition afterwards with a message saying what was seen.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

__all__ = ["texts_under", "wait_until"]

T = TypeVar("T")


def wait_until(condition: Callable[[], T], *, within: float, every: float = 0.05) -> T:
    """Call ``condition`` every ``every`` seconds until it returns a true value or ``within``
    seconds have passed; return its last value (false on a timeout)."""
    deadline = time.monotonic() + within
    while True:
        value = condition()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(every)


def texts_under(root: Path, name: str) -> Iterator[str]:
    """The text of each file called ``name`` under ``root``, read while other processes create
    and remove directories there: a directory or file gone between listing and reading is
    skipped (os.walk skips a directory it cannot list; ``Path.rglob`` raises, as once when a
    fork server's warm-up life removed its case directory mid-walk)."""
    for folder, _, files in os.walk(root):
        if name in files:
            try:
                yield Path(folder, name).read_text(encoding="utf-8", errors="replace")
            except FileNotFoundError:
                continue
