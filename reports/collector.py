"""The report's pytest side: gather one record per crash case, write the report once.

Where each step runs, under xdist (``-n 2``):

* worker (or the only process): right after a case, ``case_record`` builds the record (its
  timeline from the case's observation) and serialises it as a string; the plugin's
  ``pytest_runtest_makereport`` puts it on the report as ``crashmatrix_case``, an attribute
  xdist ships to the controller with the rest of the report;
* controller (or the only process): ``MatrixReporter`` collects those reports in
  ``pytest_runtest_logreport`` and, once, writes the report directory and the job summary
  in ``pytest_sessionfinish``, then prints the table in ``pytest_terminal_summary``.

A worker never writes: it has only its share of the cases, and N workers would race.
"""

from __future__ import annotations

import datetime
import json
import sys
import time
from pathlib import Path

import pytest

from crashmatrix.harness.verdict.result import CaseResult
from crashmatrix.reports.matrix import COLUMNS, Matrix
from crashmatrix.reports.results import CaseRecord, Results, record_from_result, with_world_diffs
from crashmatrix.reports.terminal import render_terminal
from crashmatrix.reports.timeline import timeline_of
from crashmatrix.reports.writer import append_step_summary, write_report

__all__ = ["MatrixReporter", "case_record"]


def case_record(result: CaseResult, node_id: str) -> str:
    """The record of a case as the JSON string that travels on its pytest report."""
    timeline = timeline_of(result.observation) if result.observation is not None else ()
    record = record_from_result(result, node_id, timeline=timeline)
    return json.dumps(record.to_json(), ensure_ascii=False, separators=(",", ":"))


class MatrixReporter:
    """Built by the plugin's idle reporter on the controller when the first crash case
    reports (``harness.front.plugin._Reporter``); ``started`` is when the session began."""

    def __init__(
        self, out_dir: Path, agent: str, step_summary: Path | None = None, *, started: float | None = None
    ) -> None:
        self.out_dir = out_dir
        self.agent = agent
        self.step_summary = step_summary
        self.records: dict[str, CaseRecord] = {}
        self.started = time.monotonic() if started is None else started
        self.matrix: Matrix | None = None
        self.error = ""

    def add(self, raw: str) -> None:
        """One case's record, as the JSON string its report carried."""
        record = CaseRecord.from_json(json.loads(raw))
        # Keyed by node id: a rerun of a case (pytest-rerunfailures) replaces its record.
        self.records[record.node_id] = record

    def results(self, *, incomplete: bool = False) -> Results:
        order = {column: index for index, column in enumerate(COLUMNS)}
        cases = sorted(
            self.records.values(),
            key=lambda c: (c.scenario_path, order.get(c.boundary, len(order)), c.node_id),
        )
        return Results(
            agent=self.agent,
            cases=with_world_diffs(cases),
            created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            seconds=time.monotonic() - self.started,
            incomplete=incomplete,
        )

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
        if not self.records:
            return  # no crashmatrix case ran (``pytest tests``): no report
        # Interrupted (Ctrl-C, SIGTERM) or stopped early (-x, --maxfail): write what ran,
        # marked, rather than nothing or a matrix that looks whole.
        incomplete = exitstatus == pytest.ExitCode.INTERRUPTED or bool(
            session.shouldstop or session.shouldfail
        )
        try:
            self.matrix = write_report(self.results(incomplete=incomplete), self.out_dir)
            if self.step_summary is not None:
                append_step_summary(self.matrix, self.step_summary)
        except OSError as error:
            # A report that cannot be written must not turn a passing run into a crash.
            self.error = f"crashmatrix: could not write the report to {self.out_dir}: {error}"

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.error:
            terminalreporter.write_line(self.error, red=True)
        if self.matrix is None:
            return
        terminalreporter.section("crashmatrix pass matrix", sep="=")
        # pytest's terminal writes to stdout; an ASCII-only CI log gets ASCII marks.
        for line in render_terminal(self.matrix, encoding=getattr(sys.stdout, "encoding", None)):
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"report: {self.out_dir / 'matrix.html'} (and matrix.md, matrix.json)")
