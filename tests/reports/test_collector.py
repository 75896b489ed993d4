"""reports.collector on the controller: the report is never greener than pytest.

A crash case pytest failed outside its verdict (a harness error in setup or teardown, a
record that could not be made, a worker that died with it) and a scenario file that failed
to collect are ``error`` cases: in ``matrix.json``, counted, red in the headline, failing
their scorecard rows. (The end-to-end run is in ``tests/harness/front/test_harness_errors.py``.)
"""

from __future__ import annotations

import json
from pathlib import Path

from crashmatrix.reports.collector import MatrixReporter, cause_line
from crashmatrix.reports.html import render_html
from crashmatrix.reports.matrix import build_matrix
from crashmatrix.reports.results import CaseRecord, Results, results_to_json

PYTEST_TEXT = """self = <CrashCase after_running[call_mail]>

    def teardown(self):
>       raise RuntimeError("the fork server went away")
E       RuntimeError: the fork server went away

harness/front/collection.py:12: RuntimeError"""


def _reporter(results: Results, tmp_path: Path) -> MatrixReporter:
    reporter = MatrixReporter(tmp_path / "report", results.agent)
    for case in results.cases:
        reporter.add(json.dumps(case.to_json()))
    return reporter


def _case(reporter: MatrixReporter, node_id: str) -> CaseRecord:
    [case] = [c for c in reporter.results().cases if c.node_id == node_id]
    return case


def test_the_cause_is_the_raised_line_of_pytests_text() -> None:
    assert cause_line(PYTEST_TEXT) == "RuntimeError: the fork server went away"
    assert cause_line("worker 'gw0' crashed while running 'x.yaml::clean'") == (
        "worker 'gw0' crashed while running 'x.yaml::clean'"
    )
    assert len(cause_line("E   " + "x" * 5000)) == 300


def test_a_passed_case_pytest_failed_is_an_error_counted_and_red(results: Results, tmp_path: Path) -> None:
    node = "scenarios/send_email/send_once.yaml::after_running[call_mail]"
    reporter = _reporter(results, tmp_path)
    before = build_matrix(reporter.results())
    reporter.failed(node, Path("scenarios/send_email/send_once.yaml"), PYTEST_TEXT, "teardown")
    case = _case(reporter, node)
    assert case.status == "error"
    assert (
        case.problems[0] == "pytest failed the case in its teardown: RuntimeError: the fork server went away"
    )
    matrix = build_matrix(reporter.results())
    assert case in matrix.failing
    assert matrix.tally.failed == before.tally.failed + 1
    assert matrix.tally.passed == before.tally.passed - 1
    assert f"{matrix.tally.failed} failed" in matrix.headline
    assert '<p class="headline bad">' in render_html(reporter.results(), matrix)
    failing_rows = [row for row in matrix.scorecard.rows if node in row.failing]
    assert failing_rows and all(row.state == "fail" for row in failing_rows)


def test_a_case_that_already_fails_keeps_its_verdict(results: Results, tmp_path: Path) -> None:
    node = "scenarios/send_email/send_once.yaml::after_side_effect[call_mail]"
    reporter = _reporter(results, tmp_path)
    kept = _case(reporter, node)
    reporter.failed(node, Path("scenarios/send_email/send_once.yaml"), PYTEST_TEXT, "call")
    assert _case(reporter, node) == kept


