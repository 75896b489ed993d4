"""The matrix as values: cells, states, totals, grouping and the headline."""

from __future__ import annotations

from crashmatrix.reports.matrix import COLUMNS, build_matrix
from crashmatrix.reports.results import Results


def test_columns_are_clean_the_six_boundaries_torn_write_and_recovery() -> None:
    assert COLUMNS == (
        "clean",
        "after_tool_call_saved",
        "after_approved",
        "after_running",
        "after_side_effect",
        "before_tool_result",
        "after_tool_result",
        "torn_write",
        "recovery",
    )


def test_cells_are_pass_fail_indeterminate_or_not_reached(results: Results) -> None:
    matrix = build_matrix(results)
    email = next(r for r in matrix.rows if r.label == "send_email/send_once")
    read = next(r for r in matrix.rows if r.label == "read_only/read_file_plain")
    assert {c.column: c.state for c in email.cells} == {
        "clean": "pass",
        "after_tool_call_saved": "not_reached",
        "after_approved": "not_reached",
        "after_running": "pass",
        "after_side_effect": "fail",
        "before_tool_result": "not_reached",
        "after_tool_result": "not_reached",
        "torn_write": "pass",
        "recovery": "pass",
    }
    assert read.cell("after_side_effect").state == "indeterminate"
    assert read.cell("after_tool_result").state == "not_reached"  # a case, but its point never happened
    assert read.cell("after_tool_result").tally.cases == 1
    assert email.cell("after_side_effect").focus is not None
    assert email.cell("after_side_effect").focus.point == "after_side_effect[call_mail]"


def test_totals_per_row_per_column_and_overall(results: Results) -> None:
    matrix = build_matrix(results)
    assert [r.tally.ratio for r in matrix.rows] == ["2/3", "4/5"]
    columns = dict(zip(COLUMNS, matrix.columns, strict=True))
    assert columns["clean"].ratio == "2/2"
    assert columns["after_side_effect"].ratio == "1/2"
    assert columns["after_side_effect"].failed == 1
    assert columns["after_approved"].cases == 0
    assert matrix.tally.cases == 8 and matrix.tally.passed == 6


def test_the_headline_counts_cases_scenarios_and_names_the_agent(results: Results) -> None:
    assert build_matrix(results).headline == (
        "6/8 cases passed, 2 scenarios, agent reference (1 failed, 1 not reached, 1 allowed-indeterminate)"
    )


def test_rows_are_grouped_by_idempotency_class_and_tool(results: Results) -> None:
    groups = build_matrix(results).groups()
    assert [(g, [r.label for r in rows]) for g, rows in groups] == [
        ("idempotent · read_file", ["read_only/read_file_plain"]),
        ("non_idempotent · send_email", ["send_email/send_once"]),
    ]


def test_failures_are_listed_in_row_then_column_order(results: Results) -> None:
    assert [c.point for c in build_matrix(results).failing] == ["after_side_effect[call_mail]"]
