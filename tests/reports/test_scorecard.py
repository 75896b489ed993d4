"""The scorecard: named evals scored from cases, and how each report shows them.

A row passes only when a judged case asked its question; a case that fails on something
else does not fail it; what cannot be judged on an agent is not applicable with the reason,
and what no case asked is not reached. Nothing is a pass that no case showed.
"""

from __future__ import annotations

import dataclasses
from html.parser import HTMLParser
from typing import Any

from crashmatrix.harness.core.evals import CRASH_QUESTIONS, SEED004_EVALS, crash_eval_id
from crashmatrix.reports.compare import compare, render_compare_html, render_compare_markdown
from crashmatrix.reports.html import render_html
from crashmatrix.reports.markdown import render_markdown
from crashmatrix.reports.matrix import build_matrix
from crashmatrix.reports.results import CaseRecord, Results, results_from_json, results_to_json
from crashmatrix.reports.scorecard import CLASSES, CRASH_COLUMNS, build_scorecard
from crashmatrix.reports.terminal import render_scorecard, render_terminal

EMAIL_NONE = "non_idempotent"


def case(
    point: str = "after_running[call_mail]",
    *,
    boundary: str = "after_running",
    status: str = "passed",
    idempotency: tuple[str, ...] = (EMAIL_NONE,),
    evals: tuple[str, ...] = (),
    expected: dict[str, Any] | None = None,
    violations: tuple[dict[str, Any], ...] = (),
    mismatches: tuple[dict[str, Any], ...] = (),
    not_applicable: tuple[str, ...] = (),
    problems: tuple[str, ...] = (),
    scenario: str = "send_once",
    crash_class: str | None = None,
    tools: tuple[str, ...] = ("send_email",),
) -> CaseRecord:
    # The crashed call's class: by default the scenario's one class, for a point naming a call.
    crashed = "[" in point
    return CaseRecord(
        node_id=f"scenarios/{scenario}.yaml::{point}",
        scenario=scenario,
        scenario_path=f"scenarios/{scenario}.yaml",
        tools=tools,
        idempotency=idempotency,
        point=point,
        boundary=boundary,
        status=status,
        indeterminate=False,
        seconds=0.1,
        lives=2,
        repro=f"crashmatrix run scenarios/{scenario}.yaml --crash '{point}'",
        expected=expected if expected is not None else {"told": {"call_mail": "uncertain"}},
        mismatches=mismatches,
        violations=violations,
        not_applicable=not_applicable,
        problems=problems,
        evals=evals,
        crash_call=point.rpartition("[")[2].split("]")[0].split(":")[0] if crashed else "",
        crash_tool=tools[0] if crashed else "",
        crash_class=(idempotency[0] if crash_class is None else crash_class) if crashed else "",
    )


DOUBLE = {"invariant": "non_idempotent_at_most_once", "message": "caused 2 side effects", "tool_call_id": "c"}
LIED = {"field": "told[call_mail]", "expected": "uncertain", "observed": "succeeded"}
NO_DOUBLE = crash_eval_id("after_running", EMAIL_NONE, "no_double_effect")
TRUTH = crash_eval_id("after_running", EMAIL_NONE, "told_the_truth")
FINISHED = crash_eval_id("after_running", EMAIL_NONE, "turn_finished")


def state(cases: list[CaseRecord], eval_id: str) -> str:
    row = build_scorecard(cases, "agent").row(eval_id)
    assert row is not None, eval_id
    return row.state


# -- the rows ---------------------------------------------------------------------------------


def test_every_seed004_eval_and_every_asked_crash_question_has_exactly_one_row() -> None:
    card = build_scorecard([], "agent")
    asked = sum(len(q.classes) for q in CRASH_QUESTIONS.values())
    assert len(card.of_kind("seed004")) == len(SEED004_EVALS)
    assert len(card.of_kind("crash")) == len(CRASH_COLUMNS) * asked
    assert len({row.id for row in card.rows}) == len(card.rows)
    # With no case at all, nothing passes: every row is not reached, with a reason.
    assert {row.state for row in card.rows} == {"not_reached"}
    assert all(row.why == "no case of it ran" for row in card.rows)


