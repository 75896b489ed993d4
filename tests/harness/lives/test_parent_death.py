"""A helper process dies with its parent, even when the parent died before it could ask."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from crashmatrix.harness.lives.parent_death import die_with_parent

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux-only")


def _child_status(parent: int | None) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            die_with_parent(parent)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return status


def test_a_parent_that_died_before_the_request_kills_the_child() -> None:
    # The pid the parent had when it forked is not the child's parent any more (it died and
    # the child was reparented): the child must not live on as an orphan.
    gone = 2**22 + 12345  # no such parent: beyond pid_max's default range
    status = _child_status(gone)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


def test_a_living_parent_keeps_the_child() -> None:
    status = _child_status(os.getpid())
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    status = _child_status(None)  # read from getppid(): this process, alive
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
