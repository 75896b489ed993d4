"""The pass matrix, as values: rows are scenarios, columns are crash points (pure).

A cell aggregates every case of one scenario at one column: all points of that boundary
(``after_running[call_1]`` and ``after_running[call_2]`` are one cell), all torn writes,
all depth-2 recovery cases. Its state, worst first:

* ``fail``           some case failed, hung or errored;
* ``not_reached``    a case ran and none of them reached its point, or there is no case and
                     no reason why (the clean run never passed that boundary);
* ``not_reachable``  this agent cannot be killed there (``adapter.boundaries``; a black box is
                     crashed only at its model and service edges): the results file's
                     ``not_run`` or cases recorded so, with the reason;
* ``deselected``     the clean run passed the points, and ``--crash-boundary``, the
                     scenario's ``cover`` or ``--no-recovery-crashes`` removed them;
* ``not_applicable`` the scenario does not apply to this agent (a tool it does not have, a
                     fault the harness cannot inject into it), with the reason;
* ``indeterminate``  all passed, at least one only because the expectation allowed a set
                     of outcomes (``Verdict.indeterminate``: "the email may or may not
                     have been sent, and the agent said so");
* ``pass``           all passed.

None of not reached, not reachable, deselected and not applicable is ever a pass.

Counts mean one thing everywhere (``COUNTS``): ``n/m`` is n cases passed of the m cases
recorded there -- a cell, a row, a column's total, the run. Allowed-indeterminate passes are
in n; a case not reached, not reachable or not applicable is in m and never in n (no silent
green). A failing cell is marked as such and its hover says how many failed.

Every renderer (Markdown, HTML, terminal, comparison) reads this one structure, so the
same run can never be counted two ways. It carries the run's scorecard (the named evals,
``reports.scorecard``) and its failures grouped by cause (``reports.causes``), both built
from the same cases.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePath

from crashmatrix.harness.core.boundaries import BOUNDARIES, TORN_WRITE
from crashmatrix.harness.core.tool_side import died_on_fault_note
from crashmatrix.harness.plan.enumeration import DOUBLE_COLUMN, POWER_COLUMN, TOOL_SIDE_COLUMNS
from crashmatrix.reports.causes import Cause, Causes, group_causes
from crashmatrix.reports.results import CaseRecord, NotRun, Results
from crashmatrix.reports.scorecard import Scorecard, build_scorecard

__all__ = [
    "COLUMNS",
    "COUNTS",
    "LABELS",
    "SHORT",
    "STATES",
    "Cell",
    "Matrix",
    "NoVerdict",
    "Row",
    "Tally",
    "build_matrix",
    "row_label",
]

_NO_SCORECARD = Scorecard("", ())  # frozen, so one shared empty value is safe
_NO_CAUSES = Causes()

# The agent's crashes, then the tool side's faults (the agent lives on: harness/core/tool_side.py).
# Two lives resuming one crashed session at once (double@P) is a crash of the agent too.
COLUMNS: tuple[str, ...] = (
    "clean",
    *BOUNDARIES,
    TORN_WRITE,
    POWER_COLUMN,
    "recovery",
    DOUBLE_COLUMN,
    *TOOL_SIDE_COLUMNS,
)
# Headers a table can afford; the full boundary name is the tooltip / legend.
LABELS = {
    "clean": "clean",
    "after_model_reply": "model replied",
    "after_tool_call_pending": "call pending",
    "after_tool_call_saved": "call saved",
    "after_approved": "approved",
    "after_running": "running",
    "after_side_effect": "side effect",
    "before_tool_result": "before result",
    "after_tool_result": "after result",
    "during_side_effect": "during effect",
    TORN_WRITE: "torn write",
    POWER_COLUMN: "power loss",
    "recovery": "recovery",
    DOUBLE_COLUMN: "double resume",
    "tool_server_died": "server died",
    "tool_response_lost": "response lost",
    "tool_result_error": "result error",
    "tool_result_malformed": "malformed result",
}
SHORT = {
    "clean": "CL",
    "after_model_reply": "MR",
    "after_tool_call_pending": "TP",
    "after_tool_call_saved": "TC",
    "after_approved": "AP",
    "after_running": "RU",
    "after_side_effect": "SE",
    "before_tool_result": "BR",
    "after_tool_result": "TR",
    "during_side_effect": "DE",
    TORN_WRITE: "TW",
    POWER_COLUMN: "PL",
    "recovery": "RC",
    DOUBLE_COLUMN: "DR",
    "tool_server_died": "SD",
    "tool_response_lost": "RL",
    "tool_result_error": "RE",
    "tool_result_malformed": "RM",
}
# The one meaning of every count; each renderer's legend says it.
COUNTS = (
    "n/m: n of the m cases there passed (allowed-indeterminate passes included); a case not reached, "
    "not reachable or not applicable counts in m, never in n"
)
STATES = ("pass", "fail", "indeterminate", "not_reached", "not_reachable", "deselected", "not_applicable")


@dataclass(frozen=True, slots=True)
class Tally:
    cases: int = 0
    passed: int = 0
    failed: int = 0  # failed, hung or errored
    indeterminate: int = 0  # passed, with an allowed set of outcomes
    not_reached: int = 0
    not_applicable: int = 0
    not_reachable: int = 0  # cases recorded at a point this agent cannot be killed at
    # Of ``failed``: the cases that did not end at all (an error, of the agent's lives or of the
    # harness, its cause naming which; a hang), so a headline never hides them among verdicts.
    errored: int = 0
    hung: int = 0

    @classmethod
    def of(cls, cases: Iterable[CaseRecord]) -> Tally:
        cases = list(cases)
        return cls(
            cases=len(cases),
            passed=sum(c.passed for c in cases),
            failed=sum(c.failing for c in cases),
            indeterminate=sum(c.passed and c.indeterminate for c in cases),
            not_reached=sum(c.status == "not_reached" for c in cases),
            not_applicable=sum(c.status == "not_applicable" for c in cases),
            not_reachable=sum(c.status == "not_reachable" for c in cases),
            errored=sum(c.status == "error" for c in cases),
            hung=sum(c.status == "hung" for c in cases),
        )

    def __add__(self, other: Tally) -> Tally:
        return Tally(
            self.cases + other.cases,
            self.passed + other.passed,
            self.failed + other.failed,
            self.indeterminate + other.indeterminate,
            self.not_reached + other.not_reached,
            self.not_applicable + other.not_applicable,
            self.not_reachable + other.not_reachable,
            self.errored + other.errored,
            self.hung + other.hung,
        )

    @property
    def state(self) -> str:
        if self.failed:
            return "fail"
        if not self.passed and self.not_applicable and self.not_applicable == self.cases:
            return "not_applicable"
        if not self.passed and self.not_reachable and self.not_reachable + self.not_applicable == self.cases:
            return "not_reachable"
        if not self.passed:
            return "not_reached"
        return "indeterminate" if self.indeterminate else "pass"

    @property
    def ratio(self) -> str:
        """``passed/cases``: the only way any report writes a count (``COUNTS``)."""
        return f"{self.passed}/{self.cases}"

    @property
    def spelled(self) -> str:
        """The ratio in words, for a hover: ``3 of 4 cases passed, 1 failed``."""
        text = f"{self.passed} of {self.cases} case{'s' if self.cases != 1 else ''} passed"
        others = [
            (self.failed, "failed"),
            (self.not_reached, "not reached"),
            (self.not_reachable, "not reachable"),
            (self.not_applicable, "not applicable"),
            (self.indeterminate, "allowed-indeterminate"),
        ]
        return text + "".join(f", {n} {word}" for n, word in others if n)


@dataclass(frozen=True, slots=True)
class Cell:
    column: str
    cases: tuple[CaseRecord, ...]
    tally: Tally
    not_run: tuple[NotRun, ...] = ()  # points of this cell with no case, and why
    # The whole scenario does not apply to the agent (its one clean item says why): an empty
    # cell of it is not applicable too, never "not reached".
    scenario_not_applicable: bool = False

    @property
    def state(self) -> str:
        if self.tally.cases:
            return self.tally.state
        if self.scenario_not_applicable:
            return "not_applicable"
        # No case at all: the results file may say why (reachability, selection); a cell
        # that has none stays "not reached" -- the clean run never passed the boundary.
        states = {gap.state for gap in self.not_run}
        for state in ("not_reachable", "deselected"):
            if state in states:
                return state
        return "not_reached"

    @property
    def why(self) -> tuple[str, ...]:
        """Why the cell's points have no case or were not reachable, one reason each."""
        reasons = [gap.why for gap in self.not_run]
        reasons += [p for c in self.cases if c.status == "not_reachable" for p in c.problems]
        return tuple(dict.fromkeys(reasons))

    @property
    def focus(self) -> CaseRecord | None:
        """The case a click on the cell shows: its first failure, else its first case."""
        return next((c for c in self.cases if c.failing), self.cases[0] if self.cases else None)


