"""Writing a report directory (``matrix.json``, ``matrix.md``, ``matrix.html``) and the
GitHub Actions job summary. The pytest plugin and ``crashmatrix report`` both end here."""

from __future__ import annotations

from pathlib import Path

from crashmatrix.reports.html import render_html
from crashmatrix.reports.markdown import render_markdown
from crashmatrix.reports.matrix import Matrix, build_matrix
from crashmatrix.reports.results import Results, write_results

__all__ = ["REPORT_FILES", "STEP_SUMMARY_LIMIT", "append_step_summary", "write_report"]

REPORT_FILES = ("matrix.json", "matrix.md", "matrix.html")
# GitHub refuses a job summary over 1 MiB per step; other steps may have written to the same
# file first, so the budget is what is left, less a margin for the separating newlines.
STEP_SUMMARY_LIMIT = 1024 * 1024
_MARGIN = 1024


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk keeps no half a file
        raise
    tmp.replace(path)


def write_report(results: Results, out_dir: Path, *, with_json: bool = True) -> Matrix:
    """Render ``results`` into ``out_dir``; ``with_json=False`` when the results file being
    re-rendered already is ``out_dir/matrix.json``."""
    matrix = build_matrix(results)
    out_dir.mkdir(parents=True, exist_ok=True)
    if with_json:
        scorecard = [row.to_json() for row in matrix.scorecard.rows]
        write_results(results, out_dir / "matrix.json", derived={"scorecard": scorecard})
    _write(out_dir / "matrix.md", render_markdown(matrix))
    _write(out_dir / "matrix.html", render_html(results, matrix))
    return matrix


def append_step_summary(matrix: Matrix, path: Path) -> int:
    """Append the Markdown to ``$GITHUB_STEP_SUMMARY``, cut to fit; returns bytes written."""
    existing = path.stat().st_size if path.exists() else 0
    budget = STEP_SUMMARY_LIMIT - existing - _MARGIN
    if budget <= 0:
        return 0
    text = render_markdown(matrix, max_bytes=budget)
    if not text:
        return 0
    data = ("\n" + text + "\n").encode("utf-8")
    with path.open("ab") as handle:
        handle.write(data)
    return len(data)
