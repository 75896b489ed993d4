"""Results files side by side (``crashmatrix report --compare A.json B.json [C.json ...]``): the
same matrix, each cell showing every run's state and count in order (A, then B, then C), the
cells whose verdict differs highlighted and listed with the cases that changed. Rows and
cells present in only some files differ too. The scorecards (``reports.scorecard``) are set
side by side the same way, eval by eval: the view for "is agent B as good as agent A" (or
"did version 3 fix what version 2 broke"), whatever their scenarios' rows were named.

Counts are ``passed/cases`` in every cell and total, as in the single-run report
(``matrix.COUNTS``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from crashmatrix.reports.causes import cause_code
from crashmatrix.reports.html import MARKS as _HTML_MARKS
from crashmatrix.reports.html import page, scorecard_legend, table_box, text
from crashmatrix.reports.markdown import MARKS
from crashmatrix.reports.matrix import (
    COLUMNS,
    COUNTS,
    LABELS,
    Cell,
    Matrix,
    Tally,
    build_matrix,
    row_label,
)
from crashmatrix.reports.results import Results
from crashmatrix.reports.scorecard import COUNTS as SCORECARD_COUNTS
from crashmatrix.reports.scorecard import EvalRow

__all__ = [
    "CellSet",
    "Comparison",
    "EvalSet",
    "RowSet",
    "compare",
    "compare_runs",
    "render_compare_html",
    "render_compare_markdown",
    "write_comparison",
]

_EMPTY = Tally()
_ABSENT = "not_reached"  # a row or eval one run does not have: no verdict, never a pass


@dataclass(frozen=True, slots=True)
class CellSet:
    """One matrix cell in every run (None where the run has no such row)."""

    column: str
    cells: tuple[Cell | None, ...]  # one per run, in run order

    @property
    def tallies(self) -> tuple[Tally, ...]:
        return tuple(cell.tally if cell else _EMPTY for cell in self.cells)

    @property
    def states(self) -> tuple[str, ...]:
        return tuple(cell.state if cell else _ABSENT for cell in self.cells)

    @property
    def differs(self) -> bool:
        seen = {(state, t.passed, t.cases) for state, t in zip(self.states, self.tallies, strict=True)}
        return len(seen) > 1

    def changes(self) -> list[str]:
        """The cases of this cell whose status differs between runs:
        ``after_running[call_1]: passed -> failed`` (one status per run, ``absent`` where
        a run has no such case)."""
        per_run = [{c.point: c.status for c in (cell.cases if cell else ())} for cell in self.cells]
        points = list(dict.fromkeys(point for statuses in per_run for point in statuses))
        out = []
        for point in points:
            statuses = [statuses.get(point, "absent") for statuses in per_run]
            if len(set(statuses)) > 1:
                out.append(f"{point}: {' -> '.join(statuses)}")
        return out


@dataclass(frozen=True, slots=True)
class RowSet:
    scenario_path: str
    group: str
    cells: tuple[CellSet, ...]  # in COLUMNS order

    @property
    def label(self) -> str:
        return row_label(self.scenario_path)


@dataclass(frozen=True, slots=True)
class EvalSet:
    """One named eval in every run's scorecard."""

    id: str
    title: str
    rows: tuple[EvalRow | None, ...]  # one per run

    @property
    def states(self) -> tuple[str, ...]:
        return tuple(row.state if row else _ABSENT for row in self.rows)

    @property
    def differs(self) -> bool:
        return len(set(self.states)) > 1

    def why(self, letters: Sequence[str]) -> str:
        """Why each run that did not pass did not, prefixed by its letter."""
        parts = [
            f"{letter}: {row.why}"
            for letter, row in zip(letters, self.rows, strict=True)
            if row is not None and row.why and row.state != "pass"
        ]
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class Comparison:
    names: tuple[str, ...]  # one per run: "a.json (agent reference)"
    matrices: tuple[Matrix, ...]
    rows: tuple[RowSet, ...]
    evals: tuple[EvalSet, ...] = ()

    @property
    def letters(self) -> tuple[str, ...]:
        return tuple(cause_code(i) for i in range(len(self.names)))  # A, B, C, ...

    @property
    def differing(self) -> tuple[tuple[RowSet, CellSet], ...]:
        return tuple((row, cell) for row in self.rows for cell in row.cells if cell.differs)

    @property
    def differing_evals(self) -> tuple[EvalSet, ...]:
        return tuple(pair for pair in self.evals if pair.differs)


def compare(a: Results, b: Results, a_name: str = "A", b_name: str = "B") -> Comparison:
    """Two runs side by side (``compare_runs`` for any number)."""
    return compare_runs((a, b), (a_name, b_name))


