"""tamper_arguments acts on an agent's own JSONL session (issue 26, part K).

tests/golden/own_session_tamper/agent.py is a small correct kind-2 agent that keeps its own
session in its own shape (``kind: chat`` lines that are the message itself, ``kind: step``
ledger lines in seed 004's field names), mapped by its adapter's ``session:``. Recovering a
call with a ledger step, it compares the saved call's arguments with its steps' hash first,
and answers ARGUMENTS_MISMATCH when they changed.

Between lives the scenarios that tamper edit that saved call in the agent's own file (where
its mapping finds it, as the JSON string the model sent): so the correct agent is green on
every case, and its twin (``OWN_TAMPER_BUG=replay``), which replays a stored result or runs
the call again for the changed arguments, is red -- before this, both were "not applicable"
and the twin passed the whole suite.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.front.cases import enumerate_points, run_point, run_recovery
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.plan.enumeration import RECOVERY_FIRST
from crashmatrix.harness.verdict.result import CaseResult

from ..launchers import warm_launcher

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "own_session_tamper"
ORDER = load_scenario(ROOT / "scenarios" / "faults" / "create_order_arguments_tampered.yaml")
WRITE = load_scenario(ROOT / "scenarios" / "write_file" / "arguments_tampered.yaml")


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield warm_launcher(HERE / "adapter.yaml", HERE / "adapter-twin.yaml")  # openai once, not per life


def _matrix(
    adapter: Path, launcher: LifeLauncher, work: Path, scenario: Scenario, *, depth: bool = False
) -> dict[str, CaseResult]:
    """The clean case and the case of every point the scenario covers, as ``crashmatrix run``
    runs them (each tampers between lives; after the Tool Result nothing is pending); with
    ``depth``, also a power loss at each point and a second crash while recovering."""
    agent = str(adapter)
    enum = enumerate_points(scenario, launcher, work / "clean", agent=agent)
    cases = {"clean": enum.clean_case()}
    for point in (p for p in enum.points if scenario.covers(p)):
        cases[point.id] = run_point(scenario, point, launcher, work / point.id, agent=agent)
        if depth:
            cases[f"power@{point.id}"] = run_point(
                scenario, point, launcher, work / f"power-{point.id}", agent=agent, power_loss=True
            )
            if point.boundary in RECOVERY_FIRST:  # where the restart has work to do
                cases[f"recovery@{point.id}"] = run_recovery(
                    scenario, point, launcher, work / f"recovery-{point.id}", agent=agent
                )
    return cases


def _checks(case: CaseResult) -> set[str]:
    return {v.invariant for v in case.verdict.violations} | {m.field for m in case.verdict.mismatches}


def _applied(case: CaseResult) -> list[dict[str, object]]:
    marks = json.loads((case.case_dir / "between_lives.json").read_text())
    applied: list[dict[str, object]] = marks["applied"]
    return applied


@pytest.mark.parametrize("scenario", [ORDER, WRITE], ids=lambda s: s.name)
def test_a_correct_agent_keeping_its_own_session_is_green_where_its_saved_call_was_tampered(
    scenario: Scenario, launcher: LifeLauncher, tmp_path: Path
) -> None:
    cases = _matrix(HERE / "adapter.yaml", launcher, tmp_path, scenario, depth=True)
    assert {"after_approved", "after_running", "before_tool_result"} <= {p.split("[")[0] for p in cases}
    assert {"power@after_running", "recovery@after_running"} <= {p.split("[")[0] for p in cases}
    failed = {name: (case.verdict.status, _checks(case)) for name, case in cases.items() if not case.passed}
    assert failed == {}
    for name, case in cases.items():
        if name == "clean" or "@" in name:
            continue  # a power loss's and a recovery's own directories: their lives
        # The tamper acted on the agent's own file, and said where.
        [applied] = _applied(case)
        assert applied["acted"] is True, (name, applied)
        assert "session.jsonl line" in str(applied["detail"]), (name, applied)


@pytest.mark.parametrize("scenario", [ORDER, WRITE], ids=lambda s: s.name)
def test_its_twin_that_replays_a_stored_result_for_changed_arguments_is_red(
    scenario: Scenario, launcher: LifeLauncher, tmp_path: Path
) -> None:
    cases = _matrix(HERE / "adapter-twin.yaml", launcher, tmp_path, scenario)
    failed = {name.split("[")[0]: _checks(case) for name, case in cases.items() if not case.passed}
    # Every case where a ledger step existed before the tamper; after_tool_call_saved has none,
    # so the saved (edited) call is simply what runs, and the twin is right there.
    assert "after_tool_call_saved" not in failed
    assert "clean" not in failed
    # Its stored result replayed for the new arguments: the model told it succeeded, not of a
    # conflict (outcome and code are crashmatrix's vocabulary, not judged for seed 004 results).
    [(call_id, _, _)] = scenario.rules[0].reply.tool_calls
    assert failed["before_tool_result"] == {f"told[{call_id}]"}
    # Run again with the new arguments where it had only approved or started.
    assert {"after_approved", "after_running"} <= set(failed)
    for name in ("after_approved", "after_running"):
        assert f"told[{call_id}]" in failed[name]