def test_a_failed_case_with_no_record_is_an_error_in_its_row_and_column(
    results: Results, tmp_path: Path
) -> None:
    # A worker that died with the case: xdist fails it, and no record ever arrives.
    node = "scenarios/send_email/send_once.yaml::power@after_running[call_mail]"
    reporter = _reporter(results, tmp_path)
    reporter.failed(
        node, Path("scenarios/send_email/send_once.yaml").resolve(), "worker 'gw1' crashed", "???"
    )
    case = _case(reporter, node)
    assert (case.status, case.boundary, case.point) == (
        "error",
        "power_loss",
        "power@after_running[call_mail]",
    )
    # Its scenario's name and classes from a case of the same file that did report.
    assert (case.scenario, case.scenario_path) == ("send_email_once", "scenarios/send_email/send_once.yaml")
    assert case.idempotency == ("non_idempotent",)
    # Its crashed call's class from a case that crashed the same call: its scorecard rows.
    assert (case.crash_call, case.crash_class) == ("call_mail", "non_idempotent")
    assert case.problems == ("pytest failed the case: worker 'gw1' crashed",)  # xdist's phase: "???"
    assert "--crash 'power@after_running[call_mail]'" in case.repro
    matrix = build_matrix(reporter.results())
    [row] = [row for row in matrix.rows if any(c.node_id == node for cell in row.cells for c in cell.cases)]
    assert row.cell("power_loss").state == "fail"
    failing_rows = [row for row in matrix.scorecard.rows if node in row.failing]
    assert failing_rows and all(row.state == "fail" for row in failing_rows)
    # The record is a valid results file entry.
    assert results_to_json(reporter.results())["cases"]


def test_a_scenario_that_failed_to_collect_is_a_red_row(results: Results, tmp_path: Path) -> None:
    reporter = _reporter(results, tmp_path)
    path = Path("scenarios/broken/oops.yaml")
    reporter.not_collected(str(path), path, "E   ValueError: the clean run's copy failed")
    case = _case(reporter, str(path))
    assert (case.status, case.boundary, case.point) == ("error", "clean", "clean")
    assert case.problems == ("the scenario was not collected: ValueError: the clean run's copy failed",)
    matrix = build_matrix(reporter.results())
    assert case in matrix.failing and matrix.tally.state == "fail"


def test_whatever_pytest_failed_no_view_counts_as_passed(results: Results, tmp_path: Path) -> None:
    # The headline is never greener than pytest's exit status: each case pytest failed is
    # failing in the matrix, whatever its record said.
    reporter = _reporter(results, tmp_path)
    failed = [case.node_id for case in results.cases]
    for node in failed:
        reporter.failed(node, Path(node.partition("::")[0]), PYTEST_TEXT, "call")
    matrix = build_matrix(reporter.results())
    assert matrix.tally.passed == 0 and matrix.tally.failed == len(failed)
    assert {case.node_id for case in matrix.failing} == set(failed)
    assert matrix.headline.startswith(f"0/{len(failed)} cases passed")


class _Terminal:
    """What ``pytest_terminal_summary`` writes, with its markup."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, bool]]] = []
        self.config = self

    def get_terminal_writer(self) -> _Terminal:
        return self

    fullwidth = 100

    def section(self, title: str, sep: str = "=") -> None:
        pass

    def write_line(self, line: str, **markup: bool) -> None:
        self.lines.append((line, markup))


def _headline(reporter: MatrixReporter) -> tuple[str, dict[str, bool]]:
    reporter.matrix = build_matrix(reporter.results())
    terminal = _Terminal()
    reporter.pytest_terminal_summary(terminal)  # type: ignore[arg-type]
    return terminal.lines[0]


def test_the_terminal_headline_is_red_while_a_case_failed_or_errored(
    results: Results, tmp_path: Path
) -> None:
    passed = [case for case in results.cases if case.status == "passed"]
    reporter = MatrixReporter(tmp_path / "report", results.agent)
    for case in passed:
        reporter.add(json.dumps(case.to_json()))
    line, markup = _headline(reporter)
    assert line.startswith(f"crashmatrix: {len(passed)}/{len(passed)} cases passed")
    assert markup == {"red": False, "green": True, "bold": True}
    reporter.failed(passed[1].node_id, Path(passed[1].scenario_path), PYTEST_TEXT, "teardown")
    line, markup = _headline(reporter)
    assert line.startswith(f"crashmatrix: {len(passed) - 1}/{len(passed)} cases passed")
    assert markup["red"] and not markup["green"]
