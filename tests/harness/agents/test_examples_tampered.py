"""The correct desk, http and memo agents pass both tamper scenarios of the built-in suite.

Between lives the suite edits the saved tool call in the agent's own JSONL session
(``tamper_arguments``, ``harness/lives/between.py``). A correct agent compares the saved
call's arguments with the hash its ledger recorded before it acts again on it: on a mismatch
it runs nothing, replays nothing, and tells the model a conflict in its own words (desk and
http: seed 004's ``ARGUMENTS_MISMATCH``; memo: "CONFLICT: ..."). Before these agents compared,
desk_agent placed or replayed the order after approved, running, the side effect and before the
Tool Result, http_agent after running and the side effect, and memo_agent closed the attempt
under the EDITED digest, so a second crash before the model was told found a match and ordered
the edited call.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crashmatrix.reports.results import CaseRecord, Results, load_results

from ...pytest_runs import run_inprocess

pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[3]
ORDER = ROOT / "scenarios" / "faults" / "create_order_arguments_tampered.yaml"
WRITE = ROOT / "scenarios" / "write_file" / "arguments_tampered.yaml"

# Cases each agent must pass, where recovery finds the edited call with a ledger line (the
# cells the unfixed agents were red in; a black box is crashed only at its service edges).
MUST_PASS = {
    "desk_agent": (
        "after_approved[call_chair]",
        "after_running[call_chair]",
        "after_side_effect[call_chair]",
        "before_tool_result[call_chair]",
        "recovery@after_running[call_chair]",
        "power@before_tool_result[call_chair]",
    ),
    "http_agent": ("after_running[call_chair]", "after_side_effect[call_chair]"),
    "memo_agent": (
        "after_running[call_chair]",
        "recovery@after_approved[call_chair]",
        "recovery@after_running[call_chair]",
        "after_side_effect[call_greet]",
    ),
}


def _run(pytester: pytest.Pytester, agent: str) -> Results:
    for scenario in (ORDER, WRITE):
        target = pytester.path / "scenarios" / scenario.parent.name / scenario.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(scenario, target)
    adapter = ROOT / "examples" / agent / "adapter.yaml"
    # Without the double-resume column: the examples hold no lease (two processes on one
    # session are red there), and tampering is what these scenarios are about.
    result = run_inprocess(
        pytester,
        "scenarios",
        f"--agent={adapter}",
        "-p",
        "no:cacheprovider",
        "--no-doctor",
        "--no-double-resume",
    )
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    assert results.cases, result.stdout.str()
    return results


def _told(case: CaseRecord) -> dict[str, str]:
    observed = case.observed or {}
    told: dict[str, str] = observed.get("told") or {}
    return told


@pytest.mark.parametrize("agent", sorted(MUST_PASS))
def test_the_correct_example_passes_both_tamper_scenarios(pytester: pytest.Pytester, agent: str) -> None:
    results = _run(pytester, agent)
    red = [(c.scenario, c.point, c.mismatches, c.violations) for c in results.cases if c.status == "failed"]
    assert not red, red
    assert {c.status for c in results.cases} <= {"passed", "not_applicable", "not_reached"}
    passed = {c.point: c for c in results.cases if c.status == "passed"}
    for point in MUST_PASS[agent]:
        assert point in passed, (point, sorted(passed))
        # The edit acted and was noticed: the model was told a conflict, not a success.
        if point.startswith(("after_", "recovery@", "power@")) and "tool_call_saved" not in point:
            assert set(_told(passed[point]).values()) == {"conflict"}, (point, passed[point].observed)
    # Before any ledger line the edited call is simply what runs (the scenario's own cell).
    saved = [c for c in results.cases if c.point == "after_tool_call_saved[call_chair]"]
    assert [c.status for c in saved] == ([] if agent == "http_agent" else ["passed"])