@dataclass(frozen=True, slots=True)
class Row:
    scenario: str
    scenario_path: str
    tools: tuple[str, ...]
    idempotency: tuple[str, ...]
    cells: tuple[Cell, ...]  # in COLUMNS order
    tally: Tally

    @property
    def group(self) -> str:
        """Rows are grouped by idempotency class and tools: the question a reader asks is
        "how do non-idempotent tools fare", not "how does file 17 fare"."""
        return f"{' + '.join(self.idempotency) or 'no contract'} · {', '.join(self.tools)}"

    @property
    def label(self) -> str:
        return row_label(self.scenario_path)

    def cell(self, column: str) -> Cell:
        return self.cells[COLUMNS.index(column)]


@dataclass(frozen=True, slots=True)
class NoVerdict:
    """Columns with no verdict for the same reason in the same scenarios (``Matrix.no_verdict``)."""

    state: str  # "not_reachable" | "deselected"
    columns: tuple[str, ...]
    scenarios: tuple[str, ...]  # row labels
    why: str
    every: bool = False  # every scenario that ran (not a not-applicable one)

    def where(self, most: int = 5) -> str:
        if self.every:
            return f"every scenario that ran ({len(self.scenarios)})"
        if len(self.scenarios) > most:
            return f"{len(self.scenarios)} scenarios ({', '.join(self.scenarios[:most])}, …)"
        return ", ".join(self.scenarios)


