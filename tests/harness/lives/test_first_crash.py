"""``P`` and ``recovery@P`` share their first crash: run once, same verdicts in either order."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.front.cases import run_point, run_recovery
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.first_crash import FirstCrashes
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.verdict.result import CaseResult

pytestmark = pytest.mark.slow

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
    # The depth-1 item's directory is the shared one, where its two lives ran once.
    assert a[0].case_dir.is_relative_to(tmp_path / "shared-a")
    assert _starts(a[0].case_dir) == 2 and not (tmp_path / "a-point").exists()


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
