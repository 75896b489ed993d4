"""Kind 3: the agent as a supervised process (stopped while a crash edge is decided, its output
pumped to answer prompts)."""

from __future__ import annotations

import codecs
import contextlib
import os
import select
import signal
import subprocess
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from crashmatrix.harness.agents.conversation import _PROMPT_WINDOW, Conversation, UnansweredApproval
from crashmatrix.harness.lives.capped_log import CappedLog
from crashmatrix.harness.lives.descendants import kill_adopted, tracking
from crashmatrix.harness.lives.threads import active, quiet

__all__ = []

_CHUNK = 1 << 16  # a pipe's whole buffer per read


# -- kind 3: a supervised process ----------------------------------------------------------


@contextlib.contextmanager
def _stopped(pid: int) -> Iterator[None]:
    """The agent's process group is stopped inside the block (so it cannot act on a reply
    the hook may be about to kill it after). A stopped process still dies of SIGKILL, and
    the kernel SIGKILLs the agent when the life dies (PR_SET_PDEATHSIG)."""
    try:
        os.killpg(pid, signal.SIGSTOP)
        # kill() only queues the signal; wait until the stop took effect (or it exited).
        os.waitid(os.P_PID, pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
    except (ProcessLookupError, ChildProcessError):
        pass
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGCONT)


def _left_behind(trace: Callable[[Mapping[str, Any]], None], own: Collection[int] = ()) -> None:
    """After the agent exited: what it left running (its process group, a ``setsid`` daemon,
    all re-parented to this life, a subreaper) is stopped, named in the trace and killed.
    Killing its group silently instead would hide exactly what no_effect_after_death is for.
    ``own``: the life's own children that outlive the agent on purpose (its MCP relay)."""
    if not tracking():
        return
    left = kill_adopted(os.getpid(), own)
    if left:
        trace({"event": "survivors", "processes": [survivor.describe() for survivor in left]})


def _pump(process: subprocess.Popen[bytes], conversation: Conversation, log: Path) -> None:
    """Read the agent's stdout; answer prompts on its stdin. Runs until the agent's stdout closes.

    What it prints goes to a bounded log (``CappedLog``). A prompt is matched only once the
    agent has stopped printing (nothing more is readable right away: it waits for an
    answer), and only against the last ``_PROMPT_WINDOW`` characters: an agent printing
    200 MB is read as fast as it prints, not matched 50,000 times."""
    assert process.stdout is not None
    fd = process.stdout.fileno()
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    pending: list[str] = []
    size = 0
    with CappedLog(log) as copy, quiet():
        while True:
            # Quiet while it waits for output: a kind-3 agent stopped at its edge prints
            # nothing, so a snapshot copies with the pump idle (harness.lives.threads). What it
            # read is handled active, entered under the snapshots' gate: never during a copy.
            chunk = os.read(fd, _CHUNK)
            with active():
                if not chunk:
                    return
                copy.write(chunk)
                text = decoder.decode(chunk)
                pending.append(text)
                size += len(text)
                if size > 2 * _PROMPT_WINDOW:
                    window = "".join(pending)[-_PROMPT_WINDOW:]
                    pending, size = [window], len(window)
                if select.select([fd], [], [], 0)[0] or process.stdin is None:
                    # More is there already: it is still printing, not asking. No stdin: an agent
                    # given its message another way, asking no approval, reads end of input.
                    continue
                try:
                    line = conversation.answer("".join(pending)[-_PROMPT_WINDOW:], waiting=False)
                except UnansweredApproval:
                    # No answer is truthful: the agent goes, unanswered; the life raises it once
                    # the agent is gone (conversation.unanswered), not as an unplanned death.
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    return
                if line is None:
                    continue
                pending, size = [], 0
                copy.write(line.encode("utf-8"))
                try:
                    if line:
                        process.stdin.write(line.encode("utf-8"))
                        process.stdin.flush()
                    else:
                        process.stdin.close()  # no turns left: end of input, the agent exits
                except (BrokenPipeError, ValueError):
                    return
