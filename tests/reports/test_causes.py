"""Failures grouped by cause (``reports.causes``), and every renderer leading with them."""

from __future__ import annotations

import dataclasses

import pytest

from crashmatrix.reports.causes import cause_code, codes, findings, first_reason, group_causes
from crashmatrix.reports.html import render_html
from crashmatrix.reports.markdown import render_markdown
from crashmatrix.reports.matrix import build_matrix
from crashmatrix.reports.results import CaseRecord, Results, load_results
from crashmatrix.reports.terminal import render_terminal

from .conftest import DATA

# A real run of the blind-retry mutant (send_once, unkeyed_crash and three write_file
# scenarios), cut down: timelines and file texts dropped, one passing case per cell kept.
BLIND_RETRY = DATA / "blind_retry.json"


@pytest.fixture(scope="module")
def blind_retry() -> Results:
    return load_results(BLIND_RETRY)


def _failing(results: Results) -> CaseRecord:
    return next(case for case in results.cases if case.failing)


def test_a_blind_retry_mutant_s_top_cause_is_the_double_effect_with_its_counts(blind_retry: Results) -> None:
    causes = build_matrix(blind_retry).causes
    top = causes.causes[0]
    assert (top.code, top.kind, top.key) == ("A", "invariant", "non_idempotent_at_most_once")
    assert (len(top.cases), len(top.scenarios)) == (6, 2)
    assert top.counts == "6 cases in 2 scenarios"
    assert set(top.scenarios) == {
        "scenarios/send_email/send_once.yaml",
        "scenarios/create_order/unkeyed_crash.yaml",
    }
    # Expectations follow, most cases first; a case counts under each cause it shows.
    assert [(c.key, len(c.cases)) for c in causes.causes[1:4]] == [
        ("outcome", 24),
        ("told", 15),
        ("code", 13),
    ]
    assert {c.key for c in causes} >= {"ledger", "world.emails", "world.orders", "world.files"}
    assert sum(c.first for c in causes) == len(build_matrix(blind_retry).failing) == 28


def test_the_representative_shows_the_cause_first_and_carries_its_rerun_line(blind_retry: Results) -> None:
    for cause in build_matrix(blind_retry).causes:
        case = cause.representative
        assert case in cause.cases and case.repro.startswith("crashmatrix run ")
        if cause.first:
            assert findings(case)[0].key == cause.key
    top = build_matrix(blind_retry).causes.causes[0]
    assert "caused 2 side effects" in top.example


def test_an_invariant_is_a_failure_s_first_line_before_any_expectation(results: Results) -> None:
    case = _failing(results)
    assert case.mismatches and case.violations  # the record lists the outcome mismatch first
    assert case.mismatches[0]["field"] == "outcome[call_mail]"
    assert first_reason(case).startswith("invariant non_idempotent_at_most_once: ")
    assert [f.kind for f in findings(case)] == ["invariant", "expectation", "expectation", "expectation"]


def test_a_hang_ranks_first_and_expectation_keys_drop_the_call_id(results: Results) -> None:
    case = dataclasses.replace(
        _failing(results),
        status="hung",
        problems=("life 2 hung: no exit within 30s",),
        mismatches=(
            {"field": "world.files[notes.txt]", "expected": None, "observed": "x"},
            {"field": "told[call_mail]", "expected": "uncertain", "observed": "succeeded"},
        ),
    )
    assert [f.key for f in findings(case)] == [
        "hung",
        "non_idempotent_at_most_once",
        "world.files",
        "told",
    ]
    assert first_reason(case) == "hung: life 2 hung: no exit within 30s"
    assert findings(case)[2].text == 'world.files[notes.txt]: expected null, observed "x"'  # JSON, no None


def test_only_failing_cases_are_grouped_and_cells_know_their_causes(results: Results) -> None:
    passing = [c for c in results.cases if not c.failing]
    assert len(group_causes(passing)) == 0
    matrix = build_matrix(results)
    email = next(r for r in matrix.rows if r.label == "send_email/send_once")
    assert [c.key for c in matrix.causes_of(email.cell("after_side_effect"))] == [
        "non_idempotent_at_most_once",
        "ledger",
        "outcome",
        "world.emails",
    ]
    assert matrix.causes_of(email.cell("after_running")) == ()


def test_cause_codes_run_a_to_z_then_two_letters_and_a_cell_names_three_at_most(
    blind_retry: Results,
) -> None:
    assert [cause_code(i) for i in (0, 1, 25, 26, 27, 52)] == ["A", "B", "Z", "AA", "AB", "BA"]
    causes = build_matrix(blind_retry).causes.causes
    assert codes(causes) == "A,B,C,+5"
    assert codes(causes[:2]) == "A,B" and codes(()) == ""


def test_every_renderer_leads_with_the_causes(blind_retry: Results) -> None:
    matrix = build_matrix(blind_retry)
    markdown = render_markdown(matrix)
    assert markdown.index("### Causes (8)") < markdown.index("### Matrix") < markdown.index("### Failures")
    assert (
        "- **A** invariant **non_idempotent_at_most_once**: 6 cases in 2 scenarios; e.g. "
        "`unkeyed_crash.yaml::recovery@after_side_effect[call_sprocket]`" in markdown
    )
    lines = render_terminal(matrix)
    assert lines[1] == "causes (8; a case counts under each cause it shows):"
    assert lines[2].startswith("  A invariant non_idempotent_at_most_once: 6 cases in 2 scenarios, e.g. ")
    assert lines[3].startswith("      rerun: crashmatrix run scenarios/create_order/unkeyed_crash.yaml")
    assert len([line for line in lines if line.startswith("  ... and ")]) >= 1  # past the top five
    page = render_html(blind_retry, matrix)
    assert page.index('id="causes"') < page.index('id="matrix"') < page.index('id="failures"')
    assert page.count('<tr class="cause ') == 8


def test_a_failure_line_says_its_status_once(results: Results) -> None:
    hung = dataclasses.replace(
        _failing(results), status="hung", problems=("life 2 hung: no exit within 30s",)
    )
    cut = dataclasses.replace(
        results, cases=(*(c for c in results.cases if c is not _failing(results)), hung)
    )
    matrix = build_matrix(cut)
    line = f"{hung.title} hung: life 2 hung: no exit within 30s"
    assert any(line in text for text in render_terminal(matrix, encoding="utf-8", width=200))
    assert "hung: hung:" not in "\n".join(render_terminal(matrix, encoding="utf-8", width=200))
    assert "hung: hung:" not in render_markdown(matrix)
    assert "hung: hung:" not in render_markdown(matrix, max_bytes=3000)  # the short list of failures
