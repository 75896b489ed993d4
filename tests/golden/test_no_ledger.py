"""Golden: an agent that keeps no ledger is judged only by what it has (issue 25).

``no_ledger/agent.py`` keeps its conversation and nothing else, and its adapter says nothing
about a ledger. It runs ``pytest scenarios/send_email/ --agent no_ledger/adapter.yaml`` as a
team would, and every view of the run must agree:

* the correct agent is green (or not applicable), and every case lists each ledger check as
  not applicable with why, instead of ``running_before_side_effect`` red in every case;
* its twin, which sends again blindly after a restart, fails "no double effect" at
  after_side_effect, and no case, cause or scorecard row of it names a ledger check.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crashmatrix.harness.core.evals import CRASH_QUESTIONS, crash_eval_id
from crashmatrix.harness.input.suite import BUILTIN_SUITE
from crashmatrix.harness.verdict.invariants import LEDGER_INVARIANTS
from crashmatrix.reports.causes import group_causes
from crashmatrix.reports.results import Results, load_results
from crashmatrix.reports.scorecard import build_scorecard

from ..planted import plant
from ..pytest_runs import run_inprocess

pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent / "no_ledger"
SEND_EMAIL = BUILTIN_SUITE / "send_email"
WHY = "does not declare session.keeps_ledger"
NO_DOUBLE_EFFECT = crash_eval_id("after_side_effect", "non_idempotent", "no_double_effect")


def _run(pytester: pytest.Pytester, adapter: Path, *scenarios: str) -> Results:
    """``pytest scenarios --agent adapter`` on copies of the built-in ``scenarios``."""
    for name in scenarios:
        target = pytester.path / "scenarios" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SEND_EMAIL / name, target)
    result = run_inprocess(pytester, "scenarios", f"--agent={adapter}", "-p", "no:cacheprovider")
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    assert results.cases, result.stdout.str()
    return results


def _ledger_rows(results: Results) -> list[tuple[str, str, str]]:
    return [
        (row.id, row.state, row.why)
        for row in build_scorecard(results).rows
        if row.id.endswith(".ledger_first")
    ]


def test_an_agent_without_a_ledger_is_green_on_send_email_and_says_why_the_ledger_is_not_judged(
    pytester: pytest.Pytester,
) -> None:
    results = _run(pytester, HERE / "adapter.yaml", *(p.name for p in sorted(SEND_EMAIL.glob("*.yaml"))))
    statuses = {case.node_id: case.status for case in results.cases}
    assert set(statuses.values()) <= {"passed", "not_applicable", "not_reached"}, statuses
    judged = [case for case in results.cases if case.status == "passed"]
    # clean, the model's reply, the saved call, the send, the Tool Result (torn and whole),
    # their power losses and a recovery, for the one-email scenarios
    assert len(judged) >= 25, statuses
    for case in judged:
        unjudged = {entry.partition(":")[0]: entry for entry in case.not_applicable}
        assert set(unjudged) >= LEDGER_INVARIANTS, (case.node_id, case.not_applicable)
        assert all(WHY in unjudged[name] for name in LEDGER_INVARIANTS), case.not_applicable
        assert not case.violations and not case.mismatches, case.node_id
    # The cases that say what a crash after the send leaves: one email, never a second.
    sent = [c for c in judged if c.point.startswith(("after_side_effect[", "torn_write["))]
    assert sent and all(c.observed and c.observed["world"]["emails"] == 1 for c in sent)
    # The lost response is a fault of the harness's mail service: this agent sends its own.
    lost = [case for case in results.cases if case.scenario == "send_email_response_lost"]
    assert lost and {case.status for case in lost} == {"not_applicable"}, lost
    # Scorecard: "the ledger said running first" is n.a. with the reason, never pass or fail;
    # "no double effect" after the send passes.
    rows = _ledger_rows(results)
    assert rows and {state for _, state, _ in rows} <= {"not_applicable", "not_reached"}, rows
    applicable = dict((row_id, why) for row_id, state, why in rows if state == "not_applicable")
    after_send = crash_eval_id("after_side_effect", "non_idempotent", "ledger_first")
    assert WHY in applicable[after_send] and "no running record" in applicable[after_send]
    row = build_scorecard(results).row(NO_DOUBLE_EFFECT)
    assert row is not None and row.state == "pass", row
    assert not group_causes(results.cases)


def test_a_blind_resend_without_a_ledger_fails_no_double_effect_and_nothing_ledger_related(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    twin = plant(HERE, "adapter.yaml", "NO_LEDGER_AGENT_BUG", "blind_resend", tmp_path / "twin")
    results = _run(pytester, twin, "send_once.yaml")
    (after_send,) = [case for case in results.cases if case.point == "after_side_effect[call_mail]"]
    assert after_send.status == "failed"
    assert {v["invariant"] for v in after_send.violations} == {"non_idempotent_at_most_once"}
    assert "caused 2 side effects" in str(after_send.violations[0]["message"])
    # Nothing ledger-related anywhere: no case's violation, no cause, no scorecard row.
    named = {str(v["invariant"]) for case in results.cases for v in case.violations}
    assert named == {"non_idempotent_at_most_once"}, named
    causes = group_causes(results.cases)
    assert not {cause.key for cause in causes} & LEDGER_INVARIANTS, [c.key for c in causes]
    assert causes.causes[0].key == "non_idempotent_at_most_once"
    card = build_scorecard(results)
    row = card.row(NO_DOUBLE_EFFECT)
    assert row is not None and row.state == "fail", row
    assert "non_idempotent_at_most_once" in row.why and "running" not in row.why, row.why
    assert {state for _, state, _ in _ledger_rows(results)} <= {"not_applicable", "not_reached"}
    # Each failing row fails on the question it asks, not on a ledger check.
    failing = [r for r in card.rows if r.state == "fail"]
    assert failing and all(
        r.id.endswith((".no_double_effect", ".told_the_truth")) or r.kind == "seed004" for r in failing
    ), [(r.id, r.why) for r in failing]
    assert set(CRASH_QUESTIONS) >= {r.id.rsplit(".", 1)[1] for r in failing if r.kind == "crash"}
