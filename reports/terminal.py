"""The matrix as a compact text table for the end of pytest's terminal summary.

Fits 80 columns: one two-letter column per crash point, a legend line, failures first
(one line each with its rerun command) so the last thing on screen is what to do next.
"""

from __future__ import annotations

from crashmatrix.harness.core.evals import CRASH_QUESTIONS
from crashmatrix.reports.matrix import COLUMNS, LABELS, SHORT, Matrix
from crashmatrix.reports.scorecard import EvalRow, Scorecard

__all__ = ["render_scorecard", "render_terminal", "symbols"]

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
_NAME_WIDTH = 30
_CELL = 4


def symbols(encoding: str | None) -> dict[str, str]:
    """Unicode marks when the terminal can print them (CI logs can be ASCII-only)."""
    try:
        "".join(_UNICODE.values()).encode(encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return _ASCII
    return _UNICODE


def _cell(state: str, failed: int, marks: dict[str, str]) -> str:
    text = marks[state] + (str(failed) if state == "fail" and failed > 1 else "")
    return text.ljust(_CELL)


def render_terminal(matrix: Matrix, *, encoding: str | None = "utf-8", max_failures: int = 20) -> list[str]:
    marks = symbols(encoding)
    lines = [f"crashmatrix: {matrix.headline}"]
    if matrix.failing:
        lines.append(f"failures ({len(matrix.failing)}):")
        for case in matrix.failing[:max_failures]:
            lines.append(f"  {marks['fail']} {case.title} {case.status}: {case.reasons()[0]}")
            lines.append(f"      rerun: {case.repro}")
        if len(matrix.failing) > max_failures:
            lines.append(f"  ... and {len(matrix.failing) - max_failures} more (see matrix.html)")
    card = matrix.scorecard
    if card.rows:
        lines.append(f"scorecard: {card.summary}")
        broken = [eval_row for eval_row in card.rows if eval_row.state == "fail"]
        for eval_row in broken[:max_failures]:
            lines.append(f"  {marks['fail']} {eval_row.title}: {eval_row.why}")
        if len(broken) > max_failures:
            lines.append(f"  ... and {len(broken) - max_failures} more (see matrix.md)")
    header = "scenario".ljust(_NAME_WIDTH) + "".join(SHORT[c].ljust(_CELL) for c in COLUMNS) + "passed"
    lines.append(header)
    for group, rows in matrix.groups():
        lines.append(f"[{group if marks is _UNICODE else group.replace('·', '-')}]")
        for row in rows:
            fits = _NAME_WIDTH - 3  # two of indent, one of gap
            cut = "…" if marks is _UNICODE else "~"
            name = row.label if len(row.label) <= fits else row.label[: fits - 1] + cut
            cells = "".join(_cell(c.state, c.tally.failed, marks) for c in row.cells)
            lines.append(f"  {name}".ljust(_NAME_WIDTH) + cells + row.tally.ratio)
    lines.append(
        "cases".ljust(_NAME_WIDTH)
        + "".join(str(t.cases).ljust(_CELL) for t in matrix.columns)
        + str(matrix.tally.cases)
    )
    lines.append(
        "failed".ljust(_NAME_WIDTH)
        + "".join(str(t.failed).ljust(_CELL) for t in matrix.columns)
        + str(matrix.tally.failed)
    )
    lines.append(
        f"{marks['pass']} pass  {marks['fail']} fail (number: how many)  "
        f"{marks['indeterminate']} allowed-indeterminate  {marks['not_reached']} not reached"
    )
    lines.append(
        f"{marks['not_reachable']} not reachable by this agent  {marks['deselected']} deselected  "
        f"{marks['not_applicable']} not applicable to this agent"
    )
    lines += _not_run(matrix, marks)
    legend = [f"{SHORT[c]} {c}" for c in COLUMNS]
    lines += [", ".join(legend[:4]), ", ".join(legend[4:7]), ", ".join(legend[7:])]
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
    if row is None:
        return " "
    return marks[row.state] + (f"{len(row.failing)}" if row.state == "fail" else "")


def render_scorecard(card: Scorecard, *, encoding: str | None = "utf-8") -> list[str]:
    """The whole scorecard as text (``crashmatrix eval``): seed 004's evals one per line with
    the reason of any that is not a pass, then the crash evals as a grid."""
    marks = symbols(encoding)
    lines = [card.headline, "", "seed 004 evals:"]
    for row in card.of_kind("seed004"):
        lines.append(f"  {marks[row.state]} {row.title}" + (f"  ({row.why})" if row.why else ""))
    questions = list(CRASH_QUESTIONS.values())
    lines += ["", "crash evals:".ljust(34) + "".join(q.title.split()[-1].ljust(8) for q in questions)]
    for column, cls, rows in card.crash_grid():
        name = f"  {LABELS.get(column, column)}, {cls}"
        lines.append(name.ljust(34) + "".join(_eval_mark(r, marks).ljust(8) for r in rows))
    lines.append("  columns: " + "; ".join(f"{q.title.split()[-1]} = {q.title}" for q in questions))
    lines.append(
        f"  {marks['pass']} pass  {marks['fail']} fail (number: cases)  "
        f"{marks['not_applicable']} not applicable  {marks['not_reached']} not reached  "
        "blank: not asked of this class"
    )
    broken = [row for row in card.rows if row.state == "fail"]
    if broken:
        lines += ["", f"failing evals ({len(broken)}):"]
        for row in broken:
            lines.append(f"  {marks['fail']} {row.id}: {row.why}")
            lines.append(f"      rerun: {row.repro}")
    return lines