@dataclass(frozen=True, slots=True)
class Matrix:
    agent: str
    rows: tuple[Row, ...]
    columns: tuple[Tally, ...]  # per column, in COLUMNS order
    tally: Tally
    failing: tuple[CaseRecord, ...]  # every failed/hung/errored case, in row then column order
    incomplete: bool = False  # the run was interrupted; see Results.incomplete
    scorecard: Scorecard = _NO_SCORECARD
    reachable: tuple[str, ...] | None = None  # see Results.reachable
    causes: Causes = _NO_CAUSES  # the failing cases grouped by cause, most important first

    def causes_of(self, cell: Cell) -> tuple[Cause, ...]:
        """The causes of a cell's failing cases, in the cause list's order."""
        return self.causes.of(cell.cases)

    def drawn(self) -> tuple[str, ...]:
        """The columns the terminal's table draws of those some row can reach: every column
        but a tool-side one in which no case ran. The tool-side columns have cases only where
        an agent reaches its tools over MCP; elsewhere they are not reachable (the not-run
        reasons say why) or, in a results file from before them, empty: four columns of
        nothing would push the table past 80 characters. Nor the double-resume column with no
        case (a results file from before it; an agent it cannot act on: its reason is listed)."""
        return tuple(
            column
            for index, column in enumerate(COLUMNS)
            if column not in (*TOOL_SIDE_COLUMNS, DOUBLE_COLUMN) or self.columns[index].cases
        )

    def restarted_on_fault(self) -> tuple[tuple[CaseRecord, str], ...]:
        """The passed tool-side cases whose agent died on the fault and recovered when the
        harness restarted it, each with the note that says so, in row then column order. Green
        (a supervisor restarts a crash-only agent), and listed apart: a team that requires an
        agent to survive a tool's failure in one life reads them here."""
        return tuple(
            (case, note)
            for row in self.rows
            for cell in row.cells
            for case in cell.cases
            if case.status == "passed"
            for note in [died_on_fault_note(case.notes)]
            if note is not None
        )

    def cells_in(self, state: str) -> list[tuple[Row, Cell]]:
        return [(row, cell) for row in self.rows for cell in row.cells if cell.state == state]

    def no_verdict(self) -> list[NoVerdict]:
        """Why cells are not reachable or deselected, merged: the columns that share a
        reason and the same scenarios are one entry (a black box's columns, in every row)."""
        per_column: dict[tuple[str, str, str], list[str]] = {}
        for state in ("not_reachable", "deselected"):
            for row, cell in self.cells_in(state):
                for why in cell.why or ("no reason recorded",):
                    per_column.setdefault((state, cell.column, why), []).append(row.label)
        merged: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
        for (state, column, why), labels in per_column.items():
            merged.setdefault((state, why, tuple(labels)), []).append(column)
        ran = tuple(row.label for row in self.rows if row.cell("clean").state != "not_applicable")
        return [
            NoVerdict(state, tuple(columns), labels, why, every=labels == ran and len(ran) > 1)
            for (state, why, labels), columns in merged.items()
        ]

    @property
    def headline(self) -> str:
        t = self.tally
        text = f"{t.passed}/{t.cases} cases passed, {len(self.rows)} scenarios, agent {self.agent}"
        extras = []
        if t.failed:
            unfinished = [f"{t.errored} error{'s' if t.errored > 1 else ''}"] if t.errored else []
            unfinished += [f"{t.hung} hung"] if t.hung else []
            extras.append(f"{t.failed} failed" + (f" ({', '.join(unfinished)})" if unfinished else ""))
        if t.not_reached:
            extras.append(f"{t.not_reached} not reached")
        if t.not_applicable:
            extras.append(f"{t.not_applicable} not applicable")
        unreachable = len(self.cells_in("not_reachable"))
        if unreachable:
            extras.append(f"{unreachable} cells not reachable by this agent")
        deselected = len(self.cells_in("deselected"))
        if deselected:
            extras.append(f"{deselected} cells deselected")
        if t.indeterminate:
            extras.append(f"{t.indeterminate} allowed-indeterminate")
        text += f" ({', '.join(extras)})" if extras else ""
        return f"INCOMPLETE (interrupted): {text}" if self.incomplete else text

    def groups(self) -> list[tuple[str, list[Row]]]:
        out: list[tuple[str, list[Row]]] = []
        for row in self.rows:
            if not out or out[-1][0] != row.group:
                out.append((row.group, []))
            out[-1][1].append(row)
        return out


