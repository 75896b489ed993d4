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

With ``snapshots`` (``harness.lives.snapshots``), life 1 of each point is not run at all:
the scenario's clean case runs once (``FirstCrashes.clean``, under its own lock: the
enumeration at collection, in whichever worker collects first, and every item after it),
its life leaving a first crash at every point it passes, and ``get`` starts each point's
recovering lives from that point's copy. A point without a faithful copy (the manifest says
why) runs its life 1 as before.

Once published (``runs.json`` written), a first crash is read only by copying it: every
item judges its own copy (``own_copy``), never the shared directory. Observing a case opens
its world's SQLite read-write, and closing the last connection checkpoints the WAL and
deletes ``world.sqlite-wal`` and ``-shm``: done in the shared directory by ``P``'s item, it
pulled those files from under ``power@P`` copying the same directory in another worker
(``shutil.Error`` in ``clone_case``; ``tests/harness/lives/test_first_crash.py``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import shutil
from collections.abc import Collection, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.trace import CaseRun, LifeRecord
from crashmatrix.harness.lives.casedir import clone_case, remove_case
from crashmatrix.harness.lives.injector import LifeLauncher, run_case
from crashmatrix.harness.lives.tracer import read_trace

__all__ = ["FirstCrash", "FirstCrashes", "first_crash", "own_copy", "power_after", "read_snapshots"]


@dataclass(frozen=True)
class FirstCrash:
    # Stopped after life 1, which crashed at the point: second crashes resume from it. None
    # when life 1 never crashed (not reached, an error): then ``run`` is all there is.
    crashed: CaseRun | None
    run: CaseRun  # the depth-1 case: the crash, then recovery to the end
    # Second crashes already made (``first_crash(window=)``): second point id -> the case
    # stopped after life 2, killed there by its snapshot; ``recovery@P`` goes on with life 3.
    window: Mapping[str, CaseRun] = field(default_factory=dict)


def first_crash(
    scenario: Scenario,
    point: CrashPoint,
    launcher: LifeLauncher,
    case_dir: Path,
    *,
    agent: str = "reference",
    deadline: float = 30.0,
    record_syncs: bool = False,
    crashed: CaseRun | None = None,
    window: str = "",
) -> FirstCrash:
    """P's first crash and its depth-1 case. ``crashed``: life 1 killed at P already (a
    clean life's snapshot, ``harness.lives.snapshots``); else life 1 runs here.

    ``window`` (``snapshots.WINDOW``, ``WINDOW_TORN``): the recovering life 2 leaves a
    snapshot at each point of its recovery window, the second crashes of ``recovery@P``
    (issue 31): each then costs its life 3 alone instead of lives 2 and 3."""
    if crashed is None:
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
    snapshots = case_dir / "window" if window else None
    run = run_case(
        case_dir / "first",
        scenario,
        launcher,
        agent=agent,
        point=point,
        deadline=deadline,
        resume=crashed,
        snapshots=snapshots,
        snapshot_window=window,
    )
    if snapshots is None or len(run.lives) < 2:
        return FirstCrash(crashed, run)
    seconds, _ = read_snapshots(snapshots, scenario, agent, deadline, earlier=run.lives[:1])
    return FirstCrash(crashed, run, seconds)


class FirstCrashes:
    """First crashes shared by the items of one session, under ``root``; ``record_syncs``
    when the session has power-loss items (every first life then records its fsyncs);
    ``snapshots``: first crashes taken from one clean life per scenario where faithful
    (the module docstring)."""

    def __init__(
        self,
        root: Path,
        *,
        record_syncs: bool = False,
        snapshots: bool = False,
        window_boundaries: Collection[str] = (),
    ) -> None:
        self.root = root
        self.record_syncs = record_syncs
        self.snapshots = snapshots
        # The boundaries whose first crash (its first occurrence) starts a ``recovery@P`` item
        # in this session (``enumeration.RECOVERY_FIRST``, told by the caller: lives does
        # not import the plan): with snapshots, P's recovering life leaves its second crashes.
        self.window_boundaries = frozenset(window_boundaries)
        # Per scenario directory: the points no other item starts from (``alone``), and the
        # published snapshot index read once (a published file never changes).
        self._alone: dict[Path, set[str]] = {}
        self._index: dict[Path, dict[str, Any]] = {}

    def alone(self, scenario: Scenario, point: CrashPoint, *, agent: str = "reference") -> None:
        """No item but P's own starts from P's first crash (no ``recovery@P``, ``power@P``,
        ``double@P`` in this session): ``point_run`` then resumes P's case from its snapshot
        straight into the item's directory, with no lock and nothing published. Told by
        the collection; a point never told is published (``get``), as any shared one."""
        self._alone.setdefault(self._scenario_dir(scenario, agent), set()).add(point.id)

    def _scenario_dir(self, scenario: Scenario, agent: str) -> Path:
        tag = hashlib.sha256(f"{scenario.path.resolve()}\0{agent}".encode()).hexdigest()[:12]
        return self.root / f"{scenario.path.stem}-{tag}"

    def snapshotting(self, agent: str, launcher: LifeLauncher) -> bool:
        """Whether this agent's first crashes come from snapshots here."""
        from crashmatrix.harness.agents.loading import adapter_for
        from crashmatrix.harness.lives.snapshots import unfaithful

        return self.snapshots and not unfaithful(adapter_for(agent), launcher.isolation)

    def clean(
        self,
        scenario: Scenario,
        launcher: LifeLauncher,
        *,
        agent: str = "reference",
        deadline: float = 30.0,
    ) -> CaseRun:
        """The scenario's clean case, run once for the session (the enumeration's, read by
        every worker); with snapshots, its life leaves each point's first crash. A published
        run is only ever copied (``own_copy``)."""
        where = self._scenario_dir(scenario, agent)
        where.mkdir(parents=True, exist_ok=True)
        with _locked(where / "clean.lock"):
            saved = where / "clean.json"
            if saved.exists():
                return _case(where / "clean", json.loads(saved.read_text(encoding="utf-8")))
            return self._run_clean(where, scenario, launcher, agent, deadline)

    def clean_ahead(
        self,
        scenario: Scenario,
        launcher: LifeLauncher,
        *,
        agent: str = "reference",
        deadline: float = 30.0,
    ) -> bool:
        """Run the scenario's clean case now unless it is published or being run (its lock
        held: never waits), so that ``clean`` later only reads it. Whether it ran it here.
        An xdist worker runs the clean cases its collection reaches last, while another's
        collection runs the first ones (``harness.front.collection``): the workers share
        the clean lives instead of one running them all while the other waits."""
        where = self._scenario_dir(scenario, agent)
        where.mkdir(parents=True, exist_ok=True)
        with _locked(where / "clean.lock", wait=False) as held:
            if not held or (where / "clean.json").exists():
                return False
            self._run_clean(where, scenario, launcher, agent, deadline)
            return True

    def _run_clean(
        self, where: Path, scenario: Scenario, launcher: LifeLauncher, agent: str, deadline: float
    ) -> CaseRun:
        """The clean case run and published in ``where``, its lock held."""
        saved = where / "clean.json"
        snapshots = where / "snapshots" if self.snapshotting(agent, launcher) else None
        try:
            run = run_case(
                where / "clean",
                scenario,
                launcher,
                agent=agent,
                deadline=deadline,
                record_syncs=self.record_syncs and snapshots is not None,
                snapshots=snapshots,
            )
        except BaseException:
            # Nothing half made stays (a full disk: it would only keep the disk full);
            # the next process to ask runs the clean case again.
            for made in (where / "clean", where / "snapshots"):
                shutil.rmtree(made, ignore_errors=True)
            (where / "clean.lock").unlink(missing_ok=True)
            raise
        if snapshots is not None:
            crashed, skipped = read_snapshots(snapshots, scenario, agent, deadline)
            index = {
                point: {"dir": run.case_dir.name, "lives": _lives(run)} for point, run in crashed.items()
            }
            (where / "snapshots.json").write_text(
                json.dumps({"crashed": index, "skipped": skipped}), encoding="utf-8"
            )
        saved.write_text(json.dumps(_lives(run)), encoding="utf-8")  # last: published
        return run

    def _snapshot(
        self, scenario: Scenario, point: CrashPoint, launcher: LifeLauncher, agent: str, deadline: float
    ) -> CaseRun | None:
        """P's first crash from the clean life's snapshot (the clean case run first if no
        item ran it yet), or None where there is none."""
        if not self.snapshotting(agent, launcher):
            return None
        where = self._scenario_dir(scenario, agent)
        crashed = self._index.get(where)
        if crashed is None:
            self.clean(scenario, launcher, agent=agent, deadline=deadline)
            index = where / "snapshots.json"
            if not index.exists():
                return None
            crashed = self._index[where] = json.loads(index.read_text(encoding="utf-8"))["crashed"]
        entry = crashed.get(point.id)
        if entry is None:
            return None
        return _case(where / "snapshots" / str(entry["dir"]), entry["lives"])

    def _window(self, scenario: Scenario, point: CrashPoint, launcher: LifeLauncher, agent: str) -> str:
        """Whether P's recovering life leaves ``recovery@P``'s second crashes, and which."""
        from crashmatrix.harness.lives.snapshots import WINDOW, WINDOW_TORN

        if not (
            scenario.recovery_crashes
            and point.occurrence == 1
            and point.boundary in self.window_boundaries
            and self.snapshotting(agent, launcher)
        ):
            return ""
        return WINDOW_TORN if scenario.recovery_torn_writes else WINDOW

    def point_run(
        self,
        scenario: Scenario,
        point: CrashPoint,
        launcher: LifeLauncher,
        case_dir: Path,
        *,
        agent: str = "reference",
        deadline: float = 30.0,
    ) -> CaseRun:
        """P's depth-1 case, in ``case_dir`` to be judged there. Shared with other items
        (``get``): a copy of the published run. ``alone``: resumed from P's snapshot right
        into ``case_dir`` (one copy of a directory nobody writes: no lock needed), or, with
        no faithful snapshot, both lives run there; what ``first_crash`` would run in the
        shared directory, so the same case."""
        if point.id not in self._alone.get(self._scenario_dir(scenario, agent), ()):
            return own_copy(self.get(scenario, point, launcher, agent=agent, deadline=deadline).run, case_dir)
        crashed = self._snapshot(scenario, point, launcher, agent, deadline)
        return run_case(
            case_dir, scenario, launcher, agent=agent, point=point, deadline=deadline, resume=crashed
        )

    def get(
        self,
        scenario: Scenario,
        point: CrashPoint,
        launcher: LifeLauncher,
        *,
        agent: str = "reference",
        deadline: float = 30.0,
    ) -> FirstCrash:
        snapshot = self._snapshot(scenario, point, launcher, agent, deadline)
        where = self._scenario_dir(scenario, agent) / point.id
        where.mkdir(parents=True, exist_ok=True)
        with _locked(where / "lock"):
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
                crashed=snapshot,
                window=self._window(scenario, point, launcher, agent),
            )
            # Written last: its presence means both runs are complete.
            saved.write_text(json.dumps(_dump(found)), encoding="utf-8")
            return found


