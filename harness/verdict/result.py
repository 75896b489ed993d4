"""One cell of the matrix: everything a report or a failure message needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.observation.observation import Observation
from crashmatrix.harness.verdict.verdict import Verdict

__all__ = ["CaseResult", "SubCase", "failures_first"]


def failures_first(subs: Sequence[tuple[str, Verdict]]) -> list[tuple[str, Verdict]]:
    """A depth-2 case's second crashes that did not pass, the one that stands for the case
    first: one the agent failed before one that was not applicable (a fault that could not
    act is no verdict on the agent), otherwise in the order they ran."""
    return sorted(
        ((sid, v) for sid, v in subs if not v.passed), key=lambda sv: sv[1].status == "not_applicable"
    )


@dataclass(frozen=True, slots=True)
class SubCase:
    """Where one second crash of a depth-2 case ran and what happened there, kept small: its
    compact timeline (``reports.timeline``'s moments, plain JSON values) stands in for its
    Observation, which is dropped as soon as the second crash is judged."""

    point: str  # the second crash's point id, as in ``CaseResult.sub_results``
    case_dir: Path
    timeline: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class CaseResult:
    """One cell of the matrix: everything a report or a failure message needs."""

    scenario: Scenario
    point_id: str  # "clean", a point id, or "recovery@<point id>"
    boundary: str  # "clean", a boundary, torn_write, or "recovery"
    verdict: Verdict
    seconds: float
    lives: int
    case_dir: Path
    agent: str
    sub_results: tuple[tuple[str, Verdict], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    # A depth-2 case's second crashes, in the order of ``sub_results``: each one's directory
    # and compact timeline, so a report shows every one of them, not only the shown one.
    sub_cases: tuple[SubCase, ...] = field(default=(), compare=False, repr=False)
    # What the case showed (for a depth-2 case: its first failed second crash, else its
    # first crash): the report's timeline is built from it. Dropped once the report record
    # is made, so a long run does not keep every case's evidence alive.
    observation: Observation | None = field(default=None, compare=False, repr=False)

    @property
    def passed(self) -> bool:
        return self.verdict.passed
