"""An interrupted run's report says so in every view: the results file keeps the mark, every
renderer prints it, and the collector sets it for an interrupt, an early stop, and an
interrupt before any crash case reported (fast: no run is started; the end-to-end runs are
``tests/reports/test_plugin_report.py`` and ``tests/harness/lives/test_interrupt.py``)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from crashmatrix.reports.collector import MatrixReporter
from crashmatrix.reports.html import render_html
from crashmatrix.reports.markdown import render_markdown
from crashmatrix.reports.matrix import build_matrix
from crashmatrix.reports.results import Results, load_results, write_results
from crashmatrix.reports.terminal import render_terminal

MARK = "INCOMPLETE (interrupted)"


def test_an_incomplete_run_reads_back_incomplete_and_a_whole_one_whole(
    results: Results, tmp_path: Path
) -> None:
    for incomplete in (True, False):
        path = write_results(
            dataclasses.replace(results, incomplete=incomplete), tmp_path / f"{incomplete}.json"
        )
        assert json.loads(path.read_text(encoding="utf-8"))["incomplete"] is incomplete
        assert load_results(path).incomplete is incomplete


def test_every_view_of_an_incomplete_run_leads_with_the_mark(results: Results) -> None:
    cut = dataclasses.replace(results, incomplete=True)
    matrix = build_matrix(cut)
    assert matrix.headline.startswith(f"{MARK}: ")
    assert render_terminal(matrix, encoding="utf-8", width=120)[0].startswith(f"crashmatrix: {MARK}: ")
    assert MARK in render_markdown(matrix)
    assert MARK in render_html(cut, matrix)
    whole = build_matrix(results)
    assert MARK not in whole.headline
    assert MARK not in render_markdown(whole)
    assert MARK not in render_html(results, whole)


def _finish(reporter: MatrixReporter, exitstatus: pytest.ExitCode, **session: bool) -> Results:
    fake = SimpleNamespace(
        shouldstop=session.get("shouldstop", False), shouldfail=session.get("shouldfail", False)
    )
    reporter.pytest_sessionfinish(fake, exitstatus)  # type: ignore[arg-type]
    return load_results(reporter.out_dir / "matrix.json")


def _reporter(results: Results, tmp_path: Path) -> MatrixReporter:
    reporter = MatrixReporter(tmp_path / "report", results.agent)
    for case in results.cases:
        reporter.add(json.dumps(case.to_json()))
    return reporter


@pytest.mark.parametrize(
    ("exitstatus", "session", "incomplete"),
    [
        (pytest.ExitCode.INTERRUPTED, {}, True),  # Ctrl-C, SIGTERM
        (pytest.ExitCode.TESTS_FAILED, {"shouldfail": True}, True),  # -x, --maxfail
        (pytest.ExitCode.INTERRUPTED, {"shouldstop": True}, True),
        (pytest.ExitCode.TESTS_FAILED, {}, False),
        (pytest.ExitCode.OK, {}, False),
    ],
    ids=["interrupted", "stopped-early", "shouldstop", "failed-whole", "passed-whole"],
)
def test_the_collector_marks_a_cut_short_run_incomplete_and_only_that(
    results: Results, tmp_path: Path, exitstatus: pytest.ExitCode, session: dict[str, bool], incomplete: bool
) -> None:
    assert _finish(_reporter(results, tmp_path), exitstatus, **session).incomplete is incomplete


def test_an_interrupt_before_any_case_reported_still_writes_an_incomplete_report(tmp_path: Path) -> None:
    reporter = MatrixReporter(tmp_path / "report", "reference")
    written = _finish(reporter, pytest.ExitCode.INTERRUPTED)
    assert written.incomplete and written.cases == ()
    assert reporter.matrix is not None and reporter.matrix.headline.startswith(f"{MARK}: 0/0 cases passed")


def test_a_run_with_no_case_that_was_not_interrupted_writes_no_report(tmp_path: Path) -> None:
    reporter = MatrixReporter(tmp_path / "report", "reference")
    reporter.pytest_sessionfinish(SimpleNamespace(shouldstop=False, shouldfail=False), pytest.ExitCode.OK)  # type: ignore[arg-type]
    assert not (tmp_path / "report").exists()
