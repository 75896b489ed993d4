"""Golden: a seed 004 ledger that records ``planned`` before each approval (issue 25).

``planned_first/agent.py`` is a black box that passes the harness's tool results on as they
are (``results: crashmatrix``), so the suite's exact ``ledger:`` sequences are judged against
its ledger. Seed 004's ``planned`` is our state "no ledger yet": before, every such sequence
was red for it (``create_order_arguments_tampered.yaml``'s clean case: expected [approved,
running, succeeded], observed [planned, approved, running, succeeded]), as it was for
examples/blackbox_agent. Now a sequence in our vocabulary is compared without the planned
steps: the agent is green on the tamper scenario, and its twin
(``PLANNED_FIRST_BUG=started_failed``: a changed call's started step closed ``failed``, though
the order may have been placed) stays red, on the ledger alone, with the ledger shown as
written.

The agent is crash-only (issue 32): it exits non-zero on any failed tool request. In the
tool-side columns it is restarted, as its supervisor would, and green: the restart closes the
started step uncertain and asks again under the same key, one order. Each such pass says in
a note that life 1 died on the fault.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS
from crashmatrix.reports.results import Results, load_results

from ..planted import plant
from ..pytest_runs import run_inprocess

pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "planned_first"
TAMPERED = ROOT / "scenarios" / "faults" / "create_order_arguments_tampered.yaml"
STARTED = ("after_running[call_chair]", "after_side_effect[call_chair]")


def _run(pytester: pytest.Pytester, adapter: Path) -> tuple[Results, str]:
    """The run's results and what pytest printed."""
    target = pytester.path / "scenarios" / TAMPERED.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(TAMPERED, target)
    # Without the double-resume column: the agent holds no lease, and its double resume is red
    # (tests/harness/lives/test_double_resume_foreign.py); these tests are about its ledger.
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
    return results, result.stdout.str()


def test_a_ledger_that_plans_first_is_green_on_the_suites_sequences(pytester: pytest.Pytester) -> None:
    results, printed = _run(pytester, HERE / "adapter.yaml")
    cases = {case.point: case for case in results.cases}
    assert {case.status for case in results.cases} <= {"passed", "not_reached"}, [
        (c.point, c.status, c.mismatches) for c in results.cases
    ]
    for point in ("clean", *STARTED):
        assert cases[point].status == "passed", cases[point]
        observed = cases[point].observed or {}
        assert observed["ledger"]["call_chair"][0] == "planned"  # judged, and kept as written
        assert "ledger" in cases[point].expected
    running = cases["after_running[call_chair]"].observed or {}
    assert running["code"] == {"call_chair": "ARGUMENTS_MISMATCH"}
    # Each tool-side column: exited non-zero on the fault and restarted; the scenario's tamper
    # acts before the restart as before any (an edit while the agent is down), so the restarted
    # agent refuses the changed call as it does after a crash.
    for kind in TOOL_SIDE_KINDS:
        case = cases[f"{kind}[call_chair]"]
        assert case.status == "passed", (case.point, case.problems, case.violations)
        assert any(
            note.startswith(f"life 1 died: on the tool-side fault {kind}[call_chair], restarted")
            and "would: agent golden-planned-first exited with 1: " in note
            and "\n" not in note  # the exit and the exception that ended it; stderr has the rest
            for note in case.notes
        ), case.notes
        assert (case.observed or {})["code"] == {"call_chair": "ARGUMENTS_MISMATCH"}, case.observed
    # Green, and listed apart where a team reads the run: the terminal summary and matrix.md.
    assert "passed after dying on a tool-side fault (4): restarted, the agent recovered" in printed
    shown = pytester.path / "reports" / "latest" / "matrix.md"
    assert "### Passed after dying on a tool-side fault (4)" in shown.read_text(encoding="utf-8")


def test_its_twin_closing_a_started_step_failed_stays_red_on_the_ledger(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    twin = plant(HERE, "adapter.yaml", "PLANNED_FIRST_BUG", "started_failed", tmp_path / "twin")
    results, _ = _run(pytester, twin)
    cases = {case.point: case for case in results.cases}
    assert cases["clean"].status == "passed"
    for point in STARTED:
        assert cases[point].status == "failed"
        (mismatch,) = cases[point].mismatches
        assert mismatch["field"] == "ledger[call_chair]"
        assert mismatch["observed"] == ["planned", "approved", "running", "failed"]