def row_label(scenario_path: str) -> str:
    """``scenarios/send_email/send_once.yaml`` -> ``send_email/send_once``."""
    parts = PurePath(scenario_path).with_suffix("").parts
    if "scenarios" in parts:
        parts = parts[len(parts) - parts[::-1].index("scenarios") :]
    return "/".join(parts[-2:]) if len(parts) > 1 else "/".join(parts)


def _column_of(case: CaseRecord) -> str:
    return case.boundary if case.boundary in COLUMNS else "recovery"


def build_matrix(results: Results | Sequence[CaseRecord], agent: str = "") -> Matrix:
    if isinstance(results, Results):
        agent, cases = agent or results.agent, results.cases
    else:
        cases = tuple(results)
    by_row: dict[str, list[CaseRecord]] = {}
    for case in cases:
        by_row.setdefault(case.scenario_path, []).append(case)
    gaps: dict[tuple[str, str], list[NotRun]] = {}
    for gap in results.not_run if isinstance(results, Results) else ():
        gaps.setdefault((gap.scenario_path, gap.boundary), []).append(gap)
    rows = []
    for path, members in by_row.items():
        first = members[0]
        inapplicable = all(c.status == "not_applicable" for c in members) and all(
            _column_of(c) == "clean" for c in members
        )
        cells = tuple(
            Cell(column, picked, Tally.of(picked), tuple(gaps.get((path, column), ())), inapplicable)
            for column in COLUMNS
            for picked in [tuple(c for c in members if _column_of(c) == column)]
        )
        rows.append(Row(first.scenario, path, first.tools, first.idempotency, cells, Tally.of(members)))
    rows.sort(key=lambda r: (r.idempotency, r.tools, r.label))
    columns = tuple(sum((row.cells[i].tally for row in rows), Tally()) for i in range(len(COLUMNS)))
    failing = tuple(case for row in rows for cell in row.cells for case in cell.cases if case.failing)
    incomplete = isinstance(results, Results) and results.incomplete
    return Matrix(
        agent,
        tuple(rows),
        columns,
        sum((r.tally for r in rows), Tally()),
        failing,
        incomplete,
        build_scorecard(cases, agent),
        results.reachable if isinstance(results, Results) else None,
        group_causes(failing),
    )
