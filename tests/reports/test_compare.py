"""``--compare``: two results files or more in one grid, the differing cells highlighted."""

from __future__ import annotations

import dataclasses
from html.parser import HTMLParser
from pathlib import Path

import pytest

from crashmatrix.harness.front.cli import main
from crashmatrix.reports.compare import compare, compare_runs, render_compare_html, render_compare_markdown
from crashmatrix.reports.matrix import COLUMNS
from crashmatrix.reports.results import Results, write_results


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
    assert len(cells.all) == 2 * len(COLUMNS)
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
    assert "**❌ 0/1 / ✅ 1/1**" in text  # passed/cases, as in the single-run report


def _broken_again(results: Results) -> Results:
    """C: the torn-write case is back and now fails too."""
    cases = tuple(
        dataclasses.replace(case, status="failed") if case.boundary == "torn_write" else case
        for case in results.cases
    )
    return dataclasses.replace(results, agent="v3", cases=cases)


def test_three_runs_share_one_grid_each_cell_showing_every_run(results: Results) -> None:
    runs = (results, _fixed_and_shrunk(results), _broken_again(results))
    comparison = compare_runs(runs, ("v1.json", "v2.json", "v3.json"))
    assert comparison.letters == ("A", "B", "C")
    torn = next(cell for row, cell in comparison.differing if cell.column == "torn_write")
    assert torn.states == ("pass", "not_reached", "fail")
    assert torn.changes() == ["torn_write[call_mail:running]: passed -> absent -> failed"]
    text = render_compare_markdown(comparison)
    assert "| eval | A | B | C | why |" in text
    assert "- **send_email/send_once** · torn_write: A ✅ 1/1 → B ⬜ → C ❌ 0/1" in text
    assert "**✅ 1/1 / ⬜ / ❌ 0/1**" in text
    assert "- **C** v3.json: 5/8 cases passed" in text
    page = render_compare_html(comparison)
    cells = _Cells()
    cells.feed(page)
    assert len(cells.all) == 2 * len(COLUMNS)
    assert page.count('data-run="C"') == 2 * len(COLUMNS) + len(
        comparison.differing
    )  # the grid, then the list


def test_a_scorecard_per_run_side_by_side(results: Results) -> None:
    comparison = compare_runs((results, _fixed_and_shrunk(results), _broken_again(results)))
    differing = {pair.id: pair.states for pair in comparison.differing_evals}
    assert differing and all(len(states) == 3 for states in differing.values())
    assert any(states[0] == "fail" and states[1] == "pass" for states in differing.values())
    assert "Scorecards side by side" in render_compare_html(comparison)


def test_the_cli_compares_three_files_and_refuses_one(
    results: Results, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = []
    for name, run in (("a", results), ("b", _fixed_and_shrunk(results)), ("c", _broken_again(results))):
        paths.append(str(write_results(run, tmp_path / f"{name}.json")))
    assert main(["report", "--compare", *paths, "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "send_email/send_once torn_write: pass -> not_reached -> fail" in out
    assert (tmp_path / "out" / "compare.html").is_file()
    assert main(["report", "--compare", paths[0], "--out", str(tmp_path / "out")]) == 2
    assert "--compare needs two results files or more" in capsys.readouterr().err