def test_no_double_effect_is_asked_only_of_non_idempotent_tools() -> None:
    grid = build_scorecard([], "agent").crash_grid()
    assert len(grid) == len(CRASH_COLUMNS) * len(CLASSES)
    questions = list(CRASH_QUESTIONS)
    for _column, cls, rows in grid:
        double = rows[questions.index("no_double_effect")]
        assert (double is None) == (cls != EMAIL_NONE)
        assert rows[questions.index("told_the_truth")] is not None


def test_a_double_effect_fails_no_double_effect_and_names_the_case_and_its_rerun() -> None:
    bad = case(status="failed", violations=(DOUBLE,))
    card = build_scorecard([case("after_running[call_a]"), bad], "agent")
    row = card.row(NO_DOUBLE)
    assert row is not None and row.state == "fail"
    assert row.failing == (bad.node_id,) and len(row.cases) == 2
    assert "caused 2 side effects" in row.why and row.repro == bad.repro
    # The same case told the truth and finished: those rows do not fail because of it.
    assert state([case("after_running[call_a]"), bad], TRUTH) == "pass"
    assert state([case("after_running[call_a]"), bad], FINISHED) == "pass"


def test_a_case_failing_on_another_check_does_not_fail_no_double_effect() -> None:
    other = case(status="failed", violations=({"invariant": "turn_ends_with_final", "message": "x"},))
    assert state([other], NO_DOUBLE) == "pass"


def test_an_unmet_told_fails_the_truth_but_not_the_effect_count() -> None:
    lied = case(status="failed", mismatches=(LIED,))
    assert state([lied], TRUTH) == "fail"
    assert state([lied], NO_DOUBLE) == "pass"


def test_a_case_that_hung_fails_the_turn_finished() -> None:
    assert state([case(status="hung", problems=("life 2 hung",))], FINISHED) == "fail"


def test_a_case_the_harness_could_not_judge_fails_every_row_it_is_in() -> None:
    # Its harness side failed: nothing was observed, so no question is answered -- not even
    # "no double effect" beside a case that passed it (issue 26: that row showed a pass).
    unjudged = case(status="error", problems=("the harness failed: Error: ... (details: x.log)",))
    for question in (NO_DOUBLE, TRUTH, FINISHED):
        assert state([case(), unjudged], question) == "fail", question
    # An agent's own error (observed: its life raised) still fails only the turn.
    raised = dataclasses.replace(unjudged, observed={"outcome": {}}, problems=("life 2 error: boom",))
    assert state([case(), raised], NO_DOUBLE) == "pass"
    assert state([case(), raised], FINISHED) == "fail"


def test_the_truth_is_not_passed_by_a_case_that_never_asked_it() -> None:
    # An idempotent tool's case with no told: expectation says nothing about the truth
    # (its told_the_truth invariant is for non-idempotent calls only).
    silent = case(idempotency=("idempotent",), expected={})
    truth = crash_eval_id("after_running", "idempotent", "told_the_truth")
    row = build_scorecard([silent], "agent").row(truth)
    assert row is not None and row.state == "not_reached"
    assert row.why == "no case of it states what answers this question"
    told = case(idempotency=("idempotent",), expected={"told": {"call_mail": "succeeded"}})
    assert state([told], truth) == "pass"


def test_an_invariant_that_cannot_be_judged_makes_the_row_not_applicable_with_its_reason() -> None:
    why = "non_idempotent_at_most_once: the effects of send_email are not observed"
    blind = case(not_applicable=(why,))
    row = build_scorecard([blind], "agent").row(NO_DOUBLE)
    assert row is not None and row.state == "not_applicable"
    assert row.why == why


def test_scenarios_that_do_not_apply_make_their_rows_not_applicable() -> None:
    skipped = case("clean", boundary="clean", status="not_applicable", problems=("agent has no send_email",))
    card = build_scorecard([skipped], "agent")
    row = card.row(NO_DOUBLE)
    assert row is not None and row.state == "not_applicable"
    assert "agent has no send_email" in row.why


