"""The DBOS example (examples/dbos_team/), crashed at DBOS's seams and resumed by DBOS's own
recovery: the team's workflow with tools as steps and no keys sends the approved email (and
places the order) twice after a kill between the tool's effect and its step row's commit --
DBOS re-runs a step it has no row for (at-least-once) -- while a kill after the commit is
replayed from the row and green; ``fixed.py`` (keys from the workflow and step ids, reconciled
by lookup) is green at every first crash of the same scenarios."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.front.cases import run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher

from ....pytest_runs import case_outcomes

pytest.importorskip("dbos")
pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[4]
TEAM = ROOT / "examples" / "dbos_team"
SCENARIOS = [
    ROOT / "scenarios" / "send_email" / "send_once.yaml",
    ROOT / "scenarios" / "create_order" / "keyed_once.yaml",
]
CALLS = {"send_once": "call_mail", "keyed_once": "call_order"}


def test_the_step_re_run_after_the_effect_is_a_failing_cell_and_the_replay_is_not(
    pytester: pytest.Pytester,
) -> None:
    cases = case_outcomes(pytester, TEAM / "adapter.yaml", SCENARIOS, "--no-recovery-crashes")
    for stem, call in CALLS.items():
        assert cases[stem][f"after_side_effect[{call}]"][0] == "failed", cases[stem]
        for point in (
            "clean",
            f"after_tool_call_saved[{call}]",
            f"after_running[{call}]",
            f"before_tool_result[{call}]",
        ):
            assert cases[stem][point][0] == "passed", (stem, point, cases[stem][point])


def test_the_failure_says_dbos_ran_the_send_twice(tmp_path: Path) -> None:
    result = run_point(
        load_scenario(SCENARIOS[0]),
        parse_point("after_side_effect[call_mail]"),
        LifeLauncher("fork", preload=("dbos",)),
        tmp_path / "case",
        agent=str(TEAM / "adapter.yaml"),
        deadline=120.0,
    )
    verdict = result.verdict
    assert verdict.status == "failed"
    assert verdict.observed.world["emails"] == 2
    [violation] = [v for v in verdict.violations if v.invariant == "non_idempotent_at_most_once"]
    assert "caused 2 side effects" in violation.message
    # Both sends are the one step's: DBOS committed a single send_email row, after the re-run.
    from crashmatrix.harness.agents.frameworks import dbos as d

    [turn] = d.read_turns(tmp_path / "case" / "world" / "workspace" / d.DB_NAME)
    assert [s.name for s in turn.steps] == ["ask_model", "send_email", "ask_model"]


def test_the_fixed_agent_is_green_at_every_first_crash(pytester: pytest.Pytester) -> None:
    # Second crashes during recovery are left to the documented matrix run (docs/frameworks.md).
    cases = case_outcomes(pytester, TEAM / "adapter_fixed.yaml", SCENARIOS, "--no-recovery-crashes")
    for stem in CALLS:
        outcomes = {case: outcome for case, (outcome, _) in cases[stem].items()}
        assert "failed" not in outcomes.values(), (stem, outcomes)
        assert outcomes[f"after_side_effect[{CALLS[stem]}]"] == "passed"
