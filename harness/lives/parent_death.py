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


def die_with_parent(parent: int | None = None) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies; die now if it already has.

    ``parent``: the parent's pid as the PARENT knew it before it forked or started this
    process. Read here instead (``os.getppid()``), a parent that died between the fork and
    this call is already gone: the orphan reads its new parent (init) and lives on. That race
    left a hung life behind once, when a SIGKILLed harness took its fork server with it just
    as the server forked."""
    if not sys.platform.startswith("linux"):
        return
    if parent is None:
        parent = os.getppid()  # best effort: a caller that knows the pid passes it
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGKILL)
