"""The matrix as a compact text table for the end of pytest's terminal summary.

Fits 80 columns (wider terminals get whole scenario names): the failures' causes first
(``reports.causes``: one line each with its counts, then the rerun line of one case that
shows it), then the failures one by one, then one mark per crash point, each row's count
and the total (``passed`` over ``cases``, as everywhere: ``matrix.COUNTS``), then the
columns' legend with each column's count. A column is three characters (two-letter heads, one mark): counts of
hundreds live in the legend, where they do not need a column's width.
"""

from __future__ import annotations

from crashmatrix.harness.core.evals import CRASH_QUESTIONS
from crashmatrix.reports.causes import Causes, after_status
from crashmatrix.reports.matrix import COLUMNS, LABELS, SHORT, Matrix
from crashmatrix.reports.scorecard import COUNTS as SCORECARD_COUNTS
from crashmatrix.reports.scorecard import EvalRow, Scorecard

__all__ = ["render_causes", "render_scorecard", "render_terminal", "symbols"]

_UNICODE = {
    "pass": "✓",
    "fail": "✗",
    "indeterminate": "~",
    "not_reached": "·",
    "not_reachable": "⊘",
    "deselected": "»",
    "not_applicable": "-",
}
_ASCII = {
    "pass": "+",
    "fail": "X",
    "indeterminate": "~",
    "not_reached": ".",
    "not_reachable": "/",
    "deselected": ">",
    "not_applicable": "-",
}
_MAX_REASONS = 6
_MAX_CAUSES = 5
_NAME_WIDTH = 30  # at least; a wider terminal gives long scenario names the room
_CELL = 3
_TOTAL = 8  # the row's passed/cases