def test_a_crash_point_that_was_never_reached_is_not_reached_not_passed() -> None:
    unreached = case(status="not_reached")
    row = build_scorecard([unreached], "agent").row(NO_DOUBLE)
    assert row is not None and row.state == "not_reached"
    assert row.why == "none of its crash points was reached"


def test_a_seed004_eval_is_scored_by_the_scenarios_that_declare_it() -> None:
    eval_id = "npm_publish_never_replays"
    shown = case(evals=(eval_id,), scenario="npm_publish_never")
    assert state([shown], eval_id) == "pass"
    assert state([shown, dataclasses.replace(shown, node_id="x", status="failed")], eval_id) == "fail"
    assert state([case()], eval_id) == "not_reached"


# -- the reports ------------------------------------------------------------------------------


def _results(cases: list[CaseRecord], agent: str = "agent") -> Results:
    return Results(agent=agent, cases=tuple(cases))


RUN = [case("clean", boundary="clean"), case(status="failed", violations=(DOUBLE,))]


def test_the_terminal_summary_names_the_failing_eval() -> None:
    lines = render_terminal(build_matrix(_results(RUN)))
    assert any(line.startswith("scorecard: ") and "1 fail" in line for line in lines)
    assert any("after_running, non_idempotent: no double effect" in line for line in lines)


def test_the_full_scorecard_text_has_a_grid_and_the_rerun_of_each_failing_eval() -> None:
    lines = render_scorecard(build_scorecard(RUN, "agent"), encoding="ascii")
    assert lines[0] == "scorecard, agent agent: " + build_scorecard(RUN, "agent").summary
    assert f"  X {NO_DOUBLE} 0/1: send_once.yaml::after_running[call_mail]: invariant " in "\n".join(lines)
    assert f"      rerun: {RUN[1].repro}" in lines
    # ASCII terminals get ASCII marks only.
    assert all(ord(ch) < 128 for line in lines for ch in line)


def test_markdown_has_the_scorecard_tables_with_a_dash_where_a_question_is_not_asked() -> None:
    text = render_markdown(build_matrix(_results(RUN)))
    assert "### Scorecard: " in text
    header = (
        "| crash point | class of the crashed call | "
        + " | ".join(q.title for q in CRASH_QUESTIONS.values())
        + " |"
    )
    assert header in text and "no double effect | the model was told the truth |" in header
    idempotent = [line for line in text.splitlines() if "| idempotent |" in line]
    assert idempotent and all(line.split("|")[3].strip() == "—" for line in idempotent)


class _EvalCells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.states: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if tag == "td" and "eval" in classes:
            self.states.append(classes[-1])


def test_html_has_one_eval_cell_per_row_of_the_scorecard() -> None:
    results = _results(RUN)
    matrix = build_matrix(results)
    parser = _EvalCells()
    parser.feed(render_html(results, matrix))
    assert len(parser.states) == len(matrix.scorecard.rows)
    assert parser.states.count("fail") == matrix.scorecard.count("fail") == 1


def test_compare_lists_the_evals_that_differ_between_two_agents() -> None:
    fixed = [dataclasses.replace(c, status="passed", violations=()) for c in RUN]
    comparison = compare(_results(RUN, "mutant"), _results(fixed, "reference"), "mutant", "reference")
    assert [pair.id for pair in comparison.differing_evals] == [NO_DOUBLE]
    markdown = render_compare_markdown(comparison).splitlines()
    [line] = [line for line in markdown if line.startswith("| after_running, non_idempotent: no double")]
    assert "fail" in line.split("|")[2] and "pass" in line.split("|")[3]
    assert "no double effect" in render_compare_html(comparison)


def test_the_results_file_carries_the_scorecard_and_reads_back() -> None:
    results = _results(RUN)
    card = build_scorecard(results)
    data = results_to_json(results, derived={"scorecard": [row.to_json() for row in card.rows]})
    assert [row["state"] for row in data["scorecard"]] == [row.state for row in card.rows]
    again = results_from_json(data)
    assert build_scorecard(again) == card