def compare_runs(runs: Sequence[Results], names: Sequence[str] | None = None) -> Comparison:
    """Any number of runs (two or more) side by side, in the order given."""
    if len(runs) < 2:
        raise ValueError(f"compare needs two results files or more, got {len(runs)}")
    names = tuple(names) if names is not None else tuple(cause_code(i) for i in range(len(runs)))
    if len(names) != len(runs):
        raise ValueError(f"{len(names)} names for {len(runs)} results files")
    matrices = tuple(build_matrix(run) for run in runs)
    by_path = [{row.scenario_path: row for row in m.rows} for m in matrices]
    paths = list(dict.fromkeys(path for rows in by_path for path in rows))
    rows = []
    for path in paths:
        present = [rows.get(path) for rows in by_path]
        group = next(row.group for row in present if row is not None)
        cells = tuple(
            CellSet(column, tuple(row.cell(column) if row else None for row in present)) for column in COLUMNS
        )
        rows.append(RowSet(path, group, cells))
    by_eval = [{row.id: row for row in m.scorecard.rows} for m in matrices]
    eval_ids = list(dict.fromkeys(eval_id for evals in by_eval for eval_id in evals))
    evals = tuple(
        EvalSet(
            eval_id,
            next(evals[eval_id].title for evals in by_eval if eval_id in evals),
            tuple(evals.get(eval_id) for evals in by_eval),
        )
        for eval_id in eval_ids
    )
    return Comparison(names, matrices, tuple(rows), evals)


def _top_cause(matrix: Matrix) -> str:
    causes = list(matrix.causes)
    if not causes:
        return "no failure"
    return f"top cause {causes[0].label} ({causes[0].counts})"


# ---------------------------------------------------------------------------- Markdown


def _eval_label(row: EvalRow | None, marks: dict[str, str]) -> str:
    """A run's verdict on one eval with its count (``scorecard.COUNTS``): ``❌ fail 1/2``."""
    if row is None:
        return f"{marks[_ABSENT]} {_ABSENT.replace('_', ' ')}"
    return f"{marks[row.state]} {row.state.replace('_', ' ')}" + (f" {row.ratio}" if row.cases else "")


def _md_cell(cell: Cell | None) -> str:
    tally = cell.tally if cell else _EMPTY
    state = cell.state if cell else _ABSENT
    if not tally.cases:
        return MARKS[state] + (
            f" {state.replace('_', ' ')}" if state in ("not_reachable", "deselected") else ""
        )
    return f"{MARKS[state]} {tally.ratio}"


def _md_total(tally: Tally) -> str:
    return tally.ratio if tally.cases else "–"


