"""Tie a helper process's life to its parent's: the kernel SIGKILLs it when the parent dies.

Used by every agent life (its parent is the fork server) and by the fork server itself (its
parent is the harness process that started it; ``harness.lives.forkserver.serve``). Together they
mean that however the harness ends -- Ctrl-C, SIGTERM, or a SIGKILL from a CI timeout -- no
fork server and no agent life, hung or not, is left behind.

Linux only (``prctl(PR_SET_PDEATHSIG)``); elsewhere a no-op. The signal follows the parent
THREAD: start lives from the thread that lives as long as the run (pytest's main thread).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGKILL)
