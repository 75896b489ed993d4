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

The report is never greener than pytest's exit status: a crash case pytest failed outside
its verdict (a harness error in setup, teardown or while its record was made, a worker
that died) is an ``error`` case (``MatrixReporter.failed``), and so is a scenario file that
failed to collect (``MatrixReporter.not_collected``): each counted, red, with its cause.

A scenario's clean case also carries its plan (``plan``: the agent's reachable boundaries,
and the points with no case -- not reachable by this agent, or deselected -- with why),
which ``harness.front.collection`` computed from the clean run; the controller lifts it
into the results file's ``reachable`` and ``not_run``. Without it a boundary the agent
cannot reach would produce no case and no cell would say so.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.core.double_resume import DOUBLE_COLUMN, DOUBLE_PREFIX
from crashmatrix.harness.errors import InputError
from crashmatrix.harness.plan.schedule import repro_command
from crashmatrix.harness.verdict.result import CaseResult
from crashmatrix.reports.matrix import COLUMNS, Matrix
from crashmatrix.reports.results import (
    FAILING,
    CaseRecord,
    NotRun,
    Results,
    record_from_result,
    with_world_diffs,
)
from crashmatrix.reports.terminal import render_terminal
from crashmatrix.reports.timeline import timeline_of
from crashmatrix.reports.writer import append_step_summary, write_report

__all__ = ["MatrixReporter", "case_record", "cause_line", "junit_properties"]


_PLAN = "plan"  # the key of a clean record's plan in the string that travels
# A cause longer than this is cut (pytest's text or the log file has all of it).
_CAUSE_CHARS = 300


