"""What the lives of a case were: one record per life, and the case's run (its directory,
its lives, its trace). Values the lives stage produces and every later stage reads.

The trace (``trace.jsonl``, written by ``harness.lives.tracer``) is one JSON object per
line: ``{"life": N, "event": "start" | "boundary" | "append" | "model_request" | "crash" |
"error" | "exit", ...}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["LIFE_STATUSES", "CaseRun", "LifeRecord", "TraceEvent", "case_status"]

LIFE_STATUSES = ("exited", "crashed", "not_reached", "error", "hung", "died")
TraceEvent = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class LifeRecord:
    life: int
    crash: str | None  # the point this life was asked to die at
    status: str  # "exited" | "crashed" | "not_reached" | "error" | "hung" | "died"
    exitcode: int | None
    seconds: float
    error: str = ""


@dataclass(frozen=True)
class CaseRun:
    case_dir: Path
    lives: tuple[LifeRecord, ...]
    trace: Sequence[TraceEvent] = field(default_factory=list)

    @property
    def status(self) -> str:
        """``ok`` when the last life ended normally; otherwise why not."""
        return case_status(self.lives)


def case_status(lives: Sequence[LifeRecord]) -> str:
    """How a case's lives ended: ``ok`` when the last life ended normally; ``hung``,
    ``error`` or ``died`` for the first life that did; ``not_reached`` when the first life
    never reached its crash point; ``incomplete`` otherwise."""
    for life in lives:
        if life.status in ("hung", "error", "died"):
            return life.status
    if lives and lives[0].status == "not_reached":
        return "not_reached"
    return "ok" if lives and lives[-1].status == "exited" else "incomplete"
