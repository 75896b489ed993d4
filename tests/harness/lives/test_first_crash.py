"""``P`` and ``recovery@P`` share their first crash: run once, same verdicts in either order.

The fast tests pin why a published first crash is only ever copied: observing a case opens
its world's SQLite, and closing it deletes the WAL files another worker may be copying
(the ``shutil.Error`` in ``clone_case`` of issue 26). The race is made deterministic by
running the other item's step in the middle of the copy."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.trace import CaseRun, LifeRecord
from crashmatrix.harness.front.cases import run_point, run_power, run_recovery
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.casedir import clone_case, prepare_case
from crashmatrix.harness.lives.first_crash import FirstCrash, FirstCrashes
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.observation.reading import read_world
from crashmatrix.harness.verdict.result import CaseResult
from crashmatrix.mock_tools.world import World

ROOT = Path(__file__).resolve().parents[3] / "scenarios"
POINT = CrashPoint("after_approved", "call_order")


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher(
        "fork", preload=["crashmatrix.harness.agents.reference", "crashmatrix.mock_tools.toolbox"]
    )


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return load_scenario(ROOT / "create_order" / "keyed_once.yaml")


def _seen(result: CaseResult) -> tuple[Any, ...]:
    observed = result.verdict.observed
    assert observed is not None
    counts = {k: v for k, v in observed.world.items() if k != "files"}
    # Execution ids are random, so session hashes (in world files) differ between runs.
    subs = [(sid, v.status, v.observed.outcome if v.observed else None) for sid, v in result.sub_results]
    return (result.verdict.status, observed.ledger, observed.outcome, counts, result.lives, subs)


def _starts(case_dir: Path) -> int:
    return (case_dir / "trace.jsonl").read_text().count('"event": "start"')


@pytest.mark.slow
def test_the_two_items_get_the_same_verdicts_shared_or_not_in_either_order(
    launcher: LifeLauncher, scenario: Scenario, tmp_path: Path
) -> None:
    alone = [
        run_point(scenario, POINT, launcher, tmp_path / "alone-point"),
        run_recovery(scenario, POINT, launcher, tmp_path / "alone-recovery"),
    ]
    point_first = FirstCrashes(tmp_path / "shared-a")
    recovery_first = FirstCrashes(tmp_path / "shared-b")
    a = [
        run_point(scenario, POINT, launcher, tmp_path / "a-point", shared=point_first),
        run_recovery(scenario, POINT, launcher, tmp_path / "a-recovery", shared=point_first),
    ]
    b_recovery = run_recovery(scenario, POINT, launcher, tmp_path / "b-recovery", shared=recovery_first)
    b = [run_point(scenario, POINT, launcher, tmp_path / "b-point", shared=recovery_first), b_recovery]
    assert all(r.passed for r in alone) and alone[1].lives > 2
    assert [_seen(r) for r in a] == [_seen(r) for r in b] == [_seen(r) for r in alone]
    # The depth-1 item is judged in its own copy of the shared directory, where its two
    # lives ran once.
    assert a[0].case_dir == tmp_path / "a-point"
    assert (
        _starts(a[0].case_dir) == 2 and _starts(point_first.get(scenario, POINT, launcher).run.case_dir) == 2
    )


@pytest.mark.slow
def test_concurrent_items_wait_for_one_run_of_the_lives(
    launcher: LifeLauncher, scenario: Scenario, tmp_path: Path
) -> None:
    shared = FirstCrashes(tmp_path / "shared")
    with ThreadPoolExecutor(max_workers=4) as pool:
        found = list(pool.map(lambda _: shared.get(scenario, POINT, launcher), range(4)))
    assert len({f.run.case_dir for f in found}) == 1
    assert {tuple(f.run.lives) for f in found} == {found[0].run.lives}
    assert _starts(found[0].run.case_dir) == 2  # life 1 (copied from crashed/) and life 2, once
    assert found[0].crashed is not None and _starts(found[0].crashed.case_dir) == 1


@pytest.mark.slow
def test_a_first_crash_left_unfinished_by_a_dead_worker_is_run_again(
    launcher: LifeLauncher, scenario: Scenario, tmp_path: Path
) -> None:
    shared = FirstCrashes(tmp_path / "shared")
    done = shared.get(scenario, POINT, launcher)
    where = done.run.case_dir.parent
    (where / "runs.json").unlink()  # as if the worker died before recording the runs
    (where / "first" / "trace.jsonl").write_text("")
    again = shared.get(scenario, POINT, launcher)
    assert [life.status for life in again.run.lives] == ["crashed", "exited"]
    assert _starts(again.run.case_dir) == 2 and (where / "runs.json").exists()


@pytest.mark.slow
def test_both_items_are_charged_the_shared_lives_whichever_ran_them(
    launcher: LifeLauncher, scenario: Scenario, tmp_path: Path
) -> None:
    # The report's seconds per item must not depend on which item came first.
    shared = FirstCrashes(tmp_path / "shared")
    runner = run_point(scenario, POINT, launcher, tmp_path / "point", shared=shared)
    reader = run_recovery(scenario, POINT, launcher, tmp_path / "recovery", shared=shared)
    lives = sum(life.seconds for life in shared.get(scenario, POINT, launcher).run.lives)
    assert lives > 0
    assert runner.seconds >= lives and reader.seconds >= lives
    again = run_point(scenario, POINT, launcher, tmp_path / "again", shared=shared)  # reads only
    assert again.seconds >= lives


# -- a published first crash is only copied (fast: no life runs) ------------------------------


class _Published(FirstCrashes):
    """A first crash already published by another worker: ``get`` hands it out."""

    def __init__(self, found: FirstCrash) -> None:
        super().__init__(found.run.case_dir.parent)
        self.found = found

    def get(self, *args: Any, **kwargs: Any) -> FirstCrash:
        return self.found


def _published(tmp_path: Path, scenario: Scenario) -> FirstCrash:
    """A shared first crash as killed lives leave it: the world's writes still in its
    ``world.sqlite-wal`` (a child writes an event and dies without closing its connection)."""
    crashed, first = tmp_path / "shared" / "crashed", tmp_path / "shared" / "first"
    prepare_case(crashed, scenario)
    pid = os.fork()
    if pid == 0:
        world = World(crashed / "world")
        with world.transaction() as conn:
            world.record_event(conn, "email_sent", "send_email", tool_call_id="call_mail")
        os._exit(0)  # as a SIGKILL: no close, no checkpoint
    assert os.waitpid(pid, 0)[1] == 0
    clone_case(crashed, first)
    assert (first / "world" / "world.sqlite-wal").stat().st_size > 0, "the WAL holds the event"
    life1 = LifeRecord(1, POINT.id, "crashed", -9, 0.1)
    life2 = LifeRecord(2, None, "exited", 0, 0.1)
    return FirstCrash(CaseRun(crashed, (life1,), []), CaseRun(first, (life1, life2), []))


def _copying_with(step: Callable[[], object], shared: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Copies of ``shared`` run ``step`` (another item's work) once, when the copy has
    listed the world's directory and not yet copied its files."""
    real = shutil.copytree
    state = {"done": False}

    def copy_file(src: str, dst: str, **kwargs: Any) -> object:
        if not state["done"] and Path(src).parent.name == "world":
            state["done"] = True
            step()
        return shutil.copy2(src, dst, **kwargs)

    def copytree(src: Any, dst: Any, *args: Any, **kwargs: Any) -> object:
        if Path(src) == shared and not state["done"]:
            kwargs["copy_function"] = copy_file
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(shutil, "copytree", copytree)


