"""Golden: a scorecard row is answered by the crashes of its own class (issue 25, part E).

``scorecard_classes/agent.py`` sends an email and then reads its outbox back with the
read-only ``list_sent_emails``: one scenario (``send_email/send_then_list.yaml``), two
idempotency classes. It runs as a team would run it
(``pytest scenarios --agent scorecard_classes/adapter.yaml``) and the scorecard must file
each crash under the class of the call it crashed:

* the correct agent is green, and its idempotent rows are passed by crashes on the read
  alone (every case of them names ``list_sent_emails``), its non-idempotent rows by crashes
  on the send alone; each count is passed/total;
* its ``blind_resend`` twin sends again after a restart: "no double effect" fails for
  non-idempotent calls with the double effect as its why, and no idempotent row holds a
  case of the send;
* its ``forget_sent`` twin leaves a send it finds sent without a Tool Result: "the turn
  finished" fails at after_side_effect for non-idempotent calls, naming
  ``one_tool_result_per_call``, while the same question for idempotent calls passes on the
  read's crash -- filed by the scenario's classes, it went red there too (a false red on a
  read the agent recovers correctly).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crashmatrix.harness.core.evals import crash_eval_id
from crashmatrix.harness.input.suite import BUILTIN_SUITE
from crashmatrix.reports.results import Results, load_results
from crashmatrix.reports.scorecard import Scorecard, build_scorecard

from ..planted import plant
from ..pytest_runs import run_inprocess

pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent / "scorecard_classes"
SCENARIO = BUILTIN_SUITE / "send_email" / "send_then_list.yaml"
READ, SEND = "list_sent_emails", "send_email"


def _run(pytester: pytest.Pytester, adapter: Path, *options: str) -> Results:
    target = pytester.path / "scenarios" / SCENARIO.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(SCENARIO, target)
    result = run_inprocess(pytester, "scenarios", f"--agent={adapter}", "-p", "no:cacheprovider", *options)
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    assert results.cases, result.stdout.str()
    return results


def _rows_of(card: Scorecard, cls: str) -> list[tuple[str, str, str]]:
    return [(row.id, row.state, row.ratio) for row in card.of_kind("crash") if f".{cls}." in row.id]


def _tools_behind(results: Results, card: Scorecard, cls: str) -> set[str]:
    by_id = {case.node_id: case for case in results.cases}
    return {
        by_id[node].crash_tool for row in card.of_kind("crash") if f".{cls}." in row.id for node in row.cases
    }


def test_each_class_of_rows_is_answered_by_crashes_on_its_own_tool(pytester: pytest.Pytester) -> None:
    # Green, and the doctor finds nothing blind on this agent (its run with the doctor gives
    # the same verdicts): no doctor run (tests/README.md). The twins' red runs below keep it,
    # as a team runs them: a check it found blind would leave their red cases green.
    results = _run(pytester, HERE / "adapter.yaml", "--no-doctor")
    statuses = {case.node_id: case.status for case in results.cases}
    assert set(statuses.values()) <= {"passed", "not_applicable", "not_reached"}, statuses
    classed = {(c.crash_tool, c.crash_class) for c in results.cases if c.crash_call}
    assert classed == {(READ, "idempotent"), (SEND, "non_idempotent")}, classed
    card = build_scorecard(results)
    assert _tools_behind(results, card, "idempotent") == {READ}
    assert _tools_behind(results, card, "non_idempotent") == {SEND}
    # The read, killed after it ran, was run again and the turn finished: a pass with its count.
    row = card.row(crash_eval_id("after_side_effect", "idempotent", "turn_finished"))
    assert row is not None and row.state == "pass" and len(row.passed) == len(row.cases) >= 1, row
    assert all(
        state != "fail" for _, state, _ in _rows_of(card, "idempotent") + _rows_of(card, "non_idempotent")
    )


def test_a_blind_resend_is_red_on_the_sends_rows_and_never_on_the_reads(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    twin = plant(HERE, "adapter.yaml", "MAIL_CHECKER_BUG", "blind_resend", tmp_path / "twin")
    results = _run(pytester, twin)
    (after_send,) = [case for case in results.cases if case.point == "after_side_effect[call_send]"]
    assert after_send.status == "failed" and after_send.crash_class == "non_idempotent"
    card = build_scorecard(results)
    double = card.row(crash_eval_id("after_side_effect", "non_idempotent", "no_double_effect"))
    assert double is not None and double.state == "fail", double
    assert "invariant non_idempotent_at_most_once" in double.why and after_send.node_id in double.failing
    assert double.ratio == f"{len(double.passed)}/{len(double.cases)}" and len(double.passed) < len(
        double.cases
    )
    # Every red row is the send's; the read's rows at the same crash points stay green.
    red = [(row_id, ratio) for row_id, state, ratio in _rows_of(card, "non_idempotent") if state == "fail"]
    assert red, _rows_of(card, "non_idempotent")
    idempotent = _rows_of(card, "idempotent")
    assert not [row for row in idempotent if row[1] == "fail"], idempotent
    read_after = card.row(crash_eval_id("after_side_effect", "idempotent", "told_the_truth"))
    assert read_after is not None and read_after.state in ("pass", "not_reached"), read_after
    assert after_send.node_id not in read_after.cases


def test_a_send_left_unanswered_fails_the_sends_turn_and_not_the_reads(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """ "The turn finished" is asked of every class: filed by the scenario's classes, the
    send's unanswered call would fail the read's row at the same crash point too."""
    twin = plant(HERE, "adapter.yaml", "MAIL_CHECKER_BUG", "forget_sent", tmp_path / "twin")
    results = _run(pytester, twin)
    (after_send,) = [case for case in results.cases if case.point == "after_side_effect[call_send]"]
    assert after_send.status == "failed", after_send
    assert "one_tool_result_per_call" in {v["invariant"] for v in after_send.violations}
    card = build_scorecard(results)
    send_turn = card.row(crash_eval_id("after_side_effect", "non_idempotent", "turn_finished"))
    assert send_turn is not None and send_turn.state == "fail", send_turn
    assert "invariant one_tool_result_per_call" in send_turn.why, send_turn.why
    read_turn = card.row(crash_eval_id("after_side_effect", "idempotent", "turn_finished"))
    assert read_turn is not None and read_turn.state == "pass", read_turn
    assert read_turn.ratio == f"{len(read_turn.cases)}/{len(read_turn.cases)}"
    idempotent = _rows_of(card, "idempotent")
    assert not [row for row in idempotent if row[1] == "fail"], idempotent
