"""A scenario's clean case and each point's case, as ``pytest --agent`` runs them by default.

The plugin shares one ``FirstCrashes`` per session with snapshots on (the ini
``crashmatrix_snapshots``): the clean life leaves each point's first crash where a copy is
faithful (``harness.lives.snapshots``), and each point's case runs its recovering lives from
it. A test that runs every point of a team's agent to see it green runs them that way too:
what a team's CI runs, at the cost of its recovery alone. The killed-life path is proven the
same by ``tests/harness/lives/test_snapshots.py``.
"""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.front.cases import Enumeration, enumerate_points, run_point
from crashmatrix.harness.lives.first_crash import FirstCrashes
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.verdict.result import CaseResult

__all__ = ["every_point"]


def every_point(
    scenario: Scenario, launcher: LifeLauncher, work: Path, *, agent: str, deadline: float = 30.0
) -> tuple[Enumeration, dict[str, CaseResult]]:
    """The enumeration (its clean case judged) and each point's case, by point id."""
    shared = FirstCrashes(work / "first-crashes", snapshots=True)
    enum = enumerate_points(scenario, launcher, work / "clean", agent=agent, deadline=deadline, shared=shared)
    cases: dict[str, CaseResult] = {}
    for index, point in enumerate(enum.points):
        shared.alone(scenario, point, agent=agent)  # no other case starts from it here
        cases[point.id] = run_point(
            scenario, point, launcher, work / f"p{index}", agent=agent, deadline=deadline, shared=shared
        )
    return enum, cases