@contextlib.contextmanager
def _locked(path: Path, *, wait: bool = True) -> Iterator[bool]:
    """``path``'s lock held for the block; with ``wait=False``, not waited for: the block
    gets whether it holds it."""
    with open(path, "a+b") as lock:
        try:  # released on close, or when this process dies
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True


def read_snapshots(
    into: Path, scenario: Scenario, agent: str, deadline: float, *, earlier: tuple[LifeRecord, ...] = ()
) -> tuple[dict[str, CaseRun], dict[str, str]]:
    """The copies a clean life left in ``into`` (``harness.lives.snapshots``): point id ->
    the case stopped after a life 1 that crashed there, its record made as the injector
    makes a killed life's (``life_record``, from the child's exit status; the adapter's
    ``after_life`` run on it); and point id -> why it has none (the manifest's reason, or a
    child that did not die by SIGKILL at the point). ``earlier``: the lives before the one
    that left them (a recovering life 2's: life 1, killed at P)."""
    import signal

    from crashmatrix.harness.agents.loading import adapter_for
    from crashmatrix.harness.core.boundaries import parse_point
    from crashmatrix.harness.lives.injector import life_record
    from crashmatrix.harness.lives.life import LifeSpec
    from crashmatrix.harness.lives.snapshots import MANIFEST

    runs: dict[str, CaseRun] = {}
    skipped: dict[str, str] = {}
    manifest = into / MANIFEST
    lines = manifest.read_text(encoding="utf-8").splitlines() if manifest.exists() else []
    after_life = getattr(adapter_for(agent), "after_life", None)
    for line in lines:
        entry = json.loads(line)
        point_id = str(entry["point"])
        if point_id in runs or point_id in skipped:
            continue
        if "skipped" in entry:
            skipped[point_id] = str(entry["skipped"])
            continue
        copy = into / str(entry["dir"])
        if entry.get("exitcode") != -signal.SIGKILL or not copy.is_dir():
            skipped[point_id] = f"the snapshot's child ended with {entry.get('exitcode')}, not SIGKILL"
            continue
        trace = read_trace(copy)
        spec = LifeSpec(str(copy), scenario, agent, len(earlier) + 1, parse_point(point_id))
        record = life_record(spec, -signal.SIGKILL, False, float(entry["seconds"]), deadline, trace)
        if record.status != "crashed":
            skipped[point_id] = f"the snapshot is no crash at the point ({record.status})"
            continue
        record = replace(record, survivors=())  # none were running: ``Snapshotter.why_not``
        if callable(after_life):
            after_life(copy, record, trace)
        runs[point_id] = CaseRun(copy, (*earlier, record), read_trace(copy))
    return runs, skipped


