"""The crash injector, parent side: start lives, let them die, restart, enforce deadlines.

Lives are forked from a warm process (``harness.lives.forkserver``: the agent's modules imported,
one throwaway life run), so a life costs a fork instead of an interpreter start plus an
openai import. ``isolation="spawn"`` starts a fresh interpreter per life, for agents that
cannot be forked. Either way the agent runs in its own process and a crash is a real SIGKILL.

Every life has a deadline. A life still running at its deadline is killed and the case
ends as ``hung``; no child process outlives its case.

A life that ends where nothing planned it (a tool that kills its own agent, ``os._exit`` deep
in a library: an unplanned death) is a crash all the same: it is restarted like a planned
one, within the same ``max_lives``, and named with the last boundary its trace shows. How
every abnormal life ended (status, exit status) is added to the trace by the harness, and
each life's stderr is kept in the case directory (``life-N.stderr``).

What a life leaves running when it ends (a shell the agent started, a ``setsid`` daemon) is
stopped, named and killed before the next life starts (``harness.lives.descendants``); the
life's record lists them and the ``no_effect_after_death`` invariant fails the case.

In a tool-side case (``restart_after_fault``), a life that raised or exited non-zero after the
armed fault acted on it died *on the fault*: a crash-only agent may fail fast on a tool server
gone mid-call and reconcile when its supervisor restarts it. Its record says so ("died", the
error kept) and it is restarted like any unplanned death; the invariants judge what the
restarted agent did. A life that failed before the fault acted, or in a later life, is the
agent's own error.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from crashmatrix.harness.agents.loading import adapter_for
from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.tool_side import DIED_ON_FAULT, tool_faults_acted
from crashmatrix.harness.core.trace import CaseRun, LifeRecord, TraceEvent
from crashmatrix.harness.errors import HarnessError
from crashmatrix.harness.lives.between import apply_between_lives
from crashmatrix.harness.lives.casedir import (
    clone_case,
    prepare_case,
    stderr_path_of,
)
from crashmatrix.harness.lives.forkserver import ForkServer, run_spawned
from crashmatrix.harness.lives.life import LifeSpec, life_main
from crashmatrix.harness.lives.tracer import append_event, last_point, read_trace

__all__ = ["PRELOAD", "LifeLauncher", "died_on_fault", "life_record", "run_case"]

# Imported once in the fork server. openai loads its chat resources lazily on first use,
# which would otherwise cost every life ~170 ms. The caller's modules (the adapter's) go
# before the last entry.
PRELOAD = [
    "crashmatrix.harness.lives.life",
    "crashmatrix.harness.verdict.invariants",
    "openai",
    "openai.resources.chat",
    "openai.types.chat",
    "respx",
    "httpx",
    "sqlite3",
    "crashmatrix.harness.lives.snapshots",  # a clean life's snapshots: their children import nothing
    "crashmatrix.harness.lives.warmup",  # last: one throwaway life, so every fork starts warm (warmup.py)
]


# The servers another may be forked from (``ForkServer._clone``), largest first: the reference
# agent's (what ``loading.fork_preload`` puts around every agent's list; its adapter warm),
# then the bare list. A server's base is the first whose modules it imports too.
_BASES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (
        (
            *PRELOAD[:-1],
            "crashmatrix.harness.agents.reference",
            "crashmatrix.mock_tools.toolbox",
            *PRELOAD[-1:],
        ),
        ("reference",),
    ),
    (tuple(PRELOAD), ()),
)


def _base_for(modules: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    return next((base for base in _BASES if set(base[0]) <= set(modules)), None)


class LifeLauncher:
    """Starts agent lives in child processes: forked from a warm server, or spawned."""

    def __init__(
        self, isolation: str = "fork", preload: Sequence[str] = (), warm: Sequence[str] = ()
    ) -> None:
        if isolation not in ("fork", "spawn"):
            raise HarnessError(f"isolation must be 'fork' or 'spawn', not {isolation!r}")
        self.isolation = isolation
        # One warm server per preload list (and agents it prepares: ``warm``, their adapter
        # loaded once; harness.lives.warm_agent), shared by launchers that ask for the same.
        modules = [*PRELOAD[:-1], *preload, PRELOAD[-1]]
        self._server = (
            ForkServer.shared(modules, warm, base=_base_for(modules)) if isolation == "fork" else None
        )

    @property
    def server(self) -> ForkServer | None:
        """The warm server lives fork from (None with spawn isolation)."""
        return self._server

    def run(self, spec: LifeSpec, *, deadline: float) -> tuple[LifeRecord, Sequence[TraceEvent]]:
        """One life, and the case's trace as it stands after it (read once: how the life
        ended depends on it, and the caller goes on with it)."""
        started = time.monotonic()
        if self._server is not None:
            ended = self._server.run(life_main, (spec,), deadline=deadline)
        else:
            ended = run_spawned(life_main, (spec,), deadline=deadline)
        seconds = time.monotonic() - started
        case_dir = Path(spec.case_dir)
        if ended.survivors:
            # Found by the process that started the life, after it died: only the harness
            # can write them down (the life's own, found before it exited, are there already).
            event = {"life": spec.life, "event": "survivors", "processes": list(ended.survivors)}
            append_event(case_dir, event)
        trace = read_trace(case_dir)
        record = life_record(spec, ended.code, ended.hung, seconds, deadline, trace)
        if ended.survivors is None:
            return replace(record, survivors=None), trace
        left = [
            str(process)
            for event in trace
            if event.get("life") == spec.life and event.get("event") == "survivors"
            for process in event.get("processes") or ()
        ]
        return replace(record, survivors=tuple(dict.fromkeys(left))), trace


# Lives that ended neither at their planned crash nor by returning.
ABNORMAL = ("died", "error", "hung")
_STDERR_TAIL = 2000  # characters of a life's stderr kept on its record


def _how(code: int) -> str:
    """An exit status in words: ``SIGKILL``, ``exit status 3``."""
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def _stderr_tail(case_dir: Path, life: int) -> str:
    path = stderr_path_of(case_dir, life)
    try:
        with open(path, "rb") as stream:
            stream.seek(max(0, os.fstat(stream.fileno()).st_size - _STDERR_TAIL))
            return stream.read().decode("utf-8", errors="replace")
    except FileNotFoundError:  # the life ended before it got that far
        return ""


def life_record(
    spec: LifeSpec, code: int, hung: bool, seconds: float, deadline: float, trace: Sequence[TraceEvent]
) -> LifeRecord:
    """How a life ended, from its exit status and what it wrote to the trace. A life ends
    as planned only when its trace says so (the crash at its point, the exit after the
    agent returned, the error it raised); a process that ended any other way died where
    nothing planned it: an unplanned death, restarted like a crash. (A snapshot's life 1,
    ``harness.lives.snapshots``, gets its record here too, from its child's exit status.)"""
    crash = spec.crash.id if spec.crash else None
    stderr = _stderr_tail(Path(spec.case_dir), spec.life)
    mine = {str(event.get("event")) for event in trace if event.get("life") == spec.life}

    def record(status: str, error: str = "") -> LifeRecord:
        return LifeRecord(spec.life, crash, status, code, seconds, error, stderr)

    if hung:
        return record("hung", f"no exit within {deadline:.0f}s")
    if "start" not in mine:  # not the agent's death: the life never began (the harness's error)
        return record("error", f"the life ended ({_how(code)}) before it started")
    if "crash" in mine and code == -signal.SIGKILL:
        return record("crashed")
    if "exit" in mine and code == 0:
        return record("not_reached" if crash else "exited")
    if "error" in mine:  # the agent raised: the trace has what (run_case fills it in)
        return record("error")
    point = last_point(trace, spec.life)
    where = f"after {point.id}" if point else "before any boundary"
    # A supervised agent is its own process: its life dies with it and says of what.
    agent = [e for e in trace if e.get("life") == spec.life and e.get("event") == "agent_died"]
    how = f"the agent's process: {agent[-1].get('signal')}" if agent else _how(code)
    return record("died", f"unplanned death ({how}) {where}")


def _ended_event(record: LifeRecord, trace: Sequence[TraceEvent]) -> dict[str, object]:
    point = last_point(trace, record.life)
    event: dict[str, object] = {
        "life": record.life,
        "event": "ended",
        "status": record.status,
        "exitcode": record.exitcode,
        "after": point.id if point else None,
    }
    if record.exitcode is not None and record.exitcode < 0:
        event["signal"] = _how(record.exitcode)  # named here: the verdict's side has no signal module
    if record.error:
        event["error"] = record.error
    return event


_HARNESS_ERROR = f"{HarnessError.__module__}.{HarnessError.__name__}: "


def _one_line(error: str) -> str:
    """A life's error as a note shows it: its first line; when more follow (a command agent's
    exit with its stderr's tail: "agent A exited with 1: <traceback>"), the exit and the tail's
    last line, the exception that ended it. The whole text stays in the trace's ``error`` event
    and the agent's stderr file."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    if not lines:
        return error
    head = lines[0].removeprefix(_HARNESS_ERROR)  # the harness's wrapper, not the agent's words
    if len(lines) == 1:
        return head
    exited = re.match(r".*? exited with -?\d+", head)
    return f"{exited.group(0) if exited else head}: {lines[-1]}"


def died_on_fault(record: LifeRecord, trace: Sequence[TraceEvent]) -> LifeRecord:
    """``record`` as a death on a tool-side fault when it is one: a life that ended in
    ``error`` (the agent raised; a command agent exited non-zero) after a tool-side fault acted
    in that same life. Its error is kept, said to be on that fault; any other record is
    returned as it is. (The fault fires once per case: the restarted life meets a healthy tool
    side, so a later life's error is the agent's own, not the fault's.)"""
    if record.status != "error":
        return record
    starts = [i for i, e in enumerate(trace) if e.get("event") == "start" and e.get("life") == record.life]
    if not starts:  # the life never began: the harness's error, not the agent's
        return record
    acted = tool_faults_acted(trace[starts[-1] :])
    if not acted:
        return record
    mine = [e for e in trace if e.get("life") == record.life]
    raised = [str(e.get("error")) for e in mine if e.get("event") == "error"]
    why = _one_line(raised[-1]) if raised else record.error or _how(record.exitcode or 0)
    fault = acted[0]
    return replace(
        record,
        status="died",
        error=f"{DIED_ON_FAULT} {fault.kind}[{fault.call}], restarted as a supervisor would: {why}",
    )


def run_case(
    case_dir: Path,
    scenario: Scenario,
    launcher: LifeLauncher,
    *,
    agent: str = "reference",
    point: CrashPoint | None = None,
    second: CrashPoint | None = None,
    deadline: float = 30.0,
    max_lives: int = 4,
    power_loss: bool = False,
    record_syncs: bool = False,
    resume: CaseRun | None = None,
    prepare: Callable[[Path], None] | None = None,
    snapshots: Path | None = None,
    snapshot_window: str = "",
    restart_after_fault: bool = False,
) -> CaseRun:
    """Run one case: crash at ``point`` (and at ``second`` while recovering), then restart
    until a life ends normally. A life that died unplanned is restarted too; one that does
    so in every life ends the case after ``max_lives``, as ``died`` (judged an error).

    With ``power_loss``, each planned crash also loses every session byte that was not
    fsynced (SQLite's crash-VFS idea: the test decides what survives). ``record_syncs``
    records the first life's syncs without cutting anything: a first crash stopped there
    (``max_lives=1``) can then take a power loss later, in a copy (``cases.run_power``).

    ``max_lives=1`` stops after the first life. ``resume`` is such a stopped case whose
    first life crashed at ``point``: this case starts from a copy of it instead of running
    that life again (depth-2 cases share one first crash; ``harness.front.cases.run_recovery``).
    With ``second``, ``resume`` may also hold life 2 killed at ``second`` (a snapshot of the
    recovering life, below): the case goes on with life 3.

    ``prepare`` is called on the fresh case directory before life 1 (not with ``resume``):
    what the case arms there -- a tool-side fault (``harness.front.cases.run_tool_fault``) --
    the lives find as they start.

    ``snapshots``: a clean case's life 1 leaves a first crash at every point it passes in
    this directory (``harness.lives.snapshots``; read by ``harness.lives.first_crash``).
    With ``snapshot_window`` (``snapshots.WINDOW``, ``WINDOW_TORN``) it is instead the life
    that recovers from the crash at ``point`` (life 2) that leaves them, at the points of
    its recovery window only: each the second crash of ``recovery@P`` there.

    ``restart_after_fault``: a life that raised or exited non-zero after a tool-side fault
    acted in it is a death on that fault (``died_on_fault``), restarted within ``max_lives``."""
    lives: list[LifeRecord] = []
    if resume is None:
        prepare_case(case_dir, scenario)
        if prepare is not None:
            prepare(case_dir)
    else:
        crashes = [point, second] if len(resume.lives) == 2 else [point]
        if len(resume.lives) not in (1, 2) or point is None or None in crashes:
            raise HarnessError(
                "resume= takes a case stopped after a first life that crashed at point= "
                "(or after a second life that crashed at second=, too)"
            )
        for life, crash in zip(resume.lives, crashes, strict=True):
            if life.status != "crashed" or crash is None or life.crash != crash.id:
                raise HarnessError(f"resume= life {life.life} crashed at {life.crash}, not at {crash}")
        clone_case(resume.case_dir, case_dir)
        lives.extend(resume.lives)
    plan: list[CrashPoint | None] = [point, second] if second else [point]
    carrier = 2 if snapshot_window else 1  # the life that leaves the snapshots
    for index in range(len(lives) + 1, max_lives + 1):
        if index == 2:
            # Between the first crash and the restart, not right after the crash: a case
            # stopped after life 1 (``max_lives=1``) is exactly what that life left, so a
            # power loss cut into a copy of it (``harness.front.cases.run_power``) comes before
            # a colleague's edit or a tampered line, as it would in the world.
            # A foreign adapter's agent reads its own session, not crashmatrix's copy.
            editable = getattr(adapter_for(agent), "edits_native_session", True)
            apply_between_lives(case_dir, scenario, session_editable=editable, agent=agent)
        crash = plan[index - 1] if index <= len(plan) else None
        record, trace = launcher.run(
            LifeSpec(
                str(case_dir),
                scenario,
                agent,
                index,
                crash,
                power_loss or (record_syncs and index == 1),
                str(snapshots) if snapshots is not None and index == carrier and crash is None else "",
                snapshot_window if index == carrier else "",
            ),
            deadline=deadline,
        )
        if restart_after_fault:
            record = died_on_fault(record, trace)
        if index > 1 and record.status == "not_reached":
            # The recovering life never passed the second point: it simply finished.
            record = replace(record, status="exited", error="not reached")
        if record.status == "died" and index == max_lives:
            # Dying unplanned again and again still ends: the case is an error, saying why.
            record = replace(record, error=f"{record.error}; not restarted: all {max_lives} lives used")
        lives.append(record)
        if record.status in ABNORMAL:
            # The trace says how every other life ended (its crash, its exit); these get it
            # from the harness, which alone saw the exit status.
            append_event(case_dir, _ended_event(record, trace))
        # The agent's own effects made after its last probe in that life (a killed life
        # could not record them): found now, in this process.
        after_life = getattr(adapter_for(agent), "after_life", None)
        if callable(after_life):
            after_life(case_dir, record, trace)
        if power_loss and record.status == "crashed":
            from crashmatrix.harness.lives.power import cut_power

            cut_power(case_dir, agent, index)  # the agent's own session; the trace says if it acted
        if record.status in ("hung", "error", "exited", "not_reached"):
            break
        # Left: "crashed", or "died" (an unplanned death), restarted alike within max_lives.
    trace = read_trace(case_dir)
    errors = {e["life"]: e["error"] for e in trace if e.get("event") == "error"}
    # A death on a tool-side fault already holds its error, said to be on the fault.
    lives = [replace(r, error=errors.get(r.life, r.error)) if r.status != "died" else r for r in lives]
    return CaseRun(case_dir, tuple(lives), trace)
