"""Double resume, parent side: two lives recover one crashed session at the same time.

``double@P`` models a job redelivered while its first worker still runs (at-least-once
delivery, a visibility timeout that expired, a pod restarted while the old one lives):
life 1 is SIGKILLed at ``P`` (P's shared first crash, never run again), then lives 2 and 3
start together on a copy of what it left -- the same session, the same world -- each a real
process forked like any life, each with its deadline.

The schedule (what makes the race deterministic): each concurrent life stops at its first
step (``harness.lives.gate``) and the harness releases them together once every one has
arrived or ended. Without a lease both lives have read the session and decided what to do
with the pending call before either acts, so both act: two effects of a call the ledger
says never started, two Tool Results. With a lease the second life stops before its first
step, and the first is released as soon as the second has ended. A life that does not
arrive within ``SETTLE`` seconds of the first one (an agent that waits on a lock rather
than exits) does not hold the others longer: they are released, and it goes on when it
gets the lock. Then, if neither concurrent life finished the session, one more life does
(as ``recovery@P``'s third start), and the case is judged by P's expectations and the
invariants, ``loser_stops_cleanly`` among them (``harness.core.double_resume``).

An agent that writes its own session (``command:``, ``python:``) is held at its first request
to its life's loopback server as well (``LifeContext.arrive``): each life serves its own model,
tools and services, so that request is the life's, and so is every effect it leads to.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from crashmatrix.harness.agents.loading import adapter_for
from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.double_resume import (
    DOUBLE_EVENT,
    GATE_EVENT,
    LINES_PER_LIFE,
    LINES_SESSION,
    RELEASED_EVENT,
)
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.trace import CaseRun, LifeRecord, TraceEvent
from crashmatrix.harness.errors import HarnessError
from crashmatrix.harness.lives.between import apply_between_lives
from crashmatrix.harness.lives.casedir import clone_case
from crashmatrix.harness.lives.injector import ABNORMAL, LifeLauncher, _ended_event
from crashmatrix.harness.lives.life import LifeSpec
from crashmatrix.harness.lives.tracer import append_event, read_trace

__all__ = ["CONCURRENT", "SETTLE", "run_double"]

# The lives that resume at once, after life 1's crash.
CONCURRENT = (2, 3)
# Seconds the gate waits, after the first life arrived, for the others to arrive or end.
SETTLE = 5.0
_POLL = 0.005
GATE_FILE = "gate.fifo"


def _released_why(arrived: set[int], ended: set[int], lives: Sequence[int]) -> str | None:
    """Why the gate may open now (every concurrent life arrived or ended), else None."""
    if not all(life in arrived or life in ended for life in lives):
        return None
    if all(life in arrived for life in lives):
        return "every concurrent life reached its first step"
    gone = ", ".join(str(life) for life in lives if life not in arrived)
    return f"life {gone} ended before its first step"


def _hold_until_ready(
    case_dir: Path, threads: dict[int, threading.Thread], deadline: float, settle: float
) -> str:
    """Poll the trace until the gate may open; the reason it opened."""
    started = time.monotonic()
    first: float | None = None
    while True:
        trace = read_trace(case_dir)
        arrived = {int(e["life"]) for e in trace if e.get("event") == GATE_EVENT and e.get("life") in threads}
        ended = {life for life, thread in threads.items() if not thread.is_alive()}
        why = _released_why(arrived, ended, list(threads))
        if why is not None:
            return why
        now = time.monotonic()
        if arrived and first is None:
            first = now
        if first is not None and now - first >= settle:
            late = ", ".join(str(life) for life in threads if life not in arrived and life not in ended)
            return f"life {late} did not reach its first step within {settle:g}s of the first (waiting)"
        if now - started >= deadline:
            return f"no life reached its first step within {deadline:g}s"
        time.sleep(_POLL)


def run_double(
    case_dir: Path,
    scenario: Scenario,
    launcher: LifeLauncher,
    *,
    crashed: CaseRun,
    point: CrashPoint,
    agent: str = "reference",
    deadline: float = 30.0,
    settle: float = SETTLE,
) -> CaseRun:
    """``double@point``'s lives, from ``crashed`` (a case stopped after a life 1 that crashed
    at ``point``, as ``run_case(max_lives=1)`` leaves it), copied to ``case_dir``."""
    if len(crashed.lives) != 1 or crashed.lives[0].status != "crashed" or crashed.lives[0].crash != point.id:
        raise HarnessError(f"double@{point.id} starts from a first life that crashed at {point.id}")
    clone_case(crashed.case_dir, case_dir)
    lives: list[LifeRecord] = [crashed.lives[0]]
    adapter = adapter_for(agent)
    # What happens between a crash and its restart happens once, before both restarts.
    editable = getattr(adapter, "edits_native_session", True)
    apply_between_lives(case_dir, scenario, session_editable=editable, agent=agent)
    gate = case_dir / GATE_FILE
    os.mkfifo(gate)
    try:
        return _race(case_dir, scenario, launcher, lives, gate, agent, deadline, settle)
    finally:
        gate.unlink()  # a FIFO left in the case directory would stop a copy of it (clone_case)


def _race(
    case_dir: Path,
    scenario: Scenario,
    launcher: LifeLauncher,
    lives: list[LifeRecord],
    gate: Path,
    agent: str,
    deadline: float,
    settle: float,
) -> CaseRun:
    adapter = adapter_for(agent)
    # Held open for writing until the release: a reader's read() blocks until it is closed.
    holder = os.open(gate, os.O_RDWR | os.O_NONBLOCK)
    # A native agent's lines are each its life's (``wrote`` events); any other's are not.
    lines = LINES_PER_LIFE if getattr(adapter, "double_resume", False) else LINES_SESSION
    append_event(case_dir, {"event": DOUBLE_EVENT, "lives": list(CONCURRENT), "lines": lines})
    ended: dict[int, tuple[LifeRecord, Sequence[TraceEvent]]] = {}
    failures: list[BaseException] = []

    def live(life: int) -> None:
        spec = LifeSpec(str(case_dir), scenario, agent, life, gate=str(gate))
        try:
            ended[life] = launcher.run(spec, deadline=deadline)
        except BaseException as error:  # the harness's own failure, raised below in this thread
            failures.append(error)

    threads = {life: threading.Thread(target=live, args=(life,), daemon=True) for life in CONCURRENT}
    for thread in threads.values():
        thread.start()
    try:
        why = _hold_until_ready(case_dir, threads, deadline, settle)
        append_event(case_dir, {"event": RELEASED_EVENT, "lives": list(CONCURRENT), "why": why})
    finally:
        os.close(holder)  # the release: every held life reads EOF at once
    for thread in threads.values():
        thread.join()
    if failures:
        raise failures[0]
    after_life = getattr(adapter, "after_life", None)
    for life in CONCURRENT:
        record, trace = ended[life]
        lives.append(record)
        if record.status in ABNORMAL:
            append_event(case_dir, _ended_event(record, trace))
        if callable(after_life):
            after_life(case_dir, record, trace)
    if not any(record.status == "exited" for record in lives[1:]):
        # Neither finished the session (both crashed or died): one more life does, as the
        # third start of recovery@P would.
        record, trace = launcher.run(
            LifeSpec(str(case_dir), scenario, agent, CONCURRENT[-1] + 1), deadline=deadline
        )
        lives.append(record)
        if record.status in ABNORMAL:
            append_event(case_dir, _ended_event(record, trace))
        if callable(after_life):
            after_life(case_dir, record, trace)
    trace = read_trace(case_dir)
    errors = {e["life"]: e["error"] for e in trace if e.get("event") == "error"}
    return CaseRun(
        case_dir,
        tuple(replace(r, error=str(errors[r.life])) if r.life in errors else r for r in lives),
        trace,
    )
