"""The matrix as values: cells, states, totals, grouping and the headline."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

import pytest

from crashmatrix.reports.compare import compare_runs, render_compare_html, render_compare_markdown
from crashmatrix.reports.html import render_html
from crashmatrix.reports.markdown import render_markdown
from crashmatrix.reports.matrix import COLUMNS, COUNTS, Matrix, build_matrix
from crashmatrix.reports.results import Results, load_results
from crashmatrix.reports.terminal import render_terminal

from .conftest import DATA


def test_columns_are_clean_the_boundaries_torn_write_power_loss_recovery_and_the_tool_side() -> None:
    assert COLUMNS == (
        "clean",
        "after_model_reply",
        "after_tool_call_pending",
        "after_tool_call_saved",
        "after_approved",
        "after_running",
        "during_side_effect",
        "after_side_effect",
        "before_tool_result",
        "after_tool_result",
        "torn_write",
        "power_loss",
        "recovery",
        "double_resume",
        "tool_server_died",
        "tool_response_lost",
        "tool_result_error",
        "tool_result_malformed",
    )


def test_cells_are_pass_fail_indeterminate_or_not_reached(results: Results) -> None:
    matrix = build_matrix(results)
    email = next(r for r in matrix.rows if r.label == "send_email/send_once")
    read = next(r for r in matrix.rows if r.label == "read_only/read_file_plain")
    assert {c.column: c.state for c in email.cells} == {
        "clean": "pass",
        "after_model_reply": "not_reached",
        "after_tool_call_pending": "not_reached",
        "after_tool_call_saved": "not_reached",
        "after_approved": "not_reached",
        "after_running": "pass",
        "during_side_effect": "not_reached",
        "after_side_effect": "fail",
        "before_tool_result": "not_reached",
        "after_tool_result": "not_reached",
        "torn_write": "pass",
        "power_loss": "not_reached",
        "recovery": "pass",
        # Columns newer than this results file: no case, no reason.
        "double_resume": "not_reached",
        "tool_server_died": "not_reached",
        "tool_response_lost": "not_reached",
        "tool_result_error": "not_reached",
        "tool_result_malformed": "not_reached",
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


# ---------------------------------------------------------------- one meaning for counts

# Every data file of these tests: the same rule must hold for each.
_FILES = ("two_scenarios.json", "not_reachable.json", "blind_retry.json")


def _expected_counts(matrix: Matrix) -> tuple[dict[str, list[str]], list[str], str]:
    """Per row label its cells' counts (``passed/cases``, "" without a case) and its total,
    the column totals ("–" without a case) and the run's total, from the values."""
    rows = {
        row.label: [c.tally.ratio if c.tally.cases else "" for c in row.cells] + [row.tally.ratio]
        for row in matrix.rows
    }
    columns = [t.ratio if t.cases else "–" for t in matrix.columns]
    return rows, columns, matrix.tally.ratio


def _markdown_counts(text: str, labels: list[str]) -> tuple[dict[str, list[str]], list[str], str]:
    rows = {}
    for label in labels:
        line = next(line for line in text.splitlines() if line.startswith(f"| {label} |"))
        cells = [c.strip() for c in line.strip("|").split("|")][1:]
        rows[label] = [_ratio_in(c) for c in cells[:-1]] + [cells[-1]]
    total = next(line for line in text.splitlines() if line.startswith("| **total** |"))
    cells = [c.strip() for c in total.strip("|").split("|")][1:]
    return rows, cells[:-1], cells[-1].strip("*")


def _ratio_in(text: str) -> str:
    found = re.search(r"\d+/\d+", text)
    return found.group(0) if found else ""


class _HtmlCounts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[str]] = {}
        self.columns: list[str] = []
        self.total = ""
        self._label: str | None = None
        self._into: str | None = None  # "label" | "cell" | "row-total" | "column" | "grand"
        self._text = ""
        self._in_matrix = False  # the matrix's table only, not the scorecard's

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        classes = a.get("class", "").split()
        if tag == "section":
            self._in_matrix = a.get("id") == "matrix"
        if not self._in_matrix:
            return
        if tag == "th" and a.get("scope") == "row":
            self._into, self._text = "label", ""
        elif tag == "td" and "cell" in classes:
            self._into, self._text = "cell", ""
        elif tag == "td" and "row-total" in classes:
            self._into, self._text = "row-total", ""
        elif tag == "td" and a.get("id") == "grand-total":
            self._into, self._text = "grand", ""
        elif tag == "td" and "total" in classes and "data-col" in a:
            self._into, self._text = "column", ""
        elif tag == "span" and "codes" in classes and self._into == "cell":
            self._into = "codes"  # a cell's cause codes are not its count

    def handle_data(self, data: str) -> None:
        if self._into in ("label", "cell", "row-total", "column", "grand"):
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_matrix = False
        if tag == "span" and self._into == "codes":
            self._into = "cell"
        if tag not in ("th", "td") or self._into is None:
            return
        text = self._text.strip()
        if self._into == "label":
            self._label = text
            if text != "total":
                self.rows[text] = []
        elif self._into == "cell" and self._label is not None:
            self.rows[self._label].append(_ratio_in(text))
        elif self._into == "row-total" and self._label is not None:
            self.rows[self._label].append(text)
        elif self._into == "column":
            self.columns.append(text)
        elif self._into == "grand":
            self.total = text
        self._into = None


