"""The matrix as Markdown: ``matrix.md`` and the GitHub Actions job summary.

The failures' causes come first (``reports.causes``: each with its counts and one case to
rerun), then the matrix, each failing cell naming its causes by code (``❌ 0/1 [A,C]``),
then every failure with its detail. Counts are ``passed/cases`` (``matrix.COUNTS``).
GitHub refuses a step summary over 1 MiB, so ``render_markdown(..., max_bytes=...)`` gives
up detail in a fixed order until it fits: first the per-cell matrix (kept as per-row
totals), then the failures' detail (kept as one line each), then failures themselves
(the count of those left out is said). The causes always stay.
"""

from __future__ import annotations

from crashmatrix.harness.core.evals import CRASH_QUESTIONS
from crashmatrix.harness.verdict.expectations import show_value
from crashmatrix.reports.causes import Causes, after_status, codes, reasons
from crashmatrix.reports.matrix import COLUMNS, COUNTS, LABELS, Matrix, Row
from crashmatrix.reports.results import CaseRecord
from crashmatrix.reports.scorecard import COUNTS as SCORECARD_COUNTS
from crashmatrix.reports.scorecard import EvalRow, Scorecard
from crashmatrix.reports.timeline import summary

__all__ = ["MARKS", "render_markdown"]

MARKS = {
    "pass": "✅",
    "fail": "❌",
    "indeterminate": "🟨",
    "not_reached": "⬜",
    "not_reachable": "🚫",
    "deselected": "⏭",
    "not_applicable": "➖",
}
# Cells that hold no verdict say what they are in words too: a mark alone is easy to misread.
_WORDS = {"not_reachable": "not reachable", "deselected": "deselected"}
_LEGEND = (
    f"{MARKS['pass']} pass · {MARKS['fail']} fail · {MARKS['indeterminate']} allowed-indeterminate "
    f"(passed; the expectation allowed a set of outcomes) · {MARKS['not_reached']} not reached "
    f"(a case ran but its point never happened, or no case and no reason) · "
    f"{MARKS['not_reachable']} not reachable by this agent (it cannot be killed there; why below) · "
    f"{MARKS['deselected']} deselected (by --crash-boundary, the scenario's cover, "
    f"--no-recovery-crashes or pytest's -k/-m/--shard) · {MARKS['not_applicable']} not applicable "
    "to this agent · "
    f"{COUNTS} · [A,C]: the causes of the cell's failures (Causes above)"
)


def _code(text: str) -> str:
    # A backtick inside inline code would end it; doubling the fence is Markdown's escape.
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _cell_text(matrix: Matrix, row: Row, column: str) -> str:
    cell = row.cell(column)
    tally, state = cell.tally, cell.state
    count = f" {tally.ratio}" if tally.cases else ""
    if state in _WORDS:
        return f"{MARKS[state]} {_WORDS[state]}{count}"
    if not tally.cases:
        return MARKS["not_reached"]
    named = codes(matrix.causes_of(cell))
    return f"{MARKS[state]}{count}" + (f" [{named}]" if named else "")


def _causes(causes: Causes) -> list[str]:
    """Each cause with its counts and one case that shows it, with its rerun line."""
    if not len(causes):
        return []
    lines = [
        f"### Causes ({len(causes)})",
        "",
        "Invariants first, then expectations; a case counts under each cause it shows.",
        "",
    ]
    for cause in causes:
        case = cause.representative
        kind = "" if cause.kind == cause.key else f"{cause.kind} "
        lines.append(
            f"- **{cause.code}** {kind}**{_escape(cause.key)}**: {cause.counts}; e.g. "
            f"{_code(case.title)}: {_escape(cause.detail)} — {_code(case.repro)}"
        )
    return [*lines, ""]


