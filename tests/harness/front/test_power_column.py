"""``power@P`` as the pytest matrix runs it (``cases.run_power`` with shared first crashes):
the power loss is cut into a copy of P's first crash, and P's recovering lives are reused
only where the loss changed nothing. Every case here is compared with the same power loss
run whole (``run_point(..., power_loss=True)``: one case, lives 1 to the end, no sharing)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.front.cases import run_point, run_power
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.first_crash import SAME_LIVES, FirstCrashes
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.lives.tracer import read_trace
from crashmatrix.harness.verdict.result import CaseResult

from ...scenario_data import email_once

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
NO_FSYNC = "crashmatrix.reference_agent.mutants:no_fsync"
REUSED = SAME_LIVES.split("{point}")[0]


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher(
        "fork",
        preload=[
            "crashmatrix.harness.agents.reference",
            "crashmatrix.reference_agent.mutants",
            "crashmatrix.mock_tools.toolbox",
        ],
    )


@pytest.fixture
def email_scenario(tmp_path: Path) -> Scenario:
    path = tmp_path / "email_once.yaml"
    path.write_text(email_once(), encoding="utf-8")
    return load_scenario(path)


def _seen(result: CaseResult) -> tuple[object, ...]:
    observed = result.verdict.observed
    assert observed is not None
    counts = {k: v for k, v in observed.world.items() if k != "files"}
    return (result.verdict.status, result.lives, observed.ledger, observed.outcome, counts)


def _both(
    scenario: Scenario, point: CrashPoint, launcher: LifeLauncher, tmp_path: Path, agent: str = "reference"
) -> tuple[CaseResult, CaseResult]:
    shared = FirstCrashes(tmp_path / "first-crashes", record_syncs=True)
    column = run_power(scenario, point, launcher, tmp_path / "column", agent=agent, shared=shared)
    whole = run_point(scenario, point, launcher, tmp_path / "whole", agent=agent, power_loss=True)
    return column, whole


def test_an_agent_that_syncs_each_step_reuses_the_crashs_lives_and_says_so(
    launcher: LifeLauncher, email_scenario: Scenario, tmp_path: Path
) -> None:
    point = CrashPoint("after_running", "call_1")
    column, whole = _both(email_scenario, point, launcher, tmp_path)
    assert column.point_id == "power@after_running[call_1]" and column.boundary == "power_loss"
    assert column.passed and _seen(column) == _seen(whole)
    assert any(note.startswith(REUSED) for note in column.verdict.notes)
    assert not any(note.startswith(REUSED) for note in whole.verdict.notes)
    # The fault happened and the verdict saw it: its event sits between life 1 and life 2.
    trace = read_trace(column.case_dir)
    kinds = [(event["life"], event["event"]) for event in trace if event["event"] in ("fault", "start")]
    assert kinds == [(1, "start"), (1, "fault"), (2, "start")]
    assert any(note.startswith("power_loss: ") for note in column.verdict.notes)
    # P's own case directory is left as it was: the power case is a copy.
    found = FirstCrashes(tmp_path / "first-crashes").get(email_scenario, point, launcher)
    assert not any(event["event"] == "fault" for event in read_trace(found.run.case_dir))


def test_an_agent_that_never_syncs_runs_its_own_lives_from_what_survived(
    launcher: LifeLauncher, email_scenario: Scenario, tmp_path: Path
) -> None:
    # The email went out, the session never reached the disk: the restarted agent starts the
    # turn again and sends it twice.
    point = CrashPoint("after_side_effect", "call_1")
    column, whole = _both(email_scenario, point, launcher, tmp_path, NO_FSYNC)
    assert column.verdict.status == "failed" and _seen(column) == _seen(whole)
    assert any(v.invariant == "non_idempotent_at_most_once" for v in column.verdict.violations)
    assert not any(note.startswith(REUSED) for note in column.verdict.notes)
    assert (column.case_dir / "life-2.stderr").exists()  # life 2 ran here, from the cut copy


def test_a_fault_between_lives_comes_after_the_power_loss_not_before(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    # Someone edits the file between the crash and the restart: cut after the edit, the power
    # loss would roll the colleague's edit back (or cut a tampered session line short).
    scenario = load_scenario(ROOT / "scenarios" / "write_file" / "external_change_conflict.yaml")
    point = CrashPoint("after_running", "call_notes")
    column, whole = _both(scenario, point, launcher, tmp_path)
    assert column.passed, column.verdict.problems or column.verdict.mismatches
    assert _seen(column) == _seen(whole)
    files = [result.verdict.observed.world["files"]["notes.txt"] for result in (column, whole)]  # type: ignore[union-attr]
    assert files == ["edited by a colleague\n"] * 2
