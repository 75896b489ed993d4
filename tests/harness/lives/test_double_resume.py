"""Double resume for real: two forked lives resume one SIGKILLed session at once
(``harness.lives.double_resume``). The reference agent, holding its lease, is green at both
points of the column for a non-idempotent email and a keyed order: one life acts, the other
stops before it reads the session and names the holder. ``no_session_lease`` is red: both
act (two emails; for the keyed order, two Tool Results though the key keeps one order).

Slow: real lives. One fork server for the module, 4 cases of about 3 lives each.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.double_resume import concurrent_lives
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.front.cases import run_double
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.verdict.result import CaseResult

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
MUTANT = "crashmatrix.reference_agent.mutants:no_session_lease"


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher(
        "fork", preload=["crashmatrix.harness.agents.reference", "crashmatrix.mock_tools.toolbox"]
    )


def _email() -> Scenario:
    return load_scenario(ROOT / "tests" / "data" / "email_once.yaml")


def _order() -> Scenario:
    return load_scenario(ROOT / "scenarios" / "create_order" / "keyed_once.yaml")


def _case(launcher: LifeLauncher, tmp: Path, scenario: Scenario, point: CrashPoint, agent: str) -> CaseResult:
    return run_double(scenario, point, launcher, tmp / agent.rpartition(":")[2], agent=agent, deadline=60.0)


def _world(result: CaseResult) -> dict[str, object]:
    assert result.observation is not None
    return dict(result.observation.world.as_expected())


@pytest.mark.parametrize(
    ("scenario", "call", "counted"), [(_email, "call_1", "emails"), (_order, "call_order", "orders")]
)
@pytest.mark.parametrize("boundary", ["after_tool_call_saved", "after_running"])
def test_the_reference_agent_resumes_once_and_the_other_life_stops_at_the_lease(
    launcher: LifeLauncher, tmp_path: Path, scenario: object, call: str, counted: str, boundary: str
) -> None:
    assert callable(scenario)
    result = _case(launcher, tmp_path, scenario(), CrashPoint(boundary, call), "reference")
    assert result.passed, result.verdict
    assert result.observation is not None
    lives = concurrent_lives(result.observation.trace, result.observation.world.events)
    (winner,) = [life for life in lives if life.acted]
    (loser,) = [life for life in lives if not life.acted]
    assert winner.gated and loser.status == "exited" and loser.lines == loser.effects == 0
    stderr = (result.case_dir / f"life-{loser.life}.stderr").read_text(encoding="utf-8")
    assert f"leased by pid {winner.pid}" in stderr
    assert _world(result)[counted] <= 1  # after_running of an email: told uncertain, none sent


def test_without_a_lease_both_lives_send_the_email(launcher: LifeLauncher, tmp_path: Path) -> None:
    point = CrashPoint("after_tool_call_saved", "call_1")
    result = _case(launcher, tmp_path, _email(), point, MUTANT)
    assert result.verdict.status == "failed"
    broken = {v.invariant for v in result.verdict.violations}
    assert {"loser_stops_cleanly", "non_idempotent_at_most_once", "one_tool_result_per_call"} <= broken
    assert _world(result)["emails"] == 2
    # The race was the schedule's, not luck: both lives were held past their reading of the
    # session, at their first step, and let go together.
    assert "released together: every concurrent life reached its first step" in " ".join(result.verdict.notes)


def test_without_a_lease_a_keyed_order_is_made_once_but_answered_twice(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    result = _case(launcher, tmp_path, _order(), CrashPoint("after_running", "call_order"), MUTANT)
    broken = {v.invariant for v in result.verdict.violations}
    assert {"loser_stops_cleanly", "one_tool_result_per_call"} <= broken
    assert "non_idempotent_at_most_once" not in broken and _world(result)["orders"] == 1