def test_an_effect_before_running_fails_ledger_first_and_an_agent_without_ledger_is_not_applicable() -> None:
    first = crash_eval_id("after_running", EMAIL_NONE, "ledger_first")
    early = {"invariant": "running_before_side_effect", "message": "email event seq 1 has no running"}
    assert state([case(status="failed", violations=(early,))], first) == "fail"
    assert state([case()], first) == "pass"
    why = "running_before_side_effect: the agent keeps no ledger the adapter maps"
    assert state([case(not_applicable=(why,))], first) == "not_applicable"


def test_a_failed_rows_why_is_its_cases_most_important_reason_an_invariant_first() -> None:
    from pathlib import Path

    from crashmatrix.reports.results import load_results

    data = Path(__file__).parent / "data" / "blind_retry.json"
    card = build_scorecard(load_results(data))
    row = next(r for r in card.rows if r.id == "crash.after_side_effect.non_idempotent.no_double_effect")
    assert row.state == "fail"
    # The record lists the outcome mismatch first; the row names the double effect instead.
    assert "invariant non_idempotent_at_most_once" in row.why


# -- a row's class is the crashed call's -------------------------------------------------------

MIXED = ("idempotent", "non_idempotent")  # a scenario with read_file and send_email


def test_a_crash_on_one_call_answers_only_the_rows_of_that_calls_class() -> None:
    """A two-tool scenario: a crash on send_email answers the non-idempotent rows, never
    read_file's, whether it passed or lied."""
    truth_idem = crash_eval_id("after_running", "idempotent", "told_the_truth")
    on_email = case(idempotency=MIXED, crash_class=EMAIL_NONE, tools=("read_file", "send_email"))
    card = build_scorecard([on_email], "agent")
    idem = card.row(truth_idem)
    assert idem is not None and idem.state == "not_reached" and idem.cases == ()
    assert state([on_email], TRUTH) == "pass"
    lied = dataclasses.replace(on_email, status="failed", mismatches=(LIED,))
    assert state([lied], truth_idem) == "not_reached"  # not a red on read_file's row
    assert state([lied], TRUTH) == "fail"


def test_run_command_ls_answers_the_idempotent_rows_though_its_scenario_says_non_idempotent() -> None:
    ls = case(idempotency=(EMAIL_NONE,), crash_class="idempotent", tools=("run_command",))
    assert state([ls], crash_eval_id("after_running", "idempotent", "turn_finished")) == "pass"
    assert state([ls], NO_DOUBLE) == "not_reached"


def test_a_case_whose_point_names_no_call_answers_no_crash_row() -> None:
    unclassed = case(crash_class="")
    row = build_scorecard([unclassed], "agent").row(NO_DOUBLE)
    assert row is not None and row.state == "not_reached" and row.cases == ()
    # Said so: a file from before the class was recorded reads as such, not as "nothing ran".
    assert "name no call with a class" in row.why


def test_a_record_carries_its_crashed_calls_class_through_the_results_file() -> None:
    ls = case(idempotency=(EMAIL_NONE,), crash_class="idempotent", tools=("run_command",))
    [again] = results_from_json(results_to_json(_results([ls]))).cases
    crashed = (again.crash_call, again.crash_tool, again.crash_class)
    assert crashed == ("call_mail", "run_command", "idempotent")


# -- a failing row's why answers its own question ----------------------------------------------

OUTCOME = {"field": "outcome[call_mail]", "expected": "completed", "observed": "replayed"}
NO_FINAL = {"invariant": "turn_ends_with_final", "message": "the turn ended without a final answer"}


