"""Waiting for something another process does: poll a condition until a deadline.

A test never sleeps a fixed time and hopes: under load the event comes later (a flaky
failure) and without load it came long before (time wasted). It polls the condition it
needs, up to a deadline derived from what bounds the event (a case deadline, a harness
timeout), and asserts on the condition afterwards with a message saying what was seen.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_until"]

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
