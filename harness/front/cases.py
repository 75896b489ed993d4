"""The crash matrix of one scenario, independent of pytest (the plugin, the CLI, explore and
the kill matrix share it). Every case goes through the stages once, in order:

    plan (which point, which second crash)  ->  lives (``run_case``: the forked, killed,
    restarted agent)  ->  observation (the adapter reads what the lives left, once)  ->
    verdict (a pure function of the expectation and the observation)  ->  ``CaseResult``
    (what reports and failure texts are made of).

1. ``enumerate_points``: a clean run records every boundary it passes; each recorded point
   becomes one case (ALICE / CrashMonkey style), so nobody hand-lists crash points and a new
   boundary in the agent is covered automatically.
2. ``run_point``: one case, judged.
3. ``run_power``: ``power@P``, a power loss at P: what was not durable is lost, then the
   agent restarts (``harness/lives/power.py``); from P's shared first crash.
4. ``run_recovery``: depth 2: crash at a point, then crash the restarted agent at each
   boundary it passes while recovering (until it asks the model again), and require the
   third start to end correctly.
5. ``run_tool_fault``: a tool-side column's case (``tool_server_died[call_1]``): a clean
   case with that fault armed for that call before life 1; the agent is never killed, the
   tool side fails it (``harness.core.tool_side``), and the invariants judge what it did.
6. ``run_double``: ``double@P``, from P's first crash two lives resume the same session at
   once, held at their first step and released together (``harness/lives/double_resume.py``);
   one acts, the other must stop cleanly.

A case whose harness side fails (an exception from any stage: a copy, a reader, a bug of
ours) is still a case: ``guarded`` makes it an ``error`` verdict with the cause in one line
and the traceback in the case's ``harness-error.log``, so every report counts it, red,
instead of a traceback beside a matrix that left it out.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from crashmatrix.harness.agents.loading import adapter_for, observe
from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.double_resume import DOUBLE_EVENT, DOUBLE_PREFIX, LINES_SESSION, RELEASED_EVENT
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.tool_side import tool_faults_acted
from crashmatrix.harness.core.trace import CaseRun, TraceEvent
from crashmatrix.harness.errors import CrashmatrixError, DiskFull, SessionCorruption
from crashmatrix.harness.lives.casedir import disk_full
from crashmatrix.harness.lives.first_crash import SAME_LIVES, FirstCrashes, first_crash, own_copy, power_after
from crashmatrix.harness.lives.injector import LifeLauncher, run_case
from crashmatrix.harness.lives.power import FAULT_EVENT
from crashmatrix.harness.observation.observation import AppliedFault, Observation
from crashmatrix.harness.observation.reading import unreadable_session
from crashmatrix.harness.plan.enumeration import (
    DOUBLE_COLUMN,
    by_call,
    points_from_trace,
    recovery_window,
    tool_side_points,
)
from crashmatrix.harness.verdict.result import CaseResult, SubCase, failures_first
from crashmatrix.harness.verdict.verdict import Verdict, judge, unjudged_in_every
from crashmatrix.reports.timeline import timeline_of

__all__ = [
    "HARNESS_ERROR_LOG",
    "Enumeration",
    "enumerate_points",
    "error_cause",
    "guarded",
    "harness_error",
    "run_double",
    "run_point",
    "run_power",
    "run_recovery",
    "run_tool_fault",
    "with_harness_faults",
]

# Beside a case whose harness side failed: the traceback (its record holds one line).
HARNESS_ERROR_LOG = "harness-error.log"
# A cause line longer than this is cut: the log file has all of it (a ``shutil.Error``
# lists every file it could not copy).
_CAUSE_CHARS = 300


@dataclass(frozen=True)
class Enumeration:
    points: tuple[CrashPoint, ...]
    clean: CaseRun
    clean_verdict: Verdict
    clean_observation: Observation
    scenario: Scenario
    agent: str = "reference"
    seconds: float = 0.0
    # The tool-side items (``tool_server_died[call_1]`` ...): each kind for each call that
    # reached the tool side in this run (``harness.plan.enumeration.tool_side_points``).
    tool_side: tuple[CrashPoint, ...] = ()

    def clean_case(self) -> CaseResult:
        """The clean case of the matrix: the enumeration run is one, judged already."""
        return CaseResult(
            self.scenario,
            "clean",
            "clean",
            self.clean_verdict,
            self.seconds,
            len(self.clean.lives),
            self.clean.case_dir,
            self.agent,
            observation=self.clean_observation,
        )


def _judged(
    run: CaseRun,
    scenario: Scenario,
    point: CrashPoint | None,
    agent: str,
    *,
    recovery: bool = False,
    check_ledger: bool = True,
) -> tuple[Observation, Verdict]:
    """The observation and the verdict of a run: the stages after the lives."""
    observation = with_harness_faults(observe(adapter_for(agent), run))
    verdict = judge(observation, scenario, point, recovery=recovery, check_ledger=check_ledger)
    # The proof each fault happened, shown with the verdict (passed or not); a tool-side fault's
    # event may carry no detail: its case's name says on which call.
    acted = [f"{f.fault}: {f.detail or 'acted'}" for f in _harness_faults(run.trace) if f.acted]
    if acted:
        verdict = dataclasses.replace(verdict, notes=(*verdict.notes, *acted))
    return observation, verdict


def _harness_faults(trace: Sequence[TraceEvent]) -> tuple[AppliedFault, ...]:
    return tuple(
        AppliedFault(str(event.get("fault")), bool(event.get("acted")), str(event.get("detail", "")))
        for event in trace
        if event.get("event") == FAULT_EVENT
    )


def with_harness_faults(observation: Observation) -> Observation:
    """The observation with the faults the harness did after a life -- a power loss
    (``harness.lives.power``), a supervisor's torn write (``harness.agents.foreign``) -- as
    faults applied between lives, each with whether it acted (the trace's ``fault`` events).
    The verdict then treats one that could not act on this agent as it treats any fault
    that did nothing: the case is not applicable, with the reason, never passed."""
    faults = _harness_faults(observation.trace)
    if not faults:
        return observation
    lost = [
        (int(event.get("requests_before", 0)), int(event.get("events_before", 0)))
        for event in observation.trace
        if event.get("event") == FAULT_EVENT and event.get("session_lost")
    ]
    between = dataclasses.replace(
        observation.between_lives,
        applied=(*observation.between_lives.applied, *faults),
        session_lost=lost[-1] if lost else observation.between_lives.session_lost,
    )
    return dataclasses.replace(observation, between_lives=between)


def enumerate_points(
    scenario: Scenario,
    launcher: LifeLauncher,
    work_dir: Path,
    *,
    agent: str = "reference",
    deadline: float = 30.0,
    shared: FirstCrashes | None = None,
) -> Enumeration:
    """The clean case, judged, and the points it passed. With ``shared``, the clean case is
    the session's one run of it (``FirstCrashes.clean``: run by whichever process gets
    there first, with snapshots its life leaves every point's first crash), judged in a copy
    in ``work_dir``."""
    started = time.monotonic()
    try:
        if shared is not None:
            run = own_copy(shared.clean(scenario, launcher, agent=agent, deadline=deadline), work_dir)
        else:
            run = run_case(work_dir, scenario, launcher, agent=agent, deadline=deadline)
        observation, verdict = _judged(run, scenario, None, agent)
    except Exception as error:
        _raise_if_disk_full(error, work_dir)
        raise
    points = tuple(_in_order(points_from_trace(run.trace, 1), scenario, agent))
    return Enumeration(
        points,
        run,
        verdict,
        observation,
        scenario,
        agent,
        time.monotonic() - started,
        tuple(tool_side_points(run.trace, points)),
    )


def _in_order(points: Sequence[CrashPoint], scenario: Scenario, agent: str) -> list[CrashPoint]:
    """The clean run's points in an order every run of this agent gives: as passed, or, for
    an agent whose calls run at the same time (``concurrent_calls``), grouped by call."""
    if getattr(adapter_for(agent), "concurrent_calls", False):
        return by_call(points, scenario)
    return list(points)


def run_point(
    scenario: Scenario,
    point: CrashPoint | None,
    launcher: LifeLauncher,
    case_dir: Path,
    *,
    agent: str = "reference",
    deadline: float = 30.0,
    power_loss: bool = False,
    second: CrashPoint | None = None,
    shared: FirstCrashes | None = None,
) -> CaseResult:
    """One case. With ``power_loss`` the crash also drops unsynced session bytes; it is
    judged against the same expectations as the plain crash at that point (an agent that
    fsyncs before each step cannot tell the two apart), and named ``power@<point>``. On an
    agent whose fsyncs the harness cannot see (a black box, a SQLite session) the loss cannot
    act: the case is not applicable with that reason, never passed (``with_harness_faults``).

    With ``shared``, the lives are those ``recovery@point`` also starts with, run once for
    both (``harness/lives/first_crash.py``), and judged in a copy of their directory in
    ``case_dir`` (``own_copy``: the shared one is only ever copied); for a point no other
    item starts from, resumed from the clean life's snapshot into ``case_dir``
    (``FirstCrashes.point_run``)."""
    started = time.monotonic()
    if shared is not None and point is not None and second is None and not power_loss:
        run = shared.point_run(scenario, point, launcher, case_dir, agent=agent, deadline=deadline)
        started = _charged(run)
    else:
        run = run_case(
            case_dir,
            scenario,
            launcher,
            agent=agent,
            point=point,
            second=second,
            deadline=deadline,
            power_loss=power_loss,
        )
    # With a second crash (while recovering) the ledger holds extra attempts: judged as a
    # depth-2 case (``recovery`` expectations, no ledger sequence), like run_recovery does.
    observation, verdict = _judged(
        run, scenario, point, agent, recovery=second is not None, check_ledger=second is None
    )
    name = point.id if point else "clean"
    return CaseResult(
        scenario,
        f"power@{name}" if power_loss and point else name,
        "power_loss" if power_loss and point else (point.boundary if point else "clean"),
        verdict,
        time.monotonic() - started,
        len(run.lives),
        case_dir,
        agent,
        observation=observation,
    )


def run_power(
    scenario: Scenario,
    point: CrashPoint,
    launcher: LifeLauncher,
    case_dir: Path,
    *,
    agent: str = "reference",
    deadline: float = 30.0,
    shared: FirstCrashes | None = None,
) -> CaseResult:
    """``power@P``: judged as ``run_point(..., power_loss=True)`` is, against P's expectations
    (an agent that makes each step durable before the next cannot tell the two apart).

    With ``shared`` (the pytest column), life 1 is P's first crash, recorded with its fsyncs
    (``FirstCrashes(record_syncs=True)``), and the power loss is cut into a copy of it
    (``power_after``); if it changed nothing, P's recovering lives are reused and the verdict
    says so. Without, the case runs whole."""
    if shared is None:
        return run_point(scenario, point, launcher, case_dir, agent=agent, deadline=deadline, power_loss=True)
    started = time.monotonic()
    found = shared.get(scenario, point, launcher, agent=agent, deadline=deadline)
    if found.crashed is None:
        # Life 1 never crashed at P (not reached, hung, an error): neither did the power go.
        run, reused = own_copy(found.run, case_dir / "run"), False
    else:
        run, reused = power_after(found, scenario, point, launcher, case_dir, agent=agent, deadline=deadline)
    observation, verdict = _judged(run, scenario, point, agent)
    if reused:
        verdict = dataclasses.replace(verdict, notes=(*verdict.notes, SAME_LIVES.format(point=point.id)))
    return CaseResult(
        scenario,
        f"power@{point.id}",
        "power_loss",
        verdict,
        time.monotonic() - started,
        len(run.lives),
        run.case_dir,
        agent,
        observation=observation,
    )


def run_tool_fault(
    scenario: Scenario,
    point: CrashPoint,
    launcher: LifeLauncher,
    case_dir: Path,
    *,
    agent: str = "reference",
    deadline: float = 30.0,
    shared: FirstCrashes | None = None,
) -> CaseResult:
    """A tool-side column's case: ``point`` names the kind (its boundary) and the call. A
    clean case with that fault armed for that call before life 1 (``tool_faults.arm``); the
    life serving the call's first request takes it, acts and writes a ``fault`` event.

    Judged by the invariants alone (``judge`` knows the columns): a scenario's expectations
    say how a crash ends, and a correct agent may end a tool's failure otherwise (it gives
    up on the order and says so). A case whose fault never acted -- the call never reached
    the tool side in this run -- is not reached, never passed. ``shared`` is accepted for
    the runners' one signature: nothing is shared, no first crash precedes the fault.

    An agent that raises or exits non-zero on the fault is restarted, as a supervisor restarts
    a crash-only agent, and judged on what it did then (``run_case``'s ``restart_after_fault``):
    red means a second effect, a blind resend, a lie to the model, a lost result -- not one
    exit on a tool server that died. A pass says so in a note ("life 1 died: on the tool-side
    fault ..."); an error before the fault acted stays an error."""
    from crashmatrix.harness.agents.tool_faults import ToolSideFault, arm

    started = time.monotonic()
    fault = ToolSideFault(point.boundary, point.tool_call_id)
    run = run_case(
        case_dir,
        scenario,
        launcher,
        agent=agent,
        deadline=deadline,
        prepare=lambda fresh: arm(fresh, fault),
        restart_after_fault=True,
    )
    observation, verdict = _judged(run, scenario, point, agent)
    acted = [f for f in tool_faults_acted(run.trace) if f.kind == fault.kind and f.call == fault.call_id]
    if not acted and verdict.status not in ("hung", "error"):
        verdict = Verdict(
            "not_reached",
            verdict.observed,
            verdict.expected,
            problems=(
                f"{point.id}: call {point.tool_call_id} never reached the tool side in this run, so "
                f"{point.boundary} never acted; the agent was not put to this test",
                *verdict.problems,
            ),
        )
    return CaseResult(
        scenario,
        point.id,
        point.boundary,
        verdict,
        time.monotonic() - started,
        len(run.lives),
        case_dir,
        agent,
        observation=observation,
    )


def run_double(
    scenario: Scenario,
    point: CrashPoint,
    launcher: LifeLauncher,
    case_dir: Path,
    *,
    agent: str = "reference",
    deadline: float = 30.0,
    shared: FirstCrashes | None = None,
) -> CaseResult:
    """``double@P``: from P's first crash, two lives resume the session at once
    (``harness.lives.double_resume``: held at their first step and released together), then
    one more if neither finished. Judged by P's expectations -- the life that wins the session
    must end as P's recovering life does -- and the invariants, ``loser_stops_cleanly`` among
    them. With ``shared`` the first crash is P's (``first_crash.py``), else it runs here."""
    from crashmatrix.harness.lives.double_resume import run_double as race

    started = time.monotonic()
    if shared is not None:
        found = shared.get(scenario, point, launcher, agent=agent, deadline=deadline)
        crashed = found.crashed
        started = time.monotonic() - (crashed.lives[0].seconds if crashed else 0.0)
        if crashed is None:  # life 1 never crashed at P: neither did two lives resume after it
            run = own_copy(found.run, case_dir / "run")
    else:
        crashed = run_case(
            case_dir / "crashed", scenario, launcher, agent=agent, point=point, deadline=deadline, max_lives=1
        )
        if crashed.lives[-1].status != "crashed":
            run, crashed = crashed, None
    if crashed is not None:
        run = race(
            case_dir / "run", scenario, launcher, crashed=crashed, point=point, agent=agent, deadline=deadline
        )
    observation, verdict = _judged(run, scenario, point, agent)
    released = [str(e.get("why")) for e in run.trace if e.get("event") == RELEASED_EVENT]
    if released:
        verdict = dataclasses.replace(
            verdict, notes=(*verdict.notes, f"{DOUBLE_PREFIX}{point.id}: released together: {released[-1]}")
        )
    if any(e.get("event") == DOUBLE_EVENT and e.get("lines") == LINES_SESSION for e in run.trace):
        # No silent green: say what was judged how (harness.core.double_resume).
        unattributed = (
            f"{DOUBLE_PREFIX}{point.id}: the agent writes its own session, so its lines are not told "
            "to the life that wrote them: who acted is told by each life's effects and model requests "
            "(its own loopback model, tools and services), and both lives' lines are judged together "
            "in the final session (one_tool_result_per_call and the other invariants)"
        )
        verdict = dataclasses.replace(verdict, notes=(*verdict.notes, unattributed))
    return CaseResult(
        scenario,
        f"{DOUBLE_PREFIX}{point.id}",
        DOUBLE_COLUMN,
        verdict,
        time.monotonic() - started,
        len(run.lives),
        run.case_dir,
        agent,
        observation=observation,
    )


def _charged(shared_run: CaseRun) -> float:
    """The start time that charges an item with a shared first crash at its lives' own
    cost, whichever of its two items happened to run them (the other only reads them)."""
    return time.monotonic() - sum(life.seconds for life in shared_run.lives)


def run_recovery(
    scenario: Scenario,
    point: CrashPoint,
    launcher: LifeLauncher,
    case_dir: Path,
    *,
    agent: str = "reference",
    deadline: float = 30.0,
    shared: FirstCrashes | None = None,
) -> CaseResult:
    """Crash at ``point``; then for every boundary the restarted life passes while it
    recovers (``recovery_window``: before it asks the model again), a case that also
    crashes there -- and, for a scenario with ``recovery_torn_writes``, one that tears each
    session line it appends there. All must end correctly.

    The first life runs once: every case starts from a copy of the directory it left
    (``run_case(resume=...)``), so a depth-2 case costs the two lives after the crash.
    With ``shared``, that first crash is also the depth-1 item's (``first_crash.py``); with
    its snapshots, that item's recovering life left each second crash too (``found.window``),
    and a second crash costs its last life alone. ``lives`` counts the case's lives either
    way (the verdict's, not the harness's cost: ``benchmarks/matrix.py`` counts those)."""
    started = time.monotonic()
    if shared is not None:
        found = shared.get(scenario, point, launcher, agent=agent, deadline=deadline)
        started = _charged(found.run)
    else:
        found = first_crash(scenario, point, launcher, case_dir, agent=agent, deadline=deadline)
    resume, first = found.crashed, found.run
    lives = len(first.lives)
    subs: list[tuple[str, Verdict]] = []
    # Each second crash keeps its compact timeline, not its observation: a case with a dozen
    # of them would otherwise hold a dozen sessions and worlds until its record is made.
    sub_cases: list[SubCase] = []
    # The observation a report shows: the first failed second crash's, else the first crash's.
    shown: tuple[Observation, str] | None = None  # the shown second crash and its status
    seconds_points = recovery_window(first.trace, torn=scenario.recovery_torn_writes)
    for index, second in enumerate(seconds_points):
        second_dir = case_dir / f"second-{index}"
        run = run_case(
            second_dir,
            scenario,
            launcher,
            agent=agent,
            point=point,
            second=second,
            deadline=deadline,
            resume=found.window.get(second.id, resume),
        )
        lives += len(run.lives) - 1
        observation, verdict = _judged(run, scenario, point, agent, recovery=True, check_ledger=False)
        if not verdict.passed and (shown is None or shown[1] == "not_applicable"):
            shown = (observation, verdict.status)  # the first real failure wins over an n.a.
        subs.append((second.id, verdict))
        sub_cases.append(SubCase(second.id, second_dir, timeline_of(observation)))
    failed = failures_first(subs)
    if shared is not None:  # a published first crash is only ever copied (``own_copy``)
        first = own_copy(first, case_dir / "first")
    first_observation, base = _judged(first, scenario, point, agent)
    if not seconds_points and base.status == "not_reached":
        verdict = base
    elif not seconds_points:
        # Nothing was crashed a second time: a pass here would claim what never happened.
        verdict = Verdict(
            "not_reached",
            base.observed,
            base.expected,
            problems=(
                f"recovery@{point.id}: the restarted agent passed no crash point while it recovered "
                "(before it asked the model again), so there was nothing to crash a second time",
            ),
        )
    elif failed:
        verdict = failed[0][1]
    else:
        verdict = Verdict(
            "passed",
            base.observed,
            base.expected,
            notes=(f"{len(subs)} recovery crash points, all recovered",),
            not_applicable=unjudged_in_every(v for _, v in subs),
        )
    return CaseResult(
        scenario,
        f"recovery@{point.id}",
        "recovery",
        verdict,
        time.monotonic() - started,
        lives,
        case_dir,
        agent,
        tuple(subs),
        {"recovery_points": [sid for sid, _ in subs], "failed_points": [sid for sid, _ in failed]},
        observation=shown[0] if shown else first_observation,
        sub_cases=tuple(sub_cases),
    )


def harness_error(
    scenario: Scenario,
    point_id: str,
    column: str,
    case_dir: Path,
    agent: str,
    cause: str,
    details: str,
    seconds: float = 0.0,
) -> CaseResult:
    """The case ``point_id`` whose harness side failed: status ``error``, ``cause`` in one
    line naming the log file that keeps ``details`` (a traceback). Not a verdict on the
    agent, and never a pass: every report counts it with the failures."""
    case_dir.mkdir(parents=True, exist_ok=True)
    log = case_dir / HARNESS_ERROR_LOG
    log.write_text(details, encoding="utf-8")
    verdict = Verdict("error", None, {}, problems=(f"{cause} (details: {log})",))
    return CaseResult(scenario, point_id, column, verdict, seconds, 0, case_dir, agent)


def _raise_if_disk_full(error: BaseException, case_dir: Path) -> None:
    """A full disk under ``case_dir`` is ``DiskFull``, one line naming it and what to do, once
    the half-written case directory is removed (it would only keep the disk full)."""
    if disk_full(error, case_dir):
        shutil.rmtree(case_dir, ignore_errors=True)
        raise DiskFull(case_dir.parent, f"the case directory it was writing ({case_dir.name})") from error


def error_cause(error: BaseException) -> str:
    """``error`` in one line: our own errors' message is the cause (one line on purpose);
    any other exception is the harness failing, named by its type."""
    said = " ".join(str(error).split())
    said = said if len(said) <= _CAUSE_CHARS else said[: _CAUSE_CHARS - 1] + "…"
    if isinstance(error, CrashmatrixError):
        return said
    return f"the harness failed: {type(error).__name__}: {said or 'no message'}"


def guarded(
    run: Callable[[], CaseResult],
    scenario: Scenario,
    point_id: str,
    column: str,
    case_dir: Path,
    agent: str,
) -> CaseResult:
    """``run()``'s case, or, when the harness raises while running it, that case as an
    ``error`` (``harness_error``, the traceback in its log). An interrupt (Ctrl-C, SIGTERM)
    still stops the run: it is no ``Exception``. An agent's session the harness could not
    read on the way is no harness error but the agent's doing: the case fails, saying where
    (as ``reading.read_observation`` says it after the last life)."""
    started = time.monotonic()
    try:
        return run()
    except SessionCorruption as error:
        problem = f"the agent left its session unreadable: {unreadable_session(error, case_dir)}"
        verdict = Verdict("failed", None, {}, problems=(problem,))
        return CaseResult(scenario, point_id, column, verdict, time.monotonic() - started, 0, case_dir, agent)
    except Exception as error:  # any harness failure is this case's error
        try:
            _raise_if_disk_full(error, case_dir)
        except DiskFull as full:
            # One line, no traceback log (there is no room for one): the case is an error.
            verdict = Verdict("error", None, {}, problems=(str(full),))
            return CaseResult(
                scenario, point_id, column, verdict, time.monotonic() - started, 0, case_dir, agent
            )
        details = "".join(traceback.format_exception(error))
        cause, seconds = error_cause(error), time.monotonic() - started
        return harness_error(scenario, point_id, column, case_dir, agent, cause, details, seconds)