def test_each_failing_row_names_what_broke_its_own_question_not_the_cases_first_cause() -> None:
    # One case breaking three questions; its first cause (an invariant, by causes' ranking)
    # is turn_ends_with_final, listed before the double effect.
    bad = case(status="failed", violations=(NO_FINAL, DOUBLE), mismatches=(OUTCOME, LIED))
    card = build_scorecard([bad], "agent")
    rows = {key: card.row(key) for key in (NO_DOUBLE, TRUTH, FINISHED)}
    assert all(row is not None and row.state == "fail" for row in rows.values())
    double, truth, finished = (rows[k].why for k in (NO_DOUBLE, TRUTH, FINISHED))  # type: ignore[union-attr]
    assert double.endswith("invariant non_idempotent_at_most_once: caused 2 side effects")
    assert truth.endswith('told[call_mail]: expected "uncertain", observed "succeeded"')
    assert finished.endswith("invariant turn_ends_with_final: the turn ended without a final answer")
    assert "outcome[call_mail]" not in double + truth + finished


def test_a_hung_case_fails_the_turn_with_its_problem_as_the_why() -> None:
    hung = case(status="hung", problems=("life 2 hung past its 30 s deadline",))
    row = build_scorecard([hung], "agent").row(FINISHED)
    assert row is not None and row.why.endswith("hung: life 2 hung past its 30 s deadline")


# -- counts are passed/total -------------------------------------------------------------------


def test_a_rows_count_is_the_cases_that_passed_its_question_of_all_its_cases() -> None:
    other = case("after_running[call_b]", status="failed", violations=(NO_FINAL,))  # fails elsewhere
    double = case("after_running[call_c]", status="failed", violations=(DOUBLE,))
    unreached = case("after_running[call_d]", status="not_reached")
    hung = case("after_running[call_e]", status="hung", problems=("life 2 hung",))
    card = build_scorecard([case(), other, double, unreached, hung], "agent")
    row = card.row(NO_DOUBLE)
    assert row is not None and row.state == "fail"
    # Passed it: the clean pass and the case that failed on another check; not the double
    # effect, the unreached case or the hung one (no verdict on the effect).
    assert row.passed == (case().node_id, other.node_id)
    assert row.ratio == "2/5" and row.to_json()["passed"] == list(row.passed)
    finished = card.row(FINISHED)
    assert finished is not None and finished.ratio == "2/5"  # other broke it; hung broke it


def test_a_seed004_rows_count_is_its_passed_cases() -> None:
    eval_id = "npm_publish_never_replays"
    shown = case(evals=(eval_id,), scenario="npm_publish_never")
    failed = dataclasses.replace(shown, node_id="x", status="failed")
    row = build_scorecard([shown, failed], "agent").row(eval_id)
    assert row is not None and row.ratio == "1/2"


COUNTED = [case(), case("after_running[call_b]", status="failed", violations=(DOUBLE,))]


def test_every_view_shows_a_rows_count_as_passed_of_total() -> None:
    results = _results(COUNTED)
    matrix = build_matrix(results)
    # Markdown: the crash grid's non-idempotent after_running line.
    markdown = render_markdown(matrix).splitlines()
    [line] = [ln for ln in markdown if ln.startswith("| running | non_idempotent |")]
    assert line.split("|")[3].strip() == "❌ 1/2"  # no double effect: 1 of 2 passed it
    assert line.split("|")[4].strip() == "✅ 2/2"
    # Terminal: the summary and the full scorecard.
    assert any("no double effect 1/2:" in ln for ln in render_terminal(matrix))
    grid = render_scorecard(matrix.scorecard, encoding="ascii")
    [row] = [ln for ln in grid if ln.startswith("  running, non_idempotent")]
    assert row.split()[2:4] == ["X", "1/2"]
    # HTML: the eval cell's text and data.
    page = render_html(results, matrix)
    assert f'data-eval="{NO_DOUBLE}" data-passed="1" data-cases="2">' in page
    assert "✗ 1/2</a>" in page
    # Compare: each run's count.
    fixed = [dataclasses.replace(c, status="passed", violations=()) for c in COUNTED]
    comparison = compare(results, _results(fixed, "reference"), "mutant", "reference")
    markdown = render_compare_markdown(comparison).splitlines()
    [md] = [ln for ln in markdown if ln.startswith("| after_running, non_idempotent: no double")]
    assert "1/2" in md.split("|")[2] and "2/2" in md.split("|")[3]
    assert "✗ fail 1/2" in render_compare_html(comparison)