def render_compare_markdown(comparison: Comparison) -> str:
    c = comparison
    letters = c.letters
    lines = [
        f"## crashmatrix comparison: {len(c.differing)} cells differ, {len(c.differing_evals)} evals differ",
        "",
    ]
    lines += [
        f"- **{letter}** {name}: {m.headline}; {m.scorecard.summary}; {_top_cause(m)}"
        for letter, name, m in zip(letters, c.names, c.matrices, strict=True)
    ]
    lines.append("")
    order = " / ".join(letters)
    if c.evals:
        lines += [
            f"### Scorecard ({order})",
            "",
            "| eval | " + " | ".join(letters) + " | why |",
            "|---|" + "---|" * len(letters) + "---|",
        ]
        for pair in c.evals:
            shown = [_eval_label(row, MARKS) for row in pair.rows]
            if pair.differs:
                shown = [f"**{s}**" for s in shown]
            why = pair.why(letters).replace("|", "/")
            lines.append(f"| {pair.title} | " + " | ".join(shown) + f" | {why} |")
        lines += ["", SCORECARD_COUNTS, ""]
    if c.differing:
        lines += ["### Differing cells", ""]
        for row, cell in c.differing:
            states = " → ".join(
                f"{letter} {_md_cell(one)}" for letter, one in zip(letters, cell.cells, strict=True)
            )
            lines.append(f"- **{row.label}** · {cell.column}: {states}")
            lines += [f"  - `{change}`" for change in cell.changes()]
        lines.append("")
    head = ["scenario", *(LABELS[col] for col in COLUMNS)]
    lines += [f"### Matrix ({order})", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in c.rows:
        grid = []
        for cell in row.cells:
            both = " / ".join(_md_cell(one) for one in cell.cells)
            grid.append(f"**{both}**" if cell.differs else both)
        lines.append(f"| {row.label} | " + " | ".join(grid) + " |")
    totals = [" / ".join(_md_total(m.columns[index]) for m in c.matrices) for index in range(len(COLUMNS))]
    lines.append("| **total** | " + " | ".join(totals) + " |")
    lines += ["", f"{COUNTS}; **bold**: the runs differ there", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- HTML


def _html_part(cell: Cell | None, letter: str) -> str:
    tally = cell.tally if cell else _EMPTY
    state = cell.state if cell else _ABSENT
    label = _HTML_MARKS[state] + (f" {tally.ratio}" if tally.cases else "")
    tip = "; ".join(cell.why) if cell and state in ("not_reachable", "deselected") else state
    if cell and tally.cases:
        tip = tally.spelled
    return (
        f'<span class="{state}" data-run="{letter}" title="{text(f"{letter}: {tip}")}" '
        f'style="padding:0 4px;border-radius:3px">{text(label)}</span>'
    )


def _html_parts(cells: Sequence[Cell | None], letters: Sequence[str]) -> str:
    return " ".join(_html_part(cell, letter) for cell, letter in zip(cells, letters, strict=True))


def render_compare_html(comparison: Comparison) -> str:
    c = comparison
    letters = c.letters
    order = " then ".join(letters)
    head = "".join(f'<th data-col="{col}" title="{col}">{text(LABELS[col])}</th>' for col in COLUMNS)
    rows = []
    last_group = None
    for row in c.rows:
        if row.group != last_group:
            rows.append(f'<tr class="group"><th colspan="{len(COLUMNS) + 1}">{text(row.group)}</th></tr>')
            last_group = row.group
        cells = "".join(
            f'<td data-col="{cell.column}" class="{"differs" if cell.differs else ""}"'
            f' title="{text("; ".join(cell.changes()) or "same")}">'
            f"{_html_parts(cell.cells, letters)}</td>"
            for cell in row.cells
        )
        name = f'<th scope="row" title="{text(row.scenario_path)}">{text(row.label)}</th>'
        rows.append(f'<tr class="row">{name}{cells}</tr>')
    foot = "".join(
        f'<td class="total" data-total="{col}">'
        + " / ".join(_md_total(m.columns[index]) for m in c.matrices)
        + "</td>"
        for index, col in enumerate(COLUMNS)
    )
    changed = "".join(
        f"<li><b>{text(row.label)}</b> · {text(cell.column)}: "
        + " → ".join(_html_part(one, letter) for one, letter in zip(cell.cells, letters, strict=True))
        + "<ul>"
        + "".join(f"<li><code>{text(change)}</code></li>" for change in cell.changes())
        + "</ul></li>"
        for row, cell in c.differing
    )
    differences = f'<section id="differences"><h2>Differing cells</h2><ul>{changed}</ul></section>'
    eval_rows = "".join(
        f'<tr class="{"differs" if pair.differs else ""}"><th scope="row">{text(pair.title)}</th>'
        + "".join(
            f'<td class="eval {state}">{text(_eval_label(row, _HTML_MARKS))}</td>'
            for state, row in zip(pair.states, pair.rows, strict=True)
        )
        + f'<td class="why dim">{text(pair.why(letters))}</td></tr>'
        for pair in c.evals
    )
    letter_heads = "".join(f"<th>{letter}</th>" for letter in letters)
    scorecards = (
        f'<section id="scorecard"><h2>Scorecards side by side: {len(c.differing_evals)} evals differ</h2>'
        + scorecard_legend()
        + table_box(
            f'<table class="matrix scorecard"><thead><tr><th>eval</th>{letter_heads}<th>why</th></tr></thead>'
            f"<tbody>{eval_rows}</tbody></table>"
        )
        + "</section>"
        if c.evals
        else ""
    )
    runs = "<br>".join(
        f"<b>{letter}</b> {text(name)}: {text(m.headline)}; {text(m.scorecard.summary)}; "
        f"{text(_top_cause(m))}"
        for letter, name, m in zip(letters, c.names, c.matrices, strict=True)
    )
    body = (
        f'<header><h1>crashmatrix comparison</h1><p class="headline {"bad" if c.differing else "ok"}">'
        f"{len(c.differing)} cells differ, {len(c.differing_evals)} evals differ</p>"
        f'<p id="runs">{runs}</p></header>'
        f'<section id="matrix"><h2>Matrix: {order} in every cell</h2><div class="legend"><span>'
        '<span class="swatch differs" style="outline:3px solid #e0a800">&nbsp;</span>'
        f'cell differs</span><span class="dim">{text(COUNTS)}</span></div>'
        + table_box(
            f'<table class="matrix"><thead><tr><th>scenario</th>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody>"
            f'<tfoot><tr id="totals"><th scope="row">total</th>{foot}</tr></tfoot></table>',
            tall=True,
        )
        + "</section>"
        + (differences if changed else "")
        + scorecards
    )
    return page(f"crashmatrix comparison: {len(c.differing)} cells differ", body, script="")


def write_comparison(comparison: Comparison, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md, html_path = out_dir / "compare.md", out_dir / "compare.html"
    md.write_text(render_compare_markdown(comparison), encoding="utf-8")
    html_path.write_text(render_compare_html(comparison), encoding="utf-8")
    return md, html_path