def symbols(encoding: str | None) -> dict[str, str]:
    """Unicode marks when the terminal can print them (CI logs can be ASCII-only)."""
    try:
        "".join(_UNICODE.values()).encode(encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return _ASCII
    return _UNICODE


def _cell(state: str, marks: dict[str, str]) -> str:
    # A mark only: a number here would be a second kind of count (the counts are the
    # ``passed`` / ``cases`` lines and the row's passed/cases).
    return marks[state].ljust(_CELL)


def render_causes(causes: Causes, *, most: int = _MAX_CAUSES) -> list[str]:
    """The top causes, two lines each: the cause with its counts, one case's rerun line."""
    if not len(causes):
        return []
    lines = [f"causes ({len(causes)}; a case counts under each cause it shows):"]
    shown: set[str] = set()
    for cause in list(causes)[:most]:
        case = cause.representative
        lines.append(f"  {cause.code} {cause.label}: {cause.counts}, e.g. {case.title}")
        if case.node_id not in shown:  # one case often shows several causes: its line once
            lines.append(f"      rerun: {case.repro}")
            shown.add(case.node_id)
    if len(causes) > most:
        rest = ", ".join(f"{c.key} ({len(c.cases)})" for c in list(causes)[most:])
        lines.append(f"  ... and {rest}")
    return lines


def render_terminal(
    matrix: Matrix, *, encoding: str | None = "utf-8", max_failures: int = 10, width: int = 80
) -> list[str]:
    marks = symbols(encoding)
    lines = [f"crashmatrix: {matrix.headline}"]
    lines += render_causes(matrix.causes)
    if matrix.failing:
        lines.append(f"failures ({len(matrix.failing)}):")
        for case in matrix.failing[:max_failures]:
            lines.append(f"  {marks['fail']} {case.title} {case.status}: {after_status(case)}")
            lines.append(f"      rerun: {case.repro}")
        if len(matrix.failing) > max_failures:
            lines.append(f"  ... and {len(matrix.failing) - max_failures} more (see matrix.html)")
    restarted = matrix.restarted_on_fault()
    if restarted:
        lines.append(
            f"passed after dying on a tool-side fault ({len(restarted)}): restarted, the agent "
            "recovered (each case's note in matrix.html)"
        )
        lines += [f"  {marks['pass']} {case.title}" for case, _ in restarted[:max_failures]]
        if len(restarted) > max_failures:
            lines.append(f"  ... and {len(restarted) - max_failures} more (see matrix.md)")
    card = matrix.scorecard
    if card.rows:
        lines.append(f"scorecard: {card.summary}")
        broken = [eval_row for eval_row in card.rows if eval_row.state == "fail"]
        for eval_row in broken[:max_failures]:
            lines.append(f"  {marks['fail']} {eval_row.title} {eval_row.ratio}: {eval_row.why}")
        if len(broken) > max_failures:
            lines.append(f"  ... and {len(broken) - max_failures} more (see matrix.md)")
    # A column no row can reach (the reference agent's after_tool_call_pending, a black box's
    # ledger boundaries) is not drawn: its reason is a line under the table (_not_run). Nor is
    # a tool-side column no case ran in (``Matrix.drawn``).
    drawn = matrix.drawn()
    shown = [
        i
        for i in range(len(COLUMNS))
        if COLUMNS[i] in drawn
        and (not matrix.rows or any(row.cells[i].state != "not_reachable" for row in matrix.rows))
    ]
    longest = max((len(row.label) for row in matrix.rows), default=0) + 3  # indent and a gap
    name_width = max(_NAME_WIDTH, min(longest, width - len(shown) * _CELL - _TOTAL))
    header = "scenario".ljust(name_width) + "".join(SHORT[COLUMNS[i]].ljust(_CELL) for i in shown) + "passed"
    lines.append(header)
    for group, rows in matrix.groups():
        lines.append(f"[{group if marks is _UNICODE else group.replace('·', '-')}]")
        for row in rows:
            fits = name_width - 3  # two of indent, one of gap
            cut = "…" if marks is _UNICODE else "~"
            name = row.label if len(row.label) <= fits else row.label[: fits - 1] + cut
            cells = "".join(_cell(row.cells[i].state, marks) for i in shown)
            lines.append(f"  {name}".ljust(name_width) + cells + row.tally.ratio)
    lines.append("total".ljust(name_width + len(shown) * _CELL) + matrix.tally.ratio)
    lines.append("n/m = passed/cases; a case not reached or not applicable is never a pass")
    lines.append(
        f"{marks['pass']} pass  {marks['fail']} fail  "
        f"{marks['indeterminate']} allowed-indeterminate  {marks['not_reached']} not reached"
    )
    lines.append(
        f"{marks['not_reachable']} not reachable by this agent  {marks['deselected']} deselected  "
        f"{marks['not_applicable']} not applicable to this agent"
    )
    lines += _not_run(matrix, marks)
    legend = [
        f"{SHORT[COLUMNS[i]]} {COLUMNS[i]} {matrix.columns[i].ratio if matrix.columns[i].cases else '-'}"
        for i in shown
    ]
    lines += _wrapped("columns, passed/cases: ", legend, width)
    return lines


def _wrapped(head: str, parts: list[str], width: int) -> list[str]:
    """``parts`` joined by ", " on lines of at most ``width`` (a part is never split)."""
    lines, line = [], head
    for i, part in enumerate(parts):
        piece = part + ("," if i < len(parts) - 1 else "")
        if len(line) + len(piece) > width and line.strip():
            lines.append(line.rstrip())
            line = "  "
        line += piece + " "
    lines.append(line.rstrip())
    return lines


def _not_run(matrix: Matrix, marks: dict[str, str]) -> list[str]:
    """One line per reason cells are not reachable or deselected, with their columns."""
    columns: dict[tuple[str, str], list[str]] = {}
    for entry in matrix.no_verdict():
        named = columns.setdefault((entry.state, entry.why), [])
        named += [SHORT[c] for c in entry.columns if SHORT[c] not in named]
    lines = [
        f"{marks[state]} {' '.join(shorts)}: {why}"
        for (state, why), shorts in list(columns.items())[:_MAX_REASONS]
    ]
    if len(columns) > _MAX_REASONS:
        lines.append(f"... and {len(columns) - _MAX_REASONS} more reasons (see matrix.md)")
    return lines


def _eval_mark(row: EvalRow | None, marks: dict[str, str]) -> str:
    """A row's mark and count (``scorecard.COUNTS``): ``v 3/3``, ``X 1/3``; blank where the
    question is not asked of the class, the mark alone where no case answers it."""
    if row is None:
        return " "
    return marks[row.state] + (f" {row.ratio}" if row.cases else "")


_GRID = 10  # a crash-eval cell: a mark and a count up to "999/999"
_NAME = 36  # "  before result, non_idempotent" and a gap: the grid fits 80 columns


def render_scorecard(card: Scorecard, *, encoding: str | None = "utf-8") -> list[str]:
    """The whole scorecard as text (``crashmatrix eval``): seed 004's evals one per line with
    its count and the reason of any that is not a pass, then the crash evals as a grid."""
    marks = symbols(encoding)
    lines = [card.headline, "", "seed 004 evals:"]
    for row in card.of_kind("seed004"):
        lines.append(f"  {_eval_mark(row, marks)} {row.title}" + (f"  ({row.why})" if row.why else ""))
    questions = list(CRASH_QUESTIONS.values())
    lines += [
        "",
        "crash evals: crashed call's class".ljust(_NAME)
        + "".join(q.title.split()[-1].ljust(_GRID) for q in questions),
    ]
    for column, cls, rows in card.crash_grid():
        name = f"  {LABELS.get(column, column)}, {cls}"
        lines.append(name.ljust(_NAME) + "".join(_eval_mark(r, marks).ljust(_GRID) for r in rows))
    lines.append("  columns: " + "; ".join(f"{q.title.split()[-1]} = {q.title}" for q in questions))
    lines.append(
        f"  {marks['pass']} pass  {marks['fail']} fail  "
        f"{marks['not_applicable']} not applicable  {marks['not_reached']} not reached  "
        "blank: not asked of this class"
    )
    lines.append(f"  {SCORECARD_COUNTS}")
    broken = [row for row in card.rows if row.state == "fail"]
    if broken:
        lines += ["", f"failing evals ({len(broken)}):"]
        for row in broken:
            lines.append(f"  {marks['fail']} {row.id} {row.ratio}: {row.why}")
            lines.append(f"      rerun: {row.repro}")
    return lines
