"""Judge one finished case: observe what the lives left behind, compare with expectations,
and run every invariant.

Observation reads only durable things (the session file, the world directory, the model's
request log), never the agent's memory: that is all a restarted agent has too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from crashmatrix.harness.agents.loading import read_agent_session
from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.errors import SessionCorruption
from crashmatrix.harness.input.scenario import Scenario
from crashmatrix.harness.lives.injector import CaseRun
from crashmatrix.harness.observation.reading import (
    _between_lives,
    _in_edited_coordinates,
    _requests,
    _world_view,
)
from crashmatrix.harness.verdict.expectations import Mismatch, Observed, _compare, observe
from crashmatrix.harness.verdict.invariants import Evidence, Violation, check_all

__all__ = ["Verdict", "judge"]


@dataclass(frozen=True)
class Verdict:
    status: str  # "passed" | "failed" | "not_reached" | "hung" | "error"
    observed: Observed | None
    expected: Mapping[str, Any]
    mismatches: tuple[Mismatch, ...] = ()
    violations: tuple[Violation, ...] = ()
    problems: tuple[str, ...] = ()  # what stopped the case from being judged normally
    indeterminate: bool = False  # passed, but only because a set of values was allowed
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def judge(
    run: CaseRun,
    scenario: Scenario,
    point: CrashPoint | None,
    *,
    recovery: bool = False,
    keeps_ledger: bool = True,
    check_ledger: bool = True,
    adapter: object | None = None,
) -> Verdict:
    """``adapter`` reads the session back when the agent keeps it its own way (foreign
    adapters); an agent that keeps no ledger has its ledger expectations reported as not
    applicable -- never as passed."""
    expected = scenario.expectation(point, recovery=recovery)
    notes: list[str] = []
    if not check_ledger:
        expected.pop("ledger", None)
    if not keeps_ledger and expected.pop("ledger", None) is not None:
        notes.append("ledger: not applicable (the agent keeps no ledger)")
    status = run.status
    if status == "not_reached":
        return Verdict(
            "not_reached", None, expected, problems=(f"{point.id if point else 'clean'}: never reached",)
        )
    problems = [
        f"life {life.life} {life.status}" + (f": {life.error}" if life.error else "")
        for life in run.lives
        if life.status in ("hung", "error", "died")
    ]
    try:
        log = read_agent_session(adapter, run.case_dir)
    except SessionCorruption as error:
        return Verdict("failed", None, expected, problems=(*problems, str(error)))
    world, events = _world_view(run.case_dir)
    mark = _between_lives(run.case_dir)
    events = _in_edited_coordinates(events, mark)
    observed = observe(log, world)
    mismatches, indeterminate = _compare(expected, observed)
    evidence = Evidence(
        entries=log.entries,
        offsets=log.offsets,
        events=events,
        requests=_requests(run.case_dir, mark),
        turns=scenario.turns,
        contracts=scenario.contracts,
        has_ledger=keeps_ledger,
    )
    # Invariants run even when a life hung or failed: the evidence often says why.
    violations = check_all(evidence)
    ok = not mismatches and not violations and status == "ok"
    if status not in ("ok", "hung", "error", "died"):
        problems.append(f"the case did not finish: {status}")
    verdict_status = {"hung": "hung", "error": "error", "died": "error"}.get(
        status, "passed" if ok else "failed"
    )
    return Verdict(
        verdict_status,
        observed,
        expected,
        tuple(mismatches),
        tuple(violations),
        tuple(problems),
        indeterminate and ok,
        tuple(notes),
    )
