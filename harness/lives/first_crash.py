"""A point's first crash, run once for the two items that start with it.

The depth-1 case ``P`` and the depth-2 item ``recovery@P`` begin the same way: life 1 is
SIGKILLed at P, then life 2 recovers. ``first_crash`` runs those two lives keeping, before
life 2, a copy of the directory life 1 left (``crashed``: what every second crash of
``recovery@P`` starts from); ``FirstCrashes`` lets whichever of the two items runs first,
in any xdist worker, run them, and the other reuse them. A case resumed from a copy is the
same case (``tests/harness/front/test_cases.py``), so no verdict depends on which item
came first or on which worker ran it.

Runs live under a directory every worker of the session sees; one ``flock`` per point
makes the second item wait for the first instead of running the lives again. A worker that
dies while holding the lock releases it, and the next item runs the lives itself.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.trace import CaseRun, LifeRecord
from crashmatrix.harness.lives.injector import LifeLauncher, run_case
from crashmatrix.harness.lives.tracer import read_trace

__all__ = ["FirstCrash", "FirstCrashes", "first_crash"]


@dataclass(frozen=True)
class FirstCrash:
    # Stopped after life 1, which crashed at the point: second crashes resume from it. None
    # when life 1 never crashed (not reached, an error): then ``run`` is all there is.
    crashed: CaseRun | None
    run: CaseRun  # the depth-1 case: the crash, then recovery to the end


def first_crash(
    scenario: Scenario,
    point: CrashPoint,
    launcher: LifeLauncher,
    case_dir: Path,
    *,
    agent: str = "reference",
    deadline: float = 30.0,
) -> FirstCrash:
    crashed = run_case(
        case_dir / "crashed", scenario, launcher, agent=agent, point=point, deadline=deadline, max_lives=1
    )
    if crashed.lives[-1].status != "crashed":
        return FirstCrash(None, crashed)
    run = run_case(
        case_dir / "first", scenario, launcher, agent=agent, point=point, deadline=deadline, resume=crashed
    )
    return FirstCrash(crashed, run)


class FirstCrashes:
    """First crashes shared by the items of one session, under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get(
        self,
        scenario: Scenario,
        point: CrashPoint,
        launcher: LifeLauncher,
        *,
        agent: str = "reference",
        deadline: float = 30.0,
    ) -> FirstCrash:
        tag = hashlib.sha256(f"{scenario.path.resolve()}\0{agent}".encode()).hexdigest()[:12]
        where = self.root / f"{scenario.path.stem}-{tag}" / point.id
        where.mkdir(parents=True, exist_ok=True)
        with open(where / "lock", "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released on close, or when this process dies
            saved = where / "runs.json"
            if saved.exists():
                return _load(where, json.loads(saved.read_text(encoding="utf-8")))
            found = first_crash(scenario, point, launcher, where, agent=agent, deadline=deadline)
            # Written last: its presence means both runs are complete.
            saved.write_text(json.dumps(_dump(found)), encoding="utf-8")
            return found


def _record(life: dict[str, Any]) -> LifeRecord:
    # JSON has lists; the record keeps tuples.
    left = life.get("survivors", ())
    return LifeRecord(**{**life, "survivors": None if left is None else tuple(left)})


def _lives(run: CaseRun) -> list[dict[str, object]]:
    return [asdict(life) for life in run.lives]


def _dump(found: FirstCrash) -> dict[str, object]:
    return {
        "crashed": _lives(found.crashed) if found.crashed else None,
        "run": {"dir": found.run.case_dir.name, "lives": _lives(found.run)},
    }


def _case(case_dir: Path, lives: list[dict[str, Any]]) -> CaseRun:
    records = tuple(_record(life) for life in lives)
    return CaseRun(case_dir, records, read_trace(case_dir))


def _load(where: Path, data: dict[str, object]) -> FirstCrash:
    crashed = data["crashed"]
    run = data["run"]
    assert isinstance(run, dict)
    return FirstCrash(
        _case(where / "crashed", crashed) if isinstance(crashed, list) else None,
        _case(where / str(run["dir"]), run["lives"]),
    )
