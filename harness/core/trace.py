"""What the lives of a case were: one record per life, and the case's run (its directory,
its lives, its trace). Values the lives stage produces and every later stage reads.

The trace (``trace.jsonl``, written by ``harness.lives.tracer``) is one JSON object per
line: ``{"life": N, "event": "start" | "boundary" | "append" | "model_request" | "crash" |
"error" | "exit" | "ended" | "survivors", ...}``. All but ``ended`` and ``survivors`` are
written by the life itself; ``ended`` is the harness's, after a life that did not end as
planned or normally (an unplanned death, an error, a hang): its status, exit status and the
last boundary it passed; ``survivors`` names the processes the agent left running when its
life ended (killed by the harness); ``approval_unanswered`` (``UNANSWERED_APPROVAL``) is a
foreign agent's approval prompt the scenario does not answer for its tool, with ``prompt``
and ``why``: the case is not applicable (``harness.agents.conversation``, the verdict).
A kind-2 life also says what each adapter rule did (``harness.agents.python_agent``):
``rules`` (the rules installed, each with its adapter.yaml position and where the agent
still holds the original function), then once a life each ``rule_called``, ``rule_held``
and ``rule_fired``: the clean run's trace names every rule that never fired.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "LIFE_STATUSES",
    "UNANSWERED_APPROVAL",
    "CaseRun",
    "LifeRecord",
    "TraceEvent",
    "case_status",
    "stderr_name",
]

LIFE_STATUSES = ("exited", "crashed", "not_reached", "error", "hung", "died")
UNANSWERED_APPROVAL = "approval_unanswered"
TraceEvent = Mapping[str, Any]


def stderr_name(life: int) -> str:
    """The file in the case directory that keeps everything life ``life`` wrote to stderr."""
    return f"life-{life}.stderr"


@dataclass(frozen=True, slots=True)
class LifeRecord:
    life: int
    crash: str | None  # the point this life was asked to die at
    # "died": killed or exited where nothing planned it (a tool that kills its own agent);
    # restarted like a crash, ``error`` says how and after which boundary.
    status: str  # "exited" | "crashed" | "not_reached" | "error" | "hung" | "died"
    exitcode: int | None  # as Popen.returncode gives it: -N when signal N killed the life
    seconds: float
    error: str = ""
    # The tail of what the life wrote to its stderr (all of it: ``life-N.stderr`` in the
    # case directory), for the failure text of a life that ended abnormally.
    stderr: str = ""
    # The processes the agent started that were still running when this life ended (each
    # "pid P `command` (session S)"), stopped and killed by the harness
    # (``harness.lives.descendants``); None: they could not be tracked on this platform.
    survivors: tuple[str, ...] | None = ()


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
    """How a case's lives ended: ``ok`` when the last life ended normally; ``hung`` or
    ``error`` for the first life that did; ``died`` when the last life died unplanned (the
    case ran out of lives: an earlier unplanned death was restarted like any crash, and the
    case is judged on how the agent recovered); ``not_reached`` when the first life never
    reached its crash point; ``incomplete`` otherwise."""
    for life in lives:
        if life.status in ("hung", "error"):
            return life.status
    if lives and lives[0].status == "not_reached":
        return "not_reached"
    if lives and lives[-1].status == "died":
        return "died"
    return "ok" if lives and lives[-1].status == "exited" else "incomplete"