@pytest.fixture
def email_scenario() -> Scenario:
    return load_scenario(ROOT / "send_email" / "send_once.yaml")


def test_observing_a_world_in_place_deletes_its_wal_under_a_concurrent_copy(
    tmp_path: Path, email_scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The root cause, shown: closing the last connection checkpoints the WAL and deletes
    # it (and -shm), so a copy that listed them fails. Hence: copy, never open, a shared run.
    found = _published(tmp_path, email_scenario)
    _copying_with(lambda: read_world(found.run.case_dir), found.run.case_dir, monkeypatch)
    with pytest.raises(shutil.Error, match=r"world\.sqlite-wal"):
        clone_case(found.run.case_dir, tmp_path / "power-copy")


def test_judging_a_shared_run_leaves_it_untouched_while_another_worker_copies_it(
    tmp_path: Path, email_scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = _published(tmp_path, email_scenario)
    shared = found.run.case_dir
    before = sorted(str(p.relative_to(shared)) for p in shared.rglob("*"))
    launcher: Any = None  # no life runs: the first crash is published already
    results: list[CaseResult] = []

    def items_judging() -> None:  # P and recovery@P, in another worker
        results.append(run_point(email_scenario, POINT, launcher, tmp_path / "p", shared=_Published(found)))
        results.append(
            run_recovery(email_scenario, POINT, launcher, tmp_path / "recovery", shared=_Published(found))
        )

    _copying_with(items_judging, shared, monkeypatch)
    clone_case(shared, tmp_path / "power-copy")  # what power@P does with P's run: no error
    assert len(results) == 2
    assert sorted(str(p.relative_to(shared)) for p in shared.rglob("*")) == before
    # Each item judged its own copy, and the copies hold the event the WAL held.
    assert results[0].case_dir == tmp_path / "p"
    for where in (tmp_path / "p", tmp_path / "recovery" / "first", tmp_path / "power-copy"):
        assert read_world(where).events[-1].kind == "email_sent"


def test_a_power_case_whose_life_1_never_crashed_judges_a_copy(
    tmp_path: Path, email_scenario: Scenario
) -> None:
    found = _published(tmp_path, email_scenario)
    never = FirstCrash(None, found.run)
    shared = found.run.case_dir
    before = sorted(str(p.relative_to(shared)) for p in shared.rglob("*"))
    result = run_power(email_scenario, POINT, None, tmp_path / "power", shared=_Published(never))  # type: ignore[arg-type]
    assert result.case_dir == tmp_path / "power" / "run"
    assert sorted(str(p.relative_to(shared)) for p in shared.rglob("*")) == before


# -- clean cases run ahead (an xdist worker's thread, ``collection.clean_ahead``) --------------


class _NoLives:
    """A launcher that fails the test if a life is asked of it."""

    isolation = "fork"

    def run(self, *_: object, **__: object) -> Any:
        raise AssertionError("a life was run")


def test_a_clean_case_run_ahead_never_waits_for_its_lock_nor_runs_a_published_one(
    tmp_path: Path, email_scenario: Scenario
) -> None:
    shared = FirstCrashes(tmp_path / "shared")
    where = shared._scenario_dir(email_scenario, "reference")
    where.mkdir(parents=True)
    no_lives: Any = _NoLives()
    with open(where / "clean.lock", "a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another worker is running it: not waited for
        assert shared.clean_ahead(email_scenario, no_lives) is False
    (where / "clean.json").write_text("[]")  # published: nothing to run
    assert shared.clean_ahead(email_scenario, no_lives) is False
    (where / "clean.json").unlink()  # neither: it runs (here, the launcher refuses)
    with pytest.raises(AssertionError, match="a life was run"):
        shared.clean_ahead(email_scenario, no_lives)