def _not_run(matrix: Matrix) -> list[str]:
    """Why cells are not reachable or deselected: one line per reason, with its columns and
    scenarios (``Matrix.no_verdict``)."""
    entries = matrix.no_verdict()
    if not entries:
        return []
    lines = ["#### Cells with no verdict, and why", ""]
    if matrix.reachable is not None:
        lines += [
            f"This agent can be killed at: {', '.join(_code(b) for b in matrix.reachable) or 'nothing'}.",
            "",
        ]
    for entry in entries:
        columns = ", ".join(f"**{LABELS[c]}** ({_code(c)})" for c in entry.columns)
        lines.append(
            f"- {MARKS[entry.state]} {_WORDS[entry.state]} at {columns} in {_escape(entry.where())}: "
            f"{_escape(entry.why)}"
        )
    return [*lines, ""]


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _failure_detail(case: CaseRecord) -> list[str]:
    lines = [
        f"#### {MARKS['fail']} {_code(case.title)} — {case.status} ({case.lives} lives, {case.seconds:.1f}s)"
    ]
    lines += [f"- {_escape(reason)}" for reason in reasons(case)]
    if case.world_diff:
        diff = "; ".join(
            f"{d['key']}: {show_value(d['clean'])} → {show_value(d['observed'])}" for d in case.world_diff
        )
        lines.append(f"- world vs clean run: {_escape(diff)}")
    lines += _second_crash_detail(case)
    lines += ["", "```", case.repro, "```", ""]
    return lines


def _second_crash_detail(case: CaseRecord) -> list[str]:
    """Each second crash of a depth-2 case that did not pass: why, its timeline in one
    line and its own rerun line (the block below reruns only the first of them)."""
    lines = []
    for second in case.recovery_points:
        if second.get("status") == "passed":
            continue
        why = "; ".join(second.get("reasons") or ())
        lines.append(
            f"- second crash at {_code(str(second.get('point', '')))}: {second.get('status')}"
            + (f" — {_escape(why)}" if why else "")
        )
        if second.get("timeline"):
            lines.append(f"  - timeline: {_escape(summary(second['timeline']))}")
        if second.get("repro"):
            lines.append(f"  - rerun: {_code(str(second['repro']))}")
    return lines


def _failure_line(case: CaseRecord) -> str:
    reason = _escape(after_status(case))
    return f"- {MARKS['fail']} {_code(case.title)} {case.status}: {reason} — {_code(case.repro)}"