def cause_line(text: str) -> str:
    """The one line that says why, from pytest's failure text: its last ``E`` line (the
    exception raised), else its last non-empty line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    raised = [line[1:].strip() for line in lines if line.startswith("E ")]
    said = " ".join((raised or lines or ["no failure text"])[-1].split())
    return said if len(said) <= _CAUSE_CHARS else said[: _CAUSE_CHARS - 1] + "…"


def _column(point: str) -> str:
    """The matrix column of a case named ``point`` (the item's name)."""
    if point.startswith("power@"):
        return "power_loss"
    if point.startswith("recovery@"):
        return "recovery"
    if point.startswith(DOUBLE_PREFIX):
        return DOUBLE_COLUMN
    return point.partition("[")[0] or "clean"


def _crashed_call(point: str) -> str:
    """The tool call id a case named ``point`` crashed (``power@P``, ``recovery@P``: P's)."""
    try:
        return parse_point(point.rpartition("@")[2]).tool_call_id
    except InputError:
        return ""  # clean


def _error_record(node_id: str, path: Path, cause: str, siblings: Sequence[CaseRecord]) -> CaseRecord:
    """An ``error`` case known only by its node id (pytest failed it with no record, or its
    file failed to collect), in its file's row and its item's column: its scenario's name,
    tools and classes from a record of the same file (``siblings``), its crashed call's class
    from one that crashed the same call, so it fails the scorecard rows it would answer."""
    point = node_id.partition("::")[2] or "clean"
    like = siblings[0] if siblings else None
    call = _crashed_call(point)
    same_call = next((r for r in siblings if call and r.crash_call == call), None)
    try:  # relative to where the run stands, as every record's path is
        shown = str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        shown = str(path)
    return CaseRecord(
        node_id=node_id,
        scenario=like.scenario if like else path.stem,
        scenario_path=shown,
        tools=like.tools if like else (),
        idempotency=like.idempotency if like else (),
        evals=like.evals if like else (),
        crash_call=same_call.crash_call if same_call else "",
        crash_tool=same_call.crash_tool if same_call else "",
        crash_class=same_call.crash_class if same_call else "",
        point=point,
        boundary=_column(point),
        status="error",
        indeterminate=False,
        seconds=0.0,
        lives=0,
        repro=repro_command(Path(shown), point),
        problems=(cause,),
    )


def case_record(
    result: CaseResult,
    node_id: str,
    *,
    reachable: Sequence[str] | None = None,
    not_run: Sequence[Mapping[str, Any]] = (),
    items: Sequence[tuple[str, str, str]] = (),
) -> str:
    """The record of a case as the JSON string that travels on its pytest report. The first
    case of a scenario a process runs adds the scenario's plan: ``reachable`` boundaries,
    ``not_run`` entries, each ``{boundary, state, why, points}`` (see
    ``reports.results.NotRun``), and every item collected (``[node id, column, point id]``)."""
    timeline = timeline_of(result.observation) if result.observation is not None else ()
    record = record_from_result(result, node_id, timeline=timeline)
    raw = record.to_json()
    if reachable is not None or not_run or items:
        raw[_PLAN] = {
            "reachable": None if reachable is None else list(reachable),
            "not_run": [{**gap, "scenario_path": record.scenario_path} for gap in not_run],
            "items": [list(item) for item in items],
        }
    return json.dumps(raw, ensure_ascii=False, separators=(",", ":"))


def junit_properties(result: CaseResult) -> list[tuple[str, str]]:
    """A case's JUnit ``<property>`` values (the item's ``user_properties``): plain strings,
    and JSON where the value has structure (``outcome``: ``{"call_1": "replayed"}``), so a
    CI tool parses them instead of reading a Python repr."""
    properties = [("crash_point", result.point_id), ("status", result.verdict.status)]
    if result.verdict.observed is not None:
        outcome = json.dumps(dict(result.verdict.observed.outcome), ensure_ascii=False, sort_keys=True)
        properties.append(("outcome", outcome))
    return properties


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
        self.reachable: tuple[str, ...] | None = None
        self.not_run: dict[str, tuple[NotRun, ...]] = {}  # by scenario path
        # Every item collected, by scenario path: (node id, column, point id).
        self.items: dict[str, tuple[tuple[str, str, str], ...]] = {}
        # The node ids pytest kept after its own selection (-k, -m, --deselect, --shard);
        # set by the plugin before the session finishes. None: not known.
        self.selected: frozenset[str] | None = None
        self.started = time.monotonic() if started is None else started
        self.matrix: Matrix | None = None
        self.error = ""

    def add(self, raw: str) -> None:
        """One case's record, as the JSON string its report carried."""
        loaded = json.loads(raw)
        plan = loaded.pop(_PLAN, None)
        record = CaseRecord.from_json(loaded)
        # Keyed by node id: a rerun of a case (pytest-rerunfailures) replaces its record.
        self.records[record.node_id] = record
        if plan is not None:
            if plan.get("reachable") is not None:
                self.reachable = tuple(plan["reachable"])
            self.not_run[record.scenario_path] = tuple(NotRun.from_json(gap) for gap in plan["not_run"])
            items = plan.get("items", ())
            self.items[record.scenario_path] = tuple((str(a), str(b), str(c)) for a, b, c in items)

    def failed(self, node_id: str, path: Path, text: str, when: str) -> None:
        """pytest failed the crash case ``node_id`` of the scenario file ``path`` (in its
        ``when`` phase) with ``text``: whatever its record said, the case is an ``error``
        unless the record already fails it, so no report counts as passed what pytest did
        not."""
        record = self.records.get(node_id)
        phase = f" in its {when}" if when in ("setup", "call", "teardown") else ""  # xdist's crash: "???"
        cause = f"pytest failed the case{phase}: {cause_line(text)}"
        if record is None:
            self.records[node_id] = _error_record(node_id, path, cause, self._siblings(node_id))
        elif record.status not in FAILING:
            self.records[node_id] = dataclasses.replace(
                record, status="error", indeterminate=False, problems=(cause, *record.problems)
            )

    def not_collected(self, node_id: str, path: Path, text: str) -> None:
        """The scenario file ``path`` failed to collect: one ``error`` case for it (its clean
        cell), so the matrix has a red row instead of no row."""
        cause = f"the scenario was not collected: {cause_line(text)}"
        self.records[node_id] = _error_record(node_id, path, cause, ())

    def _siblings(self, node_id: str) -> list[CaseRecord]:
        """The records of the same scenario file as ``node_id`` that arrived."""
        file = node_id.partition("::")[0]
        return [r for r in self.records.values() if r.node_id.partition("::")[0] == file]

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
            reachable=self.reachable,
            not_run=tuple(
                gap for path in sorted({*self.not_run, *self.items}) for gap in self._not_run_of(path)
            ),
        )

    def _not_run_of(self, path: str) -> tuple[NotRun, ...]:
        """The plan's gaps, and the items pytest's own selection left out, as deselected."""
        if self.selected is None:
            return self.not_run.get(path, ())
        left: dict[str, list[str]] = {}
        for node_id, column, point in self.items.get(path, ()):
            if node_id not in self.selected and node_id not in self.records:
                left.setdefault(column, []).append(point)
        why = "deselected by pytest's selection (-k, -m, --deselect or --shard)"
        return (
            *self.not_run.get(path, ()),
            *(NotRun(path, column, "deselected", why, tuple(points)) for column, points in left.items()),
        )

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
        # Interrupted (Ctrl-C, SIGTERM) or stopped early (-x, --maxfail): write what ran,
        # marked, rather than nothing or a matrix that looks whole.
        incomplete = exitstatus == pytest.ExitCode.INTERRUPTED or bool(
            session.shouldstop or session.shouldfail
        )
        if not self.records and not incomplete:
            return  # no crashmatrix case ran (``pytest tests``): no report
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
        # pytest's terminal writes to stdout; an ASCII-only CI log gets ASCII marks. Its
        # width (COLUMNS, else the tty's, else 80) gives long scenario names their room.
        width = terminalreporter.config.get_terminal_writer().fullwidth
        lines = render_terminal(self.matrix, encoding=getattr(sys.stdout, "encoding", None), width=width)
        # The headline in pytest's colours: red while any case failed, hung or errored (or
        # the run was cut short), green only when nothing did, as pytest's own last line.
        bad = bool(self.matrix.failing) or self.matrix.incomplete
        for index, line in enumerate(lines):
            if index == 0:
                terminalreporter.write_line(line, red=bad, green=not bad, bold=True)
            else:
                terminalreporter.write_line(line)
        terminalreporter.write_line(f"report: {self.out_dir / 'matrix.html'} (and matrix.md, matrix.json)")
