"""matrix.html: one self-contained page, parsed with html.parser (no browser needed)."""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser

import pytest

from crashmatrix.reports.html import render_html
from crashmatrix.reports.matrix import COLUMNS, build_matrix
from crashmatrix.reports.results import Results


class Page(HTMLParser):
    """Collects what the tests look at: ids, links, resources, cells, case details."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: list[str] = []
        self.hrefs: list[str] = []
        self.srcs: list[str] = []
        self.tags: list[str] = []
        self.cells: list[dict[str, str]] = []  # td.cell attributes + their text
        self.details: list[dict[str, str]] = []
        self.timeline_classes: list[str] = []
        self._cell: dict[str, str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.tags.append(tag)
        if "id" in a:
            self.ids.append(a["id"])
        if "href" in a:
            self.hrefs.append(a["href"])
        if "src" in a:
            self.srcs.append(a["src"])
        if tag == "td" and "cell" in a.get("class", "").split():
            self._cell = {**a, "text": ""}
            self.cells.append(self._cell)
        if tag == "details" and "case" in a.get("class", "").split():  # not a second crash's
            self.details.append(a)
        if tag == "li" and self.details:
            self.timeline_classes.append(a.get("class", ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell["text"] += data


def _parse(results: Results) -> tuple[str, Page]:
    text = render_html(results, build_matrix(results))
    page = Page()
    page.feed(text)
    page.close()
    return text, page


def test_the_page_is_self_contained_with_no_url_at_all(results: Results) -> None:
    text, page = _parse(results)
    assert "http://" not in text and "https://" not in text and "//" not in re.sub(r"//\s", "", text)
    assert page.srcs == []
    assert "link" not in page.tags and "iframe" not in page.tags and "img" not in page.tags
    assert all(href.startswith("#") for href in page.hrefs)
    assert "<style>" in text and "<script>" in text


def test_a_url_inside_recorded_data_is_not_left_as_a_url(results: Results) -> None:
    case = dataclasses.replace(
        results.cases[2], problems=("life 2 error: ConnectError for https://orders.crashmatrix.test/orders",)
    )
    changed = dataclasses.replace(results, cases=(*results.cases[:2], case, *results.cases[3:]))
    text, _ = _parse(changed)
    assert "https://" not in text
    assert "orders.crashmatrix.test/orders" in text  # still readable


def test_every_link_points_at_an_element_of_the_page(results: Results) -> None:
    _, page = _parse(results)
    assert page.hrefs
    assert {href[1:] for href in page.hrefs} <= set(page.ids)
    assert len(page.ids) == len(set(page.ids))


def test_cells_carry_their_state_and_link_to_their_case(results: Results) -> None:
    _, page = _parse(results)
    columns = len(COLUMNS)
    assert len(page.cells) == 2 * columns
    by_col = {(i // columns, c["data-col"]): c for i, c in enumerate(page.cells)}
    failed = by_col[(1, "after_side_effect")]  # send_once is the second row (non_idempotent)
    assert failed["class"] == "cell fail"
    # passed/cases, as every count on the page, then the codes of its causes
    assert failed["text"].strip() == "✗ 0/1 A,B,C,+1"
    assert (failed["data-passed"], failed["data-cases"], failed["data-failed"]) == ("0", "1", "1")
    assert failed["data-causes"] == "non_idempotent_at_most_once ledger outcome world.emails"
    assert by_col[(1, "recovery")]["text"].strip() == "✓ 1/1"
    assert by_col[(0, "after_side_effect")]["class"] == "cell indeterminate"
    assert by_col[(0, "after_approved")]["class"] == "cell not_reached"
    assert by_col[(1, "recovery")]["class"] == "cell pass"


def test_causes_and_the_matrix_come_first_then_failures_linking_to_an_open_detail_view(
    results: Results,
) -> None:
    text, page = _parse(results)
    assert (
        page.ids.index("causes")
        < page.ids.index("matrix")
        < page.ids.index("failures")
        < page.ids.index("cases")
    )
    failed = [d for d in page.details if d["data-state"] == "fail"]
    assert len(failed) == 1 and "open" in failed[0]
    assert failed[0]["data-boundary"] == "after_side_effect"
    section = text[text.index('id="failures"') : text.index('id="scorecard"')]
    assert f'href="#{failed[0]["id"]}"' in section
    # Its first line is the invariant it broke, not the first mismatch the record lists.
    assert re.search(r'class="failure"[^>]*>.*failed: invariant non_idempotent_at_most_once: ', section)


def test_a_failing_cell_names_its_causes_on_hover(results: Results) -> None:
    text, _ = _parse(results)
    assert (
        'title="after_side_effect: 0 of 1 case passed, 1 failed; causes: A non_idempotent_at_most_once (1), '
        'B ledger (1), C outcome (1), D world.emails (1)"' in text
    )


def test_the_cause_list_has_counts_and_one_case_to_rerun_per_cause(results: Results) -> None:
    text, _ = _parse(results)
    section = text[text.index('id="causes"') : text.index('id="matrix"')]
    start = section.index('<tr class="cause invariant" data-cause="non_idempotent_at_most_once"')
    first = section[start : section.index("</tr>", start)]
    assert '<td class="n">1</td><td class="n">1</td>' in first
    assert (
        "crashmatrix run scenarios/send_email/send_once.yaml --crash &#x27;after_side_effect[call_mail]&#x27;"
        in first
    )
    assert 'class="cause-only"' in first


def test_the_totals_row_is_the_sum_of_the_cells_the_script_recomputes_from(results: Results) -> None:
    text, page = _parse(results)
    assert "totals" in page.ids and "grand-total" in page.ids
    passed = sum(int(c["data-passed"]) for c in page.cells)
    cases = sum(int(c["data-cases"]) for c in page.cells)
    assert (
        'id="grand-total" title="6 of 8 cases passed, 1 failed, 1 not reached, 1 allowed-indeterminate">'
        in text
    )
    assert f">{passed}/{cases}</td></tr></tfoot>" in text
    assert "td.row-total" in text and "#totals td[data-col]" in text  # the script recomputes them


def test_every_case_has_a_detail_view_with_timeline_and_repro(results: Results) -> None:
    text, page = _parse(results)
    assert len(page.details) == len(results.cases)
    for case in results.cases:
        assert case.repro.replace("'", "&#x27;") in text
    assert "crash" in " ".join(page.timeline_classes)
    assert any("restart" in c for c in page.timeline_classes)
    assert any("world" in c for c in page.timeline_classes)


def test_the_timeline_marks_the_crash_the_restart_and_world_events_in_order(results: Results) -> None:
    text, _ = _parse(results)
    detail = text[text.index("after_side_effect[call_mail]</code>") :]
    order = [
        detail.index("life 1 starts"),
        detail.index("world email"),
        detail.index("SIGKILL at after_side_effect[call_mail]"),
        detail.index("restart: life 2 starts"),
        detail.index("#2</span>"),
        detail.index("life 2 exits normally"),
    ]
    assert order == sorted(order)


@pytest.mark.parametrize(
    "control", ["only-failures", "tool-filter", "boundary-filter", "cause-filter", "failure-search"]
)
def test_the_page_has_filters(results: Results, control: str) -> None:
    _, page = _parse(results)
    assert control in page.ids