def _record(life: dict[str, Any]) -> LifeRecord:
    # JSON has lists; the record keeps tuples.
    left = life.get("survivors", ())
    return LifeRecord(**{**life, "survivors": None if left is None else tuple(left)})


def _lives(run: CaseRun) -> list[dict[str, object]]:
    return [asdict(life) for life in run.lives]


def _dump(found: FirstCrash) -> dict[str, object]:
    return {
        "crashed": _lives(found.crashed) if found.crashed else None,
        # A snapshot's first crash lives where the clean life left it, not in "crashed".
        "crashed_dir": str(found.crashed.case_dir) if found.crashed else None,
        "run": {"dir": found.run.case_dir.name, "lives": _lives(found.run)},
        "window": {
            point: {"dir": str(run.case_dir), "lives": _lives(run)} for point, run in found.window.items()
        },
    }


def _case(case_dir: Path, lives: list[dict[str, Any]]) -> CaseRun:
    records = tuple(_record(life) for life in lives)
    return CaseRun(case_dir, records, read_trace(case_dir))


def _load(where: Path, data: dict[str, object]) -> FirstCrash:
    crashed = data["crashed"]
    run = data["run"]
    assert isinstance(run, dict)
    crashed_dir = data.get("crashed_dir")
    window = data.get("window") or {}
    assert isinstance(window, dict)
    return FirstCrash(
        _case(Path(str(crashed_dir)) if crashed_dir else where / "crashed", crashed)
        if isinstance(crashed, list)
        else None,
        _case(where / str(run["dir"]), run["lives"]),
        {point: _case(Path(str(made["dir"])), made["lives"]) for point, made in window.items()},
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
