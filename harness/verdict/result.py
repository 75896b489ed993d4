"""One cell of the matrix: everything a report or a failure message needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashmatrix.harness.input.scenario import Scenario
from crashmatrix.harness.verdict.verdict import Verdict

__all__ = ["CaseResult"]


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

    @property
    def passed(self) -> bool:
        return self.verdict.passed
