"""A point's first crash, run once for the items that start with it.

The depth-1 case ``P``, the depth-2 item ``recovery@P`` and the power loss ``power@P`` begin
the same way: life 1 is SIGKILLed at P. ``first_crash`` runs that life, keeps the directory
it left (``crashed``: exactly what the process death left, before any fault between lives;
what every second crash of ``recovery@P`` starts from, and what ``power@P`` cuts its power
loss into), then the recovering lives of ``P``; ``FirstCrashes`` lets whichever item runs
first, in any xdist worker, run them, and the others reuse them. With ``record_syncs`` life
1 records its fsyncs (``harness.lives.power``), so that a power loss can be cut later. A
case resumed from a copy is the same case (``tests/harness/front/test_cases.py``), so no
verdict depends on which item came first or on which worker ran it.

Runs live under a directory every worker of the session sees; one ``flock`` per point
makes the second item wait for the first instead of running the lives again. A worker that
dies while holding the lock releases it, and the next item runs the lives itself.

Once published (``runs.json`` written), a first crash is read only by copying it: every
item judges its own copy (``own_copy``), never the shared directory. Observing a case opens
its world's SQLite read-write, and closing the last connection checkpoints the WAL and
deletes ``world.sqlite-wal`` and ``-shm``: done in the shared directory by ``P``'s item, it
pulled those files from under ``power@P`` copying the same directory in another worker
(``shutil.Error`` in ``clone_case``; ``tests/harness/lives/test_first_crash.py``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.trace import CaseRun, LifeRecord
from crashmatrix.harness.lives.casedir import clone_case, remove_case
from crashmatrix.harness.lives.injector import LifeLauncher, run_case
from crashmatrix.harness.lives.tracer import read_trace

__all__ = ["FirstCrash", "FirstCrashes", "first_crash", "own_copy", "power_after"]


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
    record_syncs: bool = False,
) -> FirstCrash:
    crashed = run_case(
        case_dir / "crashed",
        scenario,
        launcher,
        agent=agent,
        point=point,
        deadline=deadline,
        max_lives=1,
        record_syncs=record_syncs,
    )
    if crashed.lives[-1].status != "crashed":
        return FirstCrash(None, crashed)
    run = run_case(
        case_dir / "first", scenario, launcher, agent=agent, point=point, deadline=deadline, resume=crashed
    )
    return FirstCrash(crashed, run)


class FirstCrashes:
    """First crashes shared by the items of one session, under ``root``; ``record_syncs``
    when the session has power-loss items (every first life then records its fsyncs)."""

    def __init__(self, root: Path, *, record_syncs: bool = False) -> None:
        self.root = root
        self.record_syncs = record_syncs

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
            found = first_crash(
                scenario,
                point,
                launcher,
                where,
                agent=agent,
                deadline=deadline,
                record_syncs=self.record_syncs,
            )
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


def own_copy(run: CaseRun, case_dir: Path) -> CaseRun:
    """A published run, copied to an item's own ``case_dir`` to be observed and judged there.

    The shared directory is never opened: its world's SQLite, opened and closed, would lose
    its WAL files in the middle of another worker's copy. A copy is the same case
    (``clone_case``), so the verdict is the one the shared directory would have given."""
    clone_case(run.case_dir, case_dir)
    return CaseRun(case_dir, run.lives, read_trace(case_dir))


# The note a power case carries when its lives after the crash are those of the crash's case.
SAME_LIVES = (
    "the power loss left exactly what the process death left (every byte and directory entry "
    "synced), so the lives after it are those of {point}'s case, not run again"
)


def power_after(
    found: FirstCrash,
    scenario: Scenario,
    point: CrashPoint,
    launcher: LifeLauncher,
    case_dir: Path,
    *,
    agent: str = "reference",
    deadline: float = 30.0,
) -> tuple[CaseRun, bool]:
    """``power@P`` from P's first crash: the power goes out in a copy of what life 1 left
    (``found.crashed``, recorded with ``record_syncs``), then the agent restarts from what
    survived. Returns the case's run and whether its lives after the crash were reused.

    When the power loss changes nothing (``cut.changed`` is False: the crash left only
    durable state), the restart sees byte for byte what P's restart saw, so P's recovering
    lives are the answer: the case directory is a copy of P's with the power loss's trace
    events spliced in after life 1 (the verdict still sees the fault and that it acted). A
    case resumed from an equal directory is the same case (``first_crash``'s premise,
    tested in ``tests/harness/front/test_cases.py``). Otherwise the lives run from the cut
    copy."""
    from crashmatrix.harness.lives.power import cut_power
    from crashmatrix.harness.lives.tracer import read_trace

    assert found.crashed is not None
    cut_dir = case_dir / "cut"
    clone_case(found.crashed.case_dir, cut_dir)
    before = (cut_dir / "trace.jsonl").read_bytes()
    cut = cut_power(cut_dir, agent, 1, source=found.crashed.case_dir)
    if cut is not None and not cut.changed:
        whole = case_dir / "run"
        clone_case(found.run.case_dir, whole)
        for item in cut_dir.iterdir():  # what the cut kept beside the case (its records)
            if item.is_file() and not (whole / item.name).exists():
                shutil.copy2(item, whole / item.name)
        # P's trace starts with life 1's events, byte for byte (P was cloned from the same
        # crash): the power loss's events go right after them, before life 2's.
        after = (cut_dir / "trace.jsonl").read_bytes()[len(before) :]
        rest = (found.run.case_dir / "trace.jsonl").read_bytes()
        if rest.startswith(before):
            (whole / "trace.jsonl").write_bytes(before + after + rest[len(before) :])
            remove_case(cut_dir)  # equal to the crash's directory: nothing of its own to keep
            return CaseRun(whole, found.run.lives, read_trace(whole)), True
    resumed = CaseRun(cut_dir, found.crashed.lives, read_trace(cut_dir))
    return (
        run_case(
            case_dir / "run", scenario, launcher, agent=agent, point=point, deadline=deadline, resume=resumed
        ),
        False,
    )
