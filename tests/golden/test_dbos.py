"""golden: a DBOS-durable agent in an adapter YAML (``framework: dbos``), judged by what DBOS
does on a crash (issue 29).

tests/golden/dbos/mailer.py runs its loop as a DBOS workflow, its model call, two helpers and
its one tool as steps, and keys its email by the workflow's and step's ids. What is pinned:

* a crash past the send and before DBOS committed the step's row (``after_side_effect``): DBOS
  runs the step again (at-least-once); the keyed tool finds its email and sends nothing: green,
  one email;
* a crash after the row committed (``before_tool_result``): DBOS replays the row, the tool does
  not run: green for the agent and for its twin (a replay is no resend);
* its helper steps (one between the model's reply and the tool's step) are no tool calls: the
  boundaries are the tool's, so ``after_side_effect[call_mail]`` is the moment after the send;
* the ledger checks are not applicable, with DBOS's reason (no row for a step not committed).

Its twin (no key, as DBOS's examples send) is red at ``after_side_effect`` only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.front.cases import run_point
from crashmatrix.harness.input.scenario import load_scenario

from ..launchers import warm_launcher
from ..pytest_runs import Cases, case_outcomes

pytest.importorskip("dbos")
pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
AGENT = Path(__file__).resolve().parent / "dbos"
SEND_ONCE = ROOT / "scenarios" / "send_email" / "send_once.yaml"
POINTS = (
    "clean",
    "after_running[call_mail]",
    "after_side_effect[call_mail]",
    "before_tool_result[call_mail]",
)


def _run(pytester: pytest.Pytester, adapter: str) -> Cases:
    # The POINTS only: the model's moments are no claim of these tests.
    points = "not after_model_reply and not after_tool_call_saved"
    return case_outcomes(pytester, AGENT / adapter, [SEND_ONCE], "--no-recovery-crashes", "-k", points)


def test_its_keyed_step_re_run_by_dbos_sends_nothing_twice(pytester: pytest.Pytester) -> None:
    mail = _run(pytester, "adapter.yaml")["send_once"]
    for case in POINTS:
        assert mail[case][0] == "passed", (case, mail[case])


def test_a_crash_past_the_send_is_judged_on_the_world_without_a_ledger(tmp_path: Path) -> None:
    result = run_point(
        load_scenario(SEND_ONCE),
        parse_point("after_side_effect[call_mail]"),
        warm_launcher(AGENT / "adapter.yaml"),  # the matrix run's server: the agent warm in it
        tmp_path / "case",
        agent=str(AGENT / "adapter.yaml"),
        deadline=120.0,
    )
    verdict = result.verdict
    assert verdict.status == "passed", verdict.mismatches or verdict.violations or verdict.problems
    assert verdict.observed.world["emails"] == 1
    assert any("no row and no running state" in why for why in verdict.not_applicable), verdict.not_applicable
    # DBOS re-ran the step: its table holds one committed send_email row, told "Already sent".
    outbox = (tmp_path / "case" / "world" / "workspace" / "outbox.jsonl").read_text(encoding="utf-8")
    assert len(outbox.splitlines()) == 1


def test_its_twin_that_sends_again_on_dbos_re_run_stays_red_there_only(pytester: pytest.Pytester) -> None:
    mail = _run(pytester, "adapter_twin.yaml")["send_once"]
    assert mail["after_side_effect[call_mail]"][0] == "failed"
    for case in ("clean", "after_running[call_mail]", "before_tool_result[call_mail]"):
        assert mail[case][0] == "passed", (case, mail[case])
