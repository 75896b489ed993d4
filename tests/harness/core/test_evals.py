"""Which class of crash evals a crash case answers: the class of the call its point names,
under that call's contract with its arguments -- not its scenario's classes."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.core.evals import CrashedCall, crashed_call
from crashmatrix.harness.input.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


def test_run_command_ls_is_classed_read_only_though_its_tool_is_declared_non_idempotent() -> None:
    ls = load_scenario(SCENARIOS / "run_command" / "ls_replay.yaml")
    assert ls.idempotency_classes == ("non_idempotent",)  # the tool's declared contract
    assert crashed_call(ls, "after_running[call_ls]") == CrashedCall("call_ls", "run_command", "idempotent")
    publish = load_scenario(SCENARIOS / "run_command" / "npm_publish_never.yaml")
    assert crashed_call(publish, "after_running[call_publish]") == CrashedCall(
        "call_publish", "run_command", "non_idempotent"
    )


def test_each_call_of_a_two_tool_scenario_answers_for_its_own_class() -> None:
    scenario = load_scenario(SCENARIOS / "multi_call" / "two_calls_one_message.yaml")
    assert scenario.idempotency_classes == ("conditional", "non_idempotent")
    assert crashed_call(scenario, "after_side_effect[call_minutes]") == CrashedCall(
        "call_minutes", "write_file", "conditional"
    )
    assert crashed_call(scenario, "after_side_effect[call_team]") == CrashedCall(
        "call_team", "send_email", "non_idempotent"
    )


@pytest.mark.parametrize(
    "point",
    [
        "power@after_running[call_team]",
        "recovery@after_running[call_team]",
        "torn_write[call_team:running#2]",
    ],
)
def test_power_recovery_and_torn_points_are_classed_by_the_call_they_name(point: str) -> None:
    scenario = load_scenario(SCENARIOS / "multi_call" / "two_calls_one_message.yaml")
    crashed = crashed_call(scenario, point)
    assert crashed is not None and crashed.idempotency == "non_idempotent"


def test_a_clean_case_or_a_point_naming_no_call_has_no_class() -> None:
    scenario = load_scenario(SCENARIOS / "multi_call" / "two_calls_one_message.yaml")
    assert crashed_call(scenario, "clean") is None
    assert crashed_call(scenario, "after_running[call_nobody]") is None