def _matrix_table(matrix: Matrix) -> list[str]:
    head = ["scenario", *(LABELS[c] for c in COLUMNS), "passed"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for group, rows in matrix.groups():
        lines.append(f"| **{_escape(group)}** |" + " |" * (len(head) - 1))
        for row in rows:
            cells = [_cell_text(matrix, row, c) for c in COLUMNS]
            lines.append(f"| {_escape(row.label)} | " + " | ".join(cells) + f" | {row.tally.ratio} |")
    totals = [t.ratio if t.cases else "–" for t in matrix.columns]
    lines.append("| **total** | " + " | ".join(totals) + f" | **{matrix.tally.ratio}** |")
    return lines


def _row_totals(matrix: Matrix) -> list[str]:
    lines = ["| scenario | passed | failed |", "|---|---|---|"]
    for row in matrix.rows:
        t = row.tally
        lines.append(f"| {_escape(row.label)} | {t.ratio} | {t.failed} |")
    lines.append(f"| **total** | **{matrix.tally.ratio}** | {matrix.tally.failed} |")
    return lines


def _eval_mark(row: EvalRow) -> str:
    """A row's mark and count, ``✅ 3/3`` / ``❌ 1/3`` (``scorecard.COUNTS``); a row with no
    case has only its mark: ``0/0`` would say nothing."""
    return MARKS[row.state] + (f" {row.ratio}" if row.cases else "")


def _scorecard(card: Scorecard) -> list[str]:
    """The named evals: seed 004's list, then the crash evals as one line per crash column
    and idempotency class with its questions."""
    if not card.rows:
        return []
    lines = [f"### Scorecard: {card.summary}", ""]
    lines += ["| eval (seed 004) | verdict | passed | why |", "|---|---|---|---|"]
    for row in card.of_kind("seed004"):
        verdict = f"{MARKS[row.state]} {row.state.replace('_', ' ')}"
        lines.append(f"| {_escape(row.title)} | {verdict} | {row.ratio} | {_escape(row.why)} |")
    titles = [q.title for q in CRASH_QUESTIONS.values()]
    lines += ["", "| crash point | class of the crashed call | " + " | ".join(titles) + " |"]
    lines.append("|---|---|" + "---|" * len(titles))
    for column, cls, rows in card.crash_grid():
        marks = ["—" if r is None else _eval_mark(r) for r in rows]
        lines.append(f"| {LABELS.get(column, column)} | {cls} | " + " | ".join(marks) + " |")
    lines += [
        "",
        f"{MARKS['pass']} pass · {MARKS['fail']} fail · {MARKS['not_applicable']} not applicable · "
        f"{MARKS['not_reached']} not reached · {SCORECARD_COUNTS} · a case answers the rows of the "
        "class of the call it crashed · — not asked of this class: running an idempotent or "
        "conditional tool again is its contract.",
    ]
    broken = [row for row in card.rows if row.state == "fail" and row.kind == "crash"]
    if broken:
        lines += ["", f"Failing crash evals ({len(broken)}):", ""]
        lines += [f"- **{_escape(row.title)}** {row.ratio}: {_escape(row.why)}" for row in broken]
    return [*lines, ""]


def _restarted(matrix: Matrix, most: int | None) -> list[str]:
    """The passed tool-side cases whose agent died on the fault and recovered when restarted
    (``Matrix.restarted_on_fault``), each with its note; ``most`` of them when cut to fit."""
    restarted = matrix.restarted_on_fault()
    if not restarted:
        return []
    lines = [
        f"### Passed after dying on a tool-side fault ({len(restarted)})",
        "",
        "Green: the agent exited on the tool's failure and, restarted as a supervisor would, "
        "recovered. A team that requires surviving a tool failure in one life reads these as red.",
        "",
    ]
    shown = restarted if most is None else restarted[:most]
    lines += [f"- {_code(case.title)}: {_escape(note)}" for case, note in shown]
    if len(shown) < len(restarted):
        lines.append(f"- … and {len(restarted) - len(shown)} more (see matrix.json)")
    return [*lines, ""]


def _assemble(matrix: Matrix, *, detail: bool, cells: bool, failures: int | None) -> str:
    lines = [f"## crashmatrix: {matrix.headline}", ""]
    lines += _causes(matrix.causes)
    lines += ["### Matrix" if cells else "### Per scenario", ""]
    lines += _matrix_table(matrix) if cells else _row_totals(matrix)
    lines += ["", _LEGEND if cells else f"{COUNTS} (per-cell matrix left out to fit; see matrix.html)", ""]
    if cells:
        lines += _not_run(matrix)
    failing = matrix.failing if failures is None else matrix.failing[:failures]
    if matrix.failing:
        lines += [f"### Failures ({len(matrix.failing)})", ""]
        for case in failing:
            lines += _failure_detail(case) if detail else [_failure_line(case)]
        if len(failing) < len(matrix.failing):
            lines.append(f"- … and {len(matrix.failing) - len(failing)} more failures (see matrix.json)")
        lines.append("")
    lines += _restarted(matrix, failures)
    lines += _scorecard(matrix.scorecard)
    return "\n".join(lines)


def render_markdown(matrix: Matrix, *, max_bytes: int | None = None) -> str:
    text = _assemble(matrix, detail=True, cells=True, failures=None)
    if max_bytes is None or len(text.encode()) <= max_bytes:
        return text
    for detail, cells in ((True, False), (False, False)):
        text = _assemble(matrix, detail=detail, cells=cells, failures=None)
        if len(text.encode()) <= max_bytes:
            return text
    # Halve the failures listed until it fits; the headline and the count always stay.
    keep = len(matrix.failing)
    while keep:
        keep //= 2
        text = _assemble(matrix, detail=False, cells=False, failures=keep)
        if len(text.encode()) <= max_bytes:
            return text
    # Not even the scorecard fits (it grows with the columns): the headline, and how many
    # failures matrix.json has.
    head = f"## crashmatrix: {matrix.headline}\n"
    if matrix.failing:
        head += f"\n- … and {len(matrix.failing)} more failures (see matrix.json)\n"
    return head if len(head.encode()) <= max_bytes else ""
