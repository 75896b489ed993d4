"""``--compare``: two results side by side, the differing cells highlighted."""

from __future__ import annotations

import dataclasses
from html.parser import HTMLParser

from crashmatrix.reports.compare import compare, render_compare_html, render_compare_markdown
from crashmatrix.reports.results import Results


def _fixed_and_shrunk(results: Results) -> Results:
    """B: the failing case now passes, and the torn-write case is gone."""
    cases = []
    for case in results.cases:
        if case.boundary == "torn_write":
            continue
        if case.failing:
            case = dataclasses.replace(case, status="passed", mismatches=(), violations=())
        cases.append(case)
    return dataclasses.replace(results, agent="mutant", cases=tuple(cases))


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.differs: list[str] = []
        self.all: list[str] = []
        self.row = ""
        self._th = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self._th = tag == "th" and a.get("scope") == "row"
        if tag == "td" and "data-col" in a:
            self.all.append(f"{self.row}:{a['data-col']}")
            if "differs" in (a.get("class") or ""):
                self.differs.append(f"{self.row}:{a['data-col']}")

    def handle_data(self, data: str) -> None:
        if self._th:
            self.row, self._th = data, False


def test_the_cells_that_differ_are_exactly_those_whose_verdict_changed(results: Results) -> None:
    comparison = compare(results, _fixed_and_shrunk(results), "a.json", "b.json")
    assert [(row.label, cell.column) for row, cell in comparison.differing] == [
        ("send_email/send_once", "after_side_effect"),
        ("send_email/send_once", "torn_write"),
    ]
    changes = dict((cell.column, cell.changes()) for _, cell in comparison.differing)
    assert changes["after_side_effect"] == ["after_side_effect[call_mail]: failed -> passed"]
    assert changes["torn_write"] == ["torn_write[call_mail:running]: passed -> absent"]


def test_the_comparison_page_highlights_the_differing_cells_and_nothing_else(results: Results) -> None:
    page = render_compare_html(compare(results, _fixed_and_shrunk(results)))
    cells = _Cells()
    cells.feed(page)
    assert len(cells.all) == 2 * 9
    assert cells.differs == ["send_email/send_once:after_side_effect", "send_email/send_once:torn_write"]
    assert "https://" not in page and "http://" not in page and " src=" not in page


def test_comparing_a_run_with_itself_finds_no_difference(results: Results) -> None:
    comparison = compare(results, results)
    assert comparison.differing == ()
    assert "0 cells differ" in render_compare_markdown(comparison)


def test_the_markdown_lists_the_changes_and_bolds_differing_cells(results: Results) -> None:
    text = render_compare_markdown(compare(results, _fixed_and_shrunk(results), "a.json", "b.json"))
    assert "## crashmatrix comparison: 2 cells differ" in text
    assert "`after_side_effect[call_mail]: failed -> passed`" in text
    assert "**❌ 0/1 / ✅ 1/1**" in text
