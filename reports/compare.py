"""Two results files side by side (``crashmatrix report --compare A.json B.json``): the same
matrix, each cell showing A then B, and the cells whose verdict differs highlighted and
listed with the cases that changed. Rows and cells present in only one file differ too.
The two scorecards (``reports.scorecard``) are set side by side the same way, eval by eval:
the view for "is agent B as good as agent A", whatever their scenarios' rows were named."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from crashmatrix.reports.html import MARKS as _HTML_MARKS
from crashmatrix.reports.html import page, text
from crashmatrix.reports.markdown import MARKS
from crashmatrix.reports.matrix import COLUMNS, LABELS, Cell, Matrix, Tally, build_matrix, row_label
from crashmatrix.reports.results import Results
from crashmatrix.reports.scorecard import EvalRow

__all__ = [
    "CellPair",
    "Comparison",
    "EvalPair",
    "RowPair",
    "compare",
    "render_compare_html",
    "render_compare_markdown",
    "write_comparison",
]

_EMPTY = Tally()


@dataclass(frozen=True, slots=True)
class CellPair:
    column: str
    a: Cell | None
    b: Cell | None

    @property
    def a_tally(self) -> Tally:
        return self.a.tally if self.a else _EMPTY

    @property
    def b_tally(self) -> Tally:
        return self.b.tally if self.b else _EMPTY

    @property
    def a_state(self) -> str:
        return self.a.state if self.a else "not_reached"

    @property
    def b_state(self) -> str:
        return self.b.state if self.b else "not_reached"

    @property
    def differs(self) -> bool:
        a, b = self.a_tally, self.b_tally
        return (self.a_state, a.passed, a.cases) != (self.b_state, b.passed, b.cases)

    def changes(self) -> list[str]:
        """The cases of this cell whose status differs: ``after_running[call_1]: passed -> failed``."""
        before = {c.point: c.status for c in (self.a.cases if self.a else ())}
        after = {c.point: c.status for c in (self.b.cases if self.b else ())}
        out = []
        for point in [*before, *(p for p in after if p not in before)]:
            if before.get(point) != after.get(point):
                out.append(f"{point}: {before.get(point, 'absent')} -> {after.get(point, 'absent')}")
        return out


@dataclass(frozen=True, slots=True)
class RowPair:
    scenario_path: str
    group: str
    cells: tuple[CellPair, ...]  # in COLUMNS order

    @property
    def label(self) -> str:
        return row_label(self.scenario_path)


@dataclass(frozen=True, slots=True)
class EvalPair:
    id: str
    title: str
    a: EvalRow | None
    b: EvalRow | None

    @property
    def a_state(self) -> str:
        return self.a.state if self.a else "not_reached"

    @property
    def b_state(self) -> str:
        return self.b.state if self.b else "not_reached"

    @property
    def differs(self) -> bool:
        return self.a_state != self.b_state


@dataclass(frozen=True, slots=True)
class Comparison:
    a_name: str
    b_name: str
    a: Matrix
    b: Matrix
    rows: tuple[RowPair, ...]
    evals: tuple[EvalPair, ...] = ()

    @property
    def differing(self) -> tuple[tuple[RowPair, CellPair], ...]:
        return tuple((row, cell) for row in self.rows for cell in row.cells if cell.differs)

    @property
    def differing_evals(self) -> tuple[EvalPair, ...]:
        return tuple(pair for pair in self.evals if pair.differs)


def compare(a: Results, b: Results, a_name: str = "A", b_name: str = "B") -> Comparison:
    ma, mb = build_matrix(a), build_matrix(b)
    rows_a = {row.scenario_path: row for row in ma.rows}
    rows_b = {row.scenario_path: row for row in mb.rows}
    paths = [*rows_a, *(p for p in rows_b if p not in rows_a)]
    pairs = []
    for path in paths:
        ra, rb = rows_a.get(path), rows_b.get(path)
        group = (ra or rb).group  # type: ignore[union-attr]  # one of them exists by construction
        cells = tuple(
            CellPair(column, ra.cell(column) if ra else None, rb.cell(column) if rb else None)
            for column in COLUMNS
        )
        pairs.append(RowPair(path, group, cells))
    evals_a = {row.id: row for row in ma.scorecard.rows}
    evals_b = {row.id: row for row in mb.scorecard.rows}
    evals = tuple(
        EvalPair(
            eval_id,
            (evals_a.get(eval_id) or evals_b[eval_id]).title,
            evals_a.get(eval_id),
            evals_b.get(eval_id),
        )
        for eval_id in [*evals_a, *(e for e in evals_b if e not in evals_a)]
    )
    return Comparison(a_name, b_name, ma, mb, tuple(pairs), evals)


def _md_eval(state: str) -> str:
    return f"{MARKS[state]} {state}"


def _md_cell(cell: Cell | None) -> str:
    tally = cell.tally if cell else _EMPTY
    state = cell.state if cell else "not_reached"
    if not tally.cases:
        return MARKS[state] + (
            f" {state.replace('_', ' ')}" if state in ("not_reachable", "deselected") else ""
        )
    return f"{MARKS[state]} {tally.passed}/{tally.cases}"


def render_compare_markdown(comparison: Comparison) -> str:
    c = comparison
    lines = [
        f"## crashmatrix comparison: {len(c.differing)} cells differ, {len(c.differing_evals)} evals differ",
        "",
        f"- **A** {c.a_name}: {c.a.headline}; {c.a.scorecard.summary}",
        f"- **B** {c.b_name}: {c.b.headline}; {c.b.scorecard.summary}",
        "",
    ]
    if c.evals:
        lines += ["### Scorecard (A / B)", "", "| eval | A | B | why (B) |", "|---|---|---|---|"]
        for pair in c.evals:
            why = pair.b.why if pair.b else ""
            a, b = _md_eval(pair.a_state), _md_eval(pair.b_state)
            if pair.differs:
                a, b = f"**{a}**", f"**{b}**"
            lines.append(f"| {pair.title} | {a} | {b} | {why.replace('|', '/')} |")
        lines.append("")
    if c.differing:
        lines += ["### Differing cells", ""]
        for row, cell in c.differing:
            lines.append(f"- **{row.label}** · {cell.column}: A {_md_cell(cell.a)} → B {_md_cell(cell.b)}")
            lines += [f"  - `{change}`" for change in cell.changes()]
        lines.append("")
    head = ["scenario", *(LABELS[col] for col in COLUMNS)]
    lines += ["### Matrix (A / B)", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in c.rows:
        cells = []
        for cell in row.cells:
            shown = f"{_md_cell(cell.a)} / {_md_cell(cell.b)}"
            cells.append(f"**{shown}**" if cell.differs else shown)
        lines.append(f"| {row.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _html_half(cell: Cell | None) -> str:
    tally = cell.tally if cell else _EMPTY
    state = cell.state if cell else "not_reached"
    label = _HTML_MARKS[state] + (f" {tally.passed}/{tally.cases}" if tally.cases else "")
    tip = "; ".join(cell.why) if cell and state in ("not_reachable", "deselected") else state
    return (
        f'<span class="{state}" title="{text(tip)}" style="padding:0 4px;border-radius:3px">'
        f"{text(label)}</span>"
    )


def render_compare_html(comparison: Comparison) -> str:
    c = comparison
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
            f"{_html_half(cell.a)} {_html_half(cell.b)}</td>"
            for cell in row.cells
        )
        name = f'<th scope="row" title="{text(row.scenario_path)}">{text(row.label)}</th>'
        rows.append(f'<tr class="row">{name}{cells}</tr>')
    changed = "".join(
        f"<li><b>{text(row.label)}</b> · {text(cell.column)}: {_html_half(cell.a)} → "
        f"{_html_half(cell.b)}<ul>"
        + "".join(f"<li><code>{text(change)}</code></li>" for change in cell.changes())
        + "</ul></li>"
        for row, cell in c.differing
    )
    differences = f'<section id="differences"><h2>Differing cells</h2><ul>{changed}</ul></section>'
    eval_rows = "".join(
        f'<tr class="{"differs" if pair.differs else ""}"><th scope="row">{text(pair.title)}</th>'
        f'<td><span class="{pair.a_state}">{_HTML_MARKS[pair.a_state]} {text(pair.a_state)}</span></td>'
        f'<td><span class="{pair.b_state}">{_HTML_MARKS[pair.b_state]} {text(pair.b_state)}</span></td>'
        f'<td class="dim">{text(pair.b.why if pair.b else "")}</td></tr>'
        for pair in c.evals
    )
    scorecards = (
        f'<section id="scorecard"><h2>Scorecard: {len(c.differing_evals)} evals differ</h2>'
        '<table class="matrix"><thead><tr><th>eval</th><th>A</th><th>B</th><th>why (B)</th></tr></thead>'
        f"<tbody>{eval_rows}</tbody></table></section>"
        if c.evals
        else ""
    )
    body = (
        f'<header><h1>crashmatrix comparison</h1><p class="headline {"bad" if c.differing else "ok"}">'
        f"{len(c.differing)} cells differ, {len(c.differing_evals)} evals differ</p>"
        f"<p><b>A</b> {text(c.a_name)}: {text(c.a.headline)}; {text(c.a.scorecard.summary)}<br>"
        f"<b>B</b> {text(c.b_name)}: {text(c.b.headline)}; {text(c.b.scorecard.summary)}</p></header>"
        + (differences if changed else "")
        + scorecards
        + '<section id="matrix"><h2>Matrix: A then B in every cell</h2><div class="legend"><span>'
        '<span class="swatch differs" style="outline:3px solid #e0a800">&nbsp;</span>'
        "cell differs</span></div>"
        f'<table class="matrix"><thead><tr><th>scenario</th>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></section>"
    )
    return page(f"crashmatrix comparison: {len(c.differing)} cells differ", body, script="")


def write_comparison(comparison: Comparison, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md, html_path = out_dir / "compare.md", out_dir / "compare.html"
    md.write_text(render_compare_markdown(comparison), encoding="utf-8")
    html_path.write_text(render_compare_html(comparison), encoding="utf-8")
    return md, html_path
