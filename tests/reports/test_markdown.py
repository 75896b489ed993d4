"""Markdown (matrix.md, the GitHub job summary) and the terminal table."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from crashmatrix.reports.markdown import render_markdown
from crashmatrix.reports.matrix import build_matrix
from crashmatrix.reports.results import Results
from crashmatrix.reports.terminal import render_terminal
from crashmatrix.reports.writer import STEP_SUMMARY_LIMIT, append_step_summary


def _many_failures(results: Results, copies: int) -> Results:
    failing = next(c for c in results.cases if c.failing)
    extra = tuple(
        dataclasses.replace(failing, node_id=f"{failing.node_id}-{i}", point=f"after_side_effect[call_{i}]")
        for i in range(copies)
    )
    return dataclasses.replace(results, cases=results.cases + extra)


def test_a_report_with_failures_shows_them_before_the_matrix(results: Results) -> None:
    text = render_markdown(build_matrix(results))
    assert text.startswith("## crashmatrix: 6/8 cases passed, 2 scenarios, agent reference")
    assert text.index("### Failures (1)") < text.index("### Matrix")
    assert "`send_once.yaml::after_side_effect[call_mail]`" in text
    assert (
        "crashmatrix run scenarios/send_email/send_once.yaml --crash 'after_side_effect[call_mail]'" in text
    )
    assert "invariant non_idempotent_at_most_once" in text
    assert "world vs clean run: emails: 1 → 2" in text


def test_the_matrix_table_has_a_cell_per_crash_point_and_totals(results: Results) -> None:
    text = render_markdown(build_matrix(results))
    assert "| send_email/send_once | ✅ 1 | ⬜ | ⬜ | ✅ 1 | ❌ 1/1 | ⬜ | ⬜ | ✅ 1 | ✅ 1 | 4/5 |" in text
    assert "| read_only/read_file_plain | ✅ 1 | ⬜ | ⬜ | ⬜ | 🟨 1 | ⬜ | ⬜ 1 | ⬜ | ⬜ | 2/3 |" in text
    assert "| **total** | 2/2 | – | – | 1/1 | 1/2 | – | 0/1 | 1/1 | 1/1 | **6/8** |" in text


def test_a_passing_report_has_no_failures_section(results: Results) -> None:
    passing = dataclasses.replace(results, cases=tuple(c for c in results.cases if not c.failing))
    assert "Failures" not in render_markdown(build_matrix(passing))


def test_over_budget_it_keeps_failures_first_and_per_row_totals_only(results: Results) -> None:
    matrix = build_matrix(_many_failures(results, 300))
    full = render_markdown(matrix)
    budget = len(full.encode()) // 3
    small = render_markdown(matrix, max_bytes=budget)
    assert len(small.encode()) <= budget
    assert small.index("### Failures (301)") < small.index("### Per scenario")
    assert "| send_email/send_once | 4 | 301 | 305 |" in small


def test_a_tiny_budget_still_says_how_many_failures_were_left_out(results: Results) -> None:
    matrix = build_matrix(_many_failures(results, 300))
    small = render_markdown(matrix, max_bytes=6000)
    assert len(small.encode()) <= 6000
    assert "more failures (see matrix.json)" in small


def test_the_step_summary_is_appended_and_stays_under_one_mebibyte(results: Results, tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_bytes(b"x" * (STEP_SUMMARY_LIMIT - 20_000))  # earlier steps used most of it
    written = append_step_summary(build_matrix(_many_failures(results, 2000)), summary)
    assert written > 0
    assert summary.stat().st_size <= STEP_SUMMARY_LIMIT
    assert summary.read_text(encoding="utf-8").startswith("x" * 100)


def test_the_terminal_table_fits_80_columns_and_lists_failures_first(results: Results) -> None:
    lines = render_terminal(build_matrix(results))
    assert lines[0] == "crashmatrix: " + build_matrix(results).headline
    header = next(i for i, line in enumerate(lines) if line.startswith("scenario"))
    assert lines[1] == "failures (1):" and header > 1
    assert "  send_email/send_once        ✓   ·   ·   ✓   ✗   ·   ·   ✓   ✓   4/5" in lines
    assert all(len(line) <= 80 for line in lines[header:])


def test_the_terminal_table_falls_back_to_ascii(results: Results) -> None:
    text = "\n".join(render_terminal(build_matrix(results), encoding="ascii"))
    text.encode("ascii")
