"""The crash injector, parent side: start lives, let them die, restart, enforce deadlines.

Lives are forked from a warm process (``harness.lives.forkserver``: the agent's modules imported,
one throwaway life run), so a life costs a fork instead of an interpreter start plus an
openai import. ``isolation="spawn"`` starts a fresh interpreter per life, for agents that
cannot be forked. Either way the agent runs in its own process and a crash is a real SIGKILL.

Every life has a deadline. A life still running at its deadline is killed and the case
ends as ``hung``; no child process outlives its case.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Sequence
from pathlib import Path

from crashmatrix.harness.agents.loading import adapter_for
from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.trace import CaseRun, LifeRecord
from crashmatrix.harness.errors import HarnessError
from crashmatrix.harness.lives.between import apply_between_lives
from crashmatrix.harness.lives.casedir import (
    clone_case,
    prepare_case,
    session_path_of,
)
from crashmatrix.harness.lives.forkserver import ForkServer, run_spawned
from crashmatrix.harness.lives.life import LifeSpec, life_main
from crashmatrix.harness.lives.tracer import read_trace

__all__ = ["PRELOAD", "LifeLauncher", "run_case"]

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
    "crashmatrix.harness.lives.warmup",  # last: one throwaway life, so every fork starts warm (warmup.py)
]


class LifeLauncher:
    """Starts agent lives in child processes: forked from a warm server, or spawned."""

    def __init__(self, isolation: str = "fork", preload: Sequence[str] = ()) -> None:
        if isolation not in ("fork", "spawn"):
            raise HarnessError(f"isolation must be 'fork' or 'spawn', not {isolation!r}")
        self.isolation = isolation
        # One warm server per preload list, shared by launchers that ask for the same one.
        self._server = (
            ForkServer.shared([*PRELOAD[:-1], *preload, PRELOAD[-1]]) if isolation == "fork" else None
        )

    @property
    def server(self) -> ForkServer | None:
        """The warm server lives fork from (None with spawn isolation)."""
        return self._server

    def run(self, spec: LifeSpec, *, deadline: float) -> LifeRecord:
        started = time.monotonic()
        if self._server is not None:
            ended = self._server.run(life_main, (spec,), deadline=deadline)
        else:
            ended = run_spawned(life_main, (spec,), deadline=deadline)
        seconds = time.monotonic() - started
        code = ended.code
        crash = spec.crash.id if spec.crash else None
        if ended.hung:
            return LifeRecord(spec.life, crash, "hung", code, seconds, f"no exit within {deadline:.0f}s")
        if code == -signal.SIGKILL:
            return LifeRecord(spec.life, crash, "crashed" if crash else "died", code, seconds)
        if code == 0:
            return LifeRecord(spec.life, crash, "not_reached" if crash else "exited", code, seconds)
        return LifeRecord(spec.life, crash, "error", code, seconds)


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
    resume: CaseRun | None = None,
) -> CaseRun:
    """Run one case: crash at ``point`` (and at ``second`` while recovering), then restart
    until a life ends normally. With ``power_loss``, each crash also loses every session
    byte that was not fsynced (SQLite's crash-VFS idea: the test decides what survives).

    ``max_lives=1`` stops after the first life. ``resume`` is such a stopped case whose
    first life crashed at ``point``: this case starts from a copy of it instead of running
    that life again (depth-2 cases share one first crash; ``harness.front.cases.run_recovery``)."""
    lives: list[LifeRecord] = []
    if resume is None:
        prepare_case(case_dir, scenario)
    else:
        if len(resume.lives) != 1 or resume.lives[0].status != "crashed" or point is None:
            raise HarnessError("resume= takes a case stopped after a first life that crashed at point=")
        if resume.lives[0].crash != point.id:
            raise HarnessError(f"resume= crashed at {resume.lives[0].crash}, not at {point.id}")
        clone_case(resume.case_dir, case_dir)
        lives.append(resume.lives[0])
    plan: list[CrashPoint | None] = [point, second] if second else [point]
    for index in range(len(lives) + 1, max_lives + 1):
        crash = plan[index - 1] if index <= len(plan) else None
        record = launcher.run(
            LifeSpec(str(case_dir), scenario, agent, index, crash, power_loss), deadline=deadline
        )
        if index > 1 and record.status == "not_reached":
            # The recovering life never passed the second point: it simply finished.
            record = LifeRecord(
                record.life, record.crash, "exited", record.exitcode, record.seconds, "not reached"
            )
        lives.append(record)
        # The agent's own effects made after its last probe in that life (a killed life
        # could not record them): found now, in this process.
        after_life = getattr(adapter_for(agent), "after_life", None)
        if callable(after_life):
            after_life(case_dir, record, read_trace(case_dir))
        if power_loss and record.status == "crashed":
            from crashmatrix.harness.lives.power import SYNC_LOG, lose_unsynced

            session = session_path_of(case_dir)
            lose_unsynced(session, case_dir / SYNC_LOG, keep=case_dir / f"power-lost-{index}.bin")
        if record.status in ("hung", "error", "died", "exited", "not_reached"):
            break
        if index == 1:
            # A foreign adapter's agent reads its own session, not crashmatrix's copy.
            editable = getattr(adapter_for(agent), "edits_native_session", True)
            apply_between_lives(case_dir, scenario, session_editable=editable)
    trace = read_trace(case_dir)
    errors = {e["life"]: e["error"] for e in trace if e.get("event") == "error"}
    lives = [
        LifeRecord(r.life, r.crash, r.status, r.exitcode, r.seconds, errors.get(r.life, r.error))
        for r in lives
    ]
    return CaseRun(case_dir, tuple(lives), trace)
