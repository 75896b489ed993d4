"""The Temporal example (examples/temporal_team/), its worker SIGKILLed at Temporal's activity
seams and resumed by Temporal's own recovery, on a real dev server (one per life, outliving the
worker): the workflow with tools as activities and no keys sends the approved email twice after
a kill between the send and the server's record of the activity's completion -- the server
retries an activity whose worker died once its start-to-close timeout passes (at-least-once) --
while a kill after the completion is replayed from the history and green; ``fixed.py`` (keys
from the workflow and activity ids, reconciled by lookup) sends once and orders once at the
same moment. Four cases on one fork server, no clean runs (``run_point``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.front.cases import run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher

from ....launchers import warm_launcher

pytest.importorskip("temporalio")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[4]
TEAM = ROOT / "examples" / "temporal_team"
SEND_ONCE = ROOT / "scenarios" / "send_email" / "send_once.yaml"
KEYED_ONCE = ROOT / "scenarios" / "create_order" / "keyed_once.yaml"
# A life waits out the killed activity's start-to-close timeout (3 s) on a loaded machine.
DEADLINE = 120.0


@pytest.fixture(scope="module")
def launcher() -> LifeLauncher:
    # The server ``pytest --agent`` would start, both agents loaded warm in it (the lives of a
    # preloading one loaded the adapter again each).
    return warm_launcher(TEAM / "adapter.yaml", TEAM / "adapter_fixed.yaml")


def _case(launcher: LifeLauncher, case_dir: Path, adapter: str, scenario: Path, point: str) -> Any:
    return run_point(
        load_scenario(scenario),
        parse_point(point),
        launcher,
        case_dir,
        agent=str(TEAM / adapter),
        deadline=DEADLINE,
    ).verdict


def test_an_activity_killed_after_its_send_is_retried_and_sends_again(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    verdict = _case(launcher, tmp_path / "case", "adapter.yaml", SEND_ONCE, "after_side_effect[call_mail]")
    assert verdict.status == "failed"
    assert verdict.observed.world["emails"] == 2
    [violation] = [v for v in verdict.violations if v.invariant == "non_idempotent_at_most_once"]
    assert "caused 2 side effects" in violation.message
    # Both sends are the one scheduled activity's: its completion recorded once, after the retry.
    from crashmatrix.harness.agents.frameworks import temporal as t

    [turn] = t.read_turns(tmp_path / "case" / "world" / "workspace" / t.DB_NAME)
    assert [s.name for s in turn.steps] == ["ask_model", "send_email", "ask_model"]
    assert turn.status == "COMPLETED"


def test_an_activity_killed_after_its_completion_was_recorded_is_replayed_not_run(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    verdict = _case(launcher, tmp_path / "case", "adapter.yaml", SEND_ONCE, "before_tool_result[call_mail]")
    assert verdict.status == "passed", verdict
    assert verdict.observed.world["emails"] == 1


@pytest.mark.parametrize(
    ("scenario", "point", "world"),
    [
        (SEND_ONCE, "after_side_effect[call_mail]", "emails"),
        (KEYED_ONCE, "after_side_effect[call_order]", "orders"),
    ],
    ids=["email", "order"],
)
def test_the_keyed_activity_finds_its_own_effect_when_retried(
    launcher: LifeLauncher, tmp_path: Path, scenario: Path, point: str, world: str
) -> None:
    verdict = _case(launcher, tmp_path / "case", "adapter_fixed.yaml", scenario, point)
    assert verdict.status == "passed", verdict
    assert verdict.observed.world[world] == 1
