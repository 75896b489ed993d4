"""Cells with no verdict say which kind they are: not reachable by this agent, deselected, or
not reached -- never passed -- and the reports say why (issue 15: a black box's report showed
no "not reachable" cell although docs/adapters.md promised them)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.reports.collector import MatrixReporter
from crashmatrix.reports.compare import compare, render_compare_markdown
from crashmatrix.reports.errors import ResultsFileError
from crashmatrix.reports.html import render_html
from crashmatrix.reports.markdown import MARKS, render_markdown
from crashmatrix.reports.matrix import COLUMNS, LABELS, build_matrix
from crashmatrix.reports.results import Results, load_results, results_from_json, results_to_json
from crashmatrix.reports.terminal import render_terminal

DATA = Path(__file__).parent / "data" / "not_reachable.json"
KEYED = "scenarios/create_order/keyed_once.yaml"
LIMITED = "scenarios/limited/two_calls.yaml"
KIND3 = "kind 3 black box: the harness crashes it only at its model and service edges"


@pytest.fixture
def results() -> Results:
    return load_results(DATA)


def _states(results: Results, path: str) -> dict[str, str]:
    row = next(r for r in build_matrix(results).rows if r.scenario_path == path)
    return {cell.column: cell.state for cell in row.cells}


def test_the_results_file_keeps_the_reachable_boundaries_and_the_points_with_no_case(
    results: Results,
) -> None:
    assert results.reachable == ("after_tool_call_saved", "after_running", "after_side_effect")
    assert [(g.boundary, g.state) for g in results.not_run] == [
        ("after_approved", "not_reachable"),
        ("before_tool_result", "not_reachable"),
        ("after_tool_result", "not_reachable"),
        ("torn_write", "not_reachable"),
        ("after_side_effect", "deselected"),
    ]
    again = results_from_json(json.loads(json.dumps(results_to_json(results))))
    assert again.reachable == results.reachable and again.not_run == results.not_run


def test_a_not_run_entry_of_an_unknown_state_is_refused_in_one_line() -> None:
    raw: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    raw["not_run"][0]["state"] = "skipped"
    with pytest.raises(ResultsFileError, match=r"not_run\[0\]\.state: 'skipped' is not one of") as error:
        results_from_json(raw, "matrix.json")
    assert "\n" not in str(error.value)


def test_not_reachable_deselected_and_not_reached_are_three_states_none_of_them_a_pass(
    results: Results,
) -> None:
    keyed = _states(results, KEYED)
    assert keyed == {
        "clean": "pass",
        # Columns newer than this results file: no case, no reason.
        "after_model_reply": "not_reached",
        "after_tool_call_pending": "not_reached",
        "after_tool_call_saved": "pass",
        "after_approved": "not_reachable",
        "after_running": "pass",
        "during_side_effect": "not_reached",
        "after_side_effect": "deselected",
        "before_tool_result": "not_reachable",
        "after_tool_result": "not_reachable",
        "torn_write": "not_reachable",
        "power_loss": "not_reached",
        "recovery": "not_reached",  # no case and no reason: the matrix does not invent one
        "double_resume": "not_reached",
        "tool_server_died": "not_reached",
        "tool_response_lost": "not_reached",
        "tool_result_error": "not_reached",
        "tool_result_malformed": "not_reached",
    }
    limited = _states(results, LIMITED)
    assert limited["after_approved"] == "not_reachable"  # a recorded point, outside adapter.boundaries
    assert limited["after_running"] == "not_reached"  # a case ran and never got there
    matrix = build_matrix(results)
    assert "5 cells not reachable by this agent" in matrix.headline
    assert "1 cells deselected" in matrix.headline
    assert matrix.tally.passed == 4 and matrix.tally.not_reachable == 1


def _markdown_cells(text: str, label: str) -> dict[str, str]:
    head = next(line for line in text.splitlines() if line.startswith("| scenario |"))
    names = [c.strip() for c in head.strip("|").split("|")]
    row = next(line for line in text.splitlines() if line.startswith(f"| {label} |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    by_label = dict(zip(names, cells, strict=True))
    return {column: by_label[LABELS[column]] for column in COLUMNS}


def test_markdown_marks_each_state_apart_and_lists_why_under_the_matrix(results: Results) -> None:
    text = render_markdown(build_matrix(results))
    cells = _markdown_cells(text, "create_order/keyed_once")
    for column in ("after_approved", "before_tool_result", "after_tool_result", "torn_write"):
        assert cells[column] == f"{MARKS['not_reachable']} not reachable", column
    assert cells["after_side_effect"] == f"{MARKS['deselected']} deselected"
    assert cells["recovery"] == MARKS["not_reached"]
    assert cells["after_running"] == f"{MARKS['pass']} 1/1"  # passed/cases, as every count
    assert len({MARKS[s] for s in ("not_reached", "not_reachable", "deselected", "not_applicable")}) == 4
    legend = next(line for line in text.splitlines() if line.startswith(MARKS["pass"]))
    for words in ("not reached", "not reachable by this agent", "deselected", "not applicable"):
        assert words in legend
    why = text[text.index("#### Cells with no verdict, and why") :]
    assert (
        "This agent can be killed at: `after_tool_call_saved`, `after_running`, `after_side_effect`." in why
    )
    # Columns that share a reason in the same scenarios are one line.
    assert (
        f"- {MARKS['not_reachable']} not reachable at **approved** (`after_approved`), **before result** "
        f"(`before_tool_result`), **after result** (`after_tool_result`) in create_order/keyed_once: {KIND3}"
        in why
    )
    assert (
        "torn write** (`torn_write`) in create_order/keyed_once: kind 3 black box: it writes its own session"
        in why
    )
    assert (
        "deselected at **side effect** (`after_side_effect`) in create_order/keyed_once: --crash-boundary"
        in why
    )
    assert (
        "in limited/two_calls: not reachable: agent limited_adapter:Limited cannot be killed at "
        "after_approved" in why
    )


def test_the_terminal_table_uses_a_distinct_mark_per_state_and_says_why(results: Results) -> None:
    lines = render_terminal(build_matrix(results))
    row = next(line for line in lines if line.startswith("  create_order/keyed_once"))
    marks = row.split()[1:-1]
    # AP is not drawn: no row can reach it (its reason is the line below).
    assert marks == ["✓", "·", "·", "✓", "✓", "·", "»", "⊘", "⊘", "⊘", "·", "·"]
    assert lines[next(i for i, x in enumerate(lines) if x.startswith("scenario"))].split()[1:-1] == [
        "CL",
        "MR",
        "TP",
        "TC",
        "RU",
        "DE",
        "SE",
        "BR",
        "TR",
        "TW",
        "PL",
        "RC",
    ]
    assert f"⊘ AP BR TR: {KIND3} (after_tool_call_saved, after_running, after_side_effect)" in lines
    assert "» SE: --crash-boundary after_running" in lines
    ascii_row = next(
        line for line in render_terminal(build_matrix(results), encoding="ascii") if "keyed" in line
    )
    assert ascii_row.split()[1:-1] == ["+", ".", ".", "+", "+", ".", ">", "/", "/", "/", ".", "."]


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: list[dict[str, str]] = []
        self._in: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "td" and "cell" in values.get("class", "").split():
            self._in = {"class": values["class"], "col": values.get("data-col", "")}
            self.cells.append(self._in)
        elif self._in is not None and "title" in values:
            self._in["title"] = values["title"]

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._in = None


def test_html_cells_carry_the_state_as_a_class_and_the_reason_as_a_tooltip(results: Results) -> None:
    page = render_html(results, build_matrix(results))
    parser = _Cells()
    parser.feed(page)
    first_row = parser.cells[: len(COLUMNS)]  # rows are sorted: conditional (limited) first
    second_row = parser.cells[len(COLUMNS) : 2 * len(COLUMNS)]
    assert "not_reachable" in first_row[COLUMNS.index("after_approved")]["class"]
    keyed = {c["col"]: c for c in second_row}
    assert keyed["after_approved"]["class"] == "cell not_reachable"
    assert KIND3 in keyed["after_approved"]["title"]
    assert keyed["after_side_effect"]["class"] == "cell deselected"
    assert keyed["recovery"]["class"] == "cell not_reached"
    legend = page[page.index('<div class="legend">') :]
    assert "not reachable by this agent" in legend and "deselected" in legend
    assert re.search(r'<div id="not-run">.*not reachable.*kind 3 black box', page)


def test_a_comparison_tells_not_reachable_from_a_pass(results: Results) -> None:
    raw: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
    raw["not_run"] = []  # B: the same cases, no reachability recorded
    other = results_from_json(raw)
    comparison = compare(results, other, "blackbox", "old file")
    differing = {(row.label, cell.column) for row, cell in comparison.differing}
    assert ("create_order/keyed_once", "after_approved") in differing
    assert ("create_order/keyed_once", "after_running") not in differing
    text = render_compare_markdown(comparison)
    assert f"after_approved: A {MARKS['not_reachable']} not reachable → B {MARKS['not_reached']}" in text


def test_the_controller_lifts_a_clean_records_plan_into_the_results_file(
    results: Results, tmp_path: Path
) -> None:
    reporter = MatrixReporter(tmp_path, results.agent)
    for case in results.cases:
        raw: dict[str, Any] = case.to_json()
        if case.point == "clean" and case.scenario_path == KEYED:
            raw["plan"] = {
                "reachable": list(results.reachable or ()),
                "not_run": [
                    {k: v for k, v in gap.to_json().items() if k != "scenario_path"}
                    | {"scenario_path": KEYED}
                    for gap in results.not_run
                ],
            }
        reporter.add(json.dumps(raw))
    got = reporter.results()
    assert got.reachable == results.reachable
    assert got.not_run == results.not_run
    assert "plan" not in json.dumps(results_to_json(got))  # lifted, not left on the case