def _terminal_counts(lines: list[str], labels: list[str]) -> tuple[dict[str, str], list[str], str]:
    rows = {
        label: next(line for line in lines if line.startswith(f"  {label} ")).split()[-1] for label in labels
    }
    total = next(line for line in lines if line.startswith("total ")).split()[-1]
    start = next(i for i, line in enumerate(lines) if line.startswith("columns, passed/cases: "))
    legend = " ".join(lines[start:]).removeprefix("columns, passed/cases: ")
    columns = [part.split()[-1].replace("-", "–") for part in legend.split(", ")]
    return rows, columns, total


@pytest.mark.parametrize("name", _FILES)
def test_counts_are_passed_of_cases_in_every_renderer_and_in_compare(name: str) -> None:
    results = load_results(DATA / name)
    matrix = build_matrix(results)
    rows, columns, total = _expected_counts(matrix)
    labels = list(rows)
    # The matrix itself: a ratio is passed/cases, its tally says so in words.
    assert all(r.tally.ratio == f"{r.tally.passed}/{r.tally.cases}" for r in matrix.rows)

    assert _markdown_counts(render_markdown(matrix), labels) == (rows, columns, total)

    page = _HtmlCounts()
    page.feed(render_html(results, matrix))
    assert (page.rows, page.columns, page.total) == (rows, columns, total)

    lines = render_terminal(matrix, width=200)
    # The terminal draws the columns some row can reach (the others are a reason line), and of
    # the tool-side columns those a case ran in (Matrix.drawn).
    drawn = [
        i
        for i in range(len(COLUMNS))
        if any(r.cells[i].state != "not_reachable" for r in matrix.rows) and COLUMNS[i] in matrix.drawn()
    ]
    expected = ({k: v[-1] for k, v in rows.items()}, [columns[i] for i in drawn], total)
    assert _terminal_counts(lines, labels) == expected

    # Compare: three copies of the run, each cell and total the same count three times.
    text = render_compare_markdown(compare_runs((results, results, results)))
    for label, counts in rows.items():
        line = next(line for line in text.splitlines() if line.startswith(f"| {label} |"))
        cells = [c.strip() for c in line.strip("|").split("|")][1:]
        assert [[_ratio_in(part) for part in c.split(" / ")] for c in cells] == [[n] * 3 for n in counts[:-1]]
    total_line = next(line for line in text.splitlines() if line.startswith("| **total** |"))
    assert [c.strip() for c in total_line.strip("|").split("|")][1:] == [" / ".join([n] * 3) for n in columns]


def test_every_legend_says_what_a_count_means(results: Results) -> None:
    matrix = build_matrix(results)
    assert COUNTS in render_markdown(matrix)
    assert html.escape(COUNTS) in render_html(results, matrix)
    assert COUNTS in render_compare_markdown(compare_runs((results, results)))
    assert html.escape(COUNTS) in render_compare_html(compare_runs((results, results)))
    assert "n/m = passed/cases" in "\n".join(render_terminal(matrix))


def test_every_cell_of_a_scenario_that_does_not_apply_is_not_applicable(results: Results) -> None:
    import dataclasses

    case = results.cases[0]
    inapplicable = dataclasses.replace(
        case,
        node_id="scenarios/x/needs_a_tool.yaml::clean",
        scenario_path="scenarios/x/needs_a_tool.yaml",
        point="clean",
        boundary="clean",
        status="not_applicable",
        problems=("not applicable: the agent has no refund_payment",),
        mismatches=(),
        violations=(),
    )
    matrix = build_matrix(dataclasses.replace(results, cases=(*results.cases, inapplicable)))
    row = next(r for r in matrix.rows if r.scenario_path == "scenarios/x/needs_a_tool.yaml")
    assert {cell.state for cell in row.cells} == {"not_applicable"}
    # A scenario that ran keeps "not reached" for a column with no case and no reason.
    ran = next(r for r in matrix.rows if r.scenario_path != "scenarios/x/needs_a_tool.yaml")
    assert any(cell.state != "not_applicable" for cell in ran.cells)


def test_the_headline_names_the_failed_cases_that_never_ended(results: Results) -> None:
    import dataclasses

    failing = [c for c in results.cases if c.failing]
    passing = [c for c in results.cases if c.passed]
    errored = dataclasses.replace(passing[0], status="error", problems=("error: harness failed",))
    hung = dataclasses.replace(passing[1], status="hung", problems=("life 2 hung",))
    cut = dataclasses.replace(
        results, cases=(*(c for c in results.cases if c not in passing[:2]), errored, hung)
    )
    assert f"{len(failing) + 2} failed (1 error, 1 hung)" in build_matrix(cut).headline
    assert "error" not in build_matrix(results).headline  # a run with neither does not say so
