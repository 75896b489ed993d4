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


def test_a_report_with_failures_shows_causes_then_the_matrix_then_every_failure(results: Results) -> None:
    text = render_markdown(build_matrix(results))
    assert text.startswith("## crashmatrix: 6/8 cases passed, 2 scenarios, agent reference")
    assert text.index("### Causes (4)") < text.index("### Matrix") < text.index("### Failures (1)")
    assert "`send_once.yaml::after_side_effect[call_mail]`" in text
    assert (
        "crashmatrix run scenarios/send_email/send_once.yaml --crash 'after_side_effect[call_mail]'" in text
    )
    detail = text[text.index("### Failures (1)") :]
    # The invariant first, then the mismatches; values as JSON, never Python reprs.
    assert detail.index("- invariant non_idempotent_at_most_once") < detail.index("- outcome[call_mail]")
    assert "world vs clean run: emails: 1 → 2" in text
    assert "None" not in text and "['" not in text


def test_the_matrix_table_has_a_cell_per_crash_point_and_totals(results: Results) -> None:
    text = render_markdown(build_matrix(results))
    # passed/cases in every cell, like the totals; a failing cell names its causes by code
    assert (
        "| send_email/send_once | ✅ 1/1 | ⬜ | ⬜ | ⬜ | ⬜ | ✅ 1/1 | ⬜ | ❌ 0/1 [A,B,C,+1] | ⬜ | ⬜ "
        "| ✅ 1/1 | ⬜ | ✅ 1/1 | ⬜ | ⬜ | ⬜ | ⬜ | ⬜ | 4/5 |" in text  # double resume, tool side: none
    )
    assert (
        "| read_only/read_file_plain | ✅ 1/1 | ⬜ | ⬜ | ⬜ | ⬜ | ⬜ | ⬜ | 🟨 1/1 | ⬜ | ⬜ 0/1 "
        "| ⬜ | ⬜ | ⬜ | ⬜ | ⬜ | ⬜ | ⬜ | ⬜ | 2/3 |" in text
    )
    assert "n/m: n of the m cases there passed" in text  # the legend says what a count means
    assert (
        "| **total** | 2/2 | – | – | – | – | 1/1 | – | 1/2 | – | 0/1 | 1/1 | – | 1/1 "
        "| – | – | – | – | – | **6/8** |" in text
    )


def test_a_passing_report_has_no_failures_section(results: Results) -> None:
    passing = dataclasses.replace(results, cases=tuple(c for c in results.cases if not c.failing))
    assert "Failures" not in render_markdown(build_matrix(passing))


def test_over_budget_it_keeps_the_causes_and_per_row_totals_only(results: Results) -> None:
    matrix = build_matrix(_many_failures(results, 300))
    full = render_markdown(matrix)
    budget = len(full.encode()) // 3
    small = render_markdown(matrix, max_bytes=budget)
    assert len(small.encode()) <= budget
    assert small.index("### Causes (4)") < small.index("### Per scenario") < small.index("### Failures (301)")
    assert "| send_email/send_once | 4/305 | 301 |" in small


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


def test_the_terminal_table_fits_80_columns_and_lists_causes_and_failures_first(results: Results) -> None:
    lines = render_terminal(build_matrix(results))
    assert lines[0] == "crashmatrix: " + build_matrix(results).headline
    header = next(i for i, line in enumerate(lines) if line.startswith("scenario"))
    failures = lines.index("failures (1):")
    assert lines[1].startswith("causes (4;") and 1 < failures < header
    assert lines[failures + 1].startswith(
        "  ✗ send_once.yaml::after_side_effect[call_mail] failed: invariant non_idempotent_at_most_once: "
    )
    assert "  send_email/send_once        ✓  ·  ·  ·  ·  ✓  ·  ✗  ·  ·  ✓  ·  ✓  4/5" in lines
    assert "total" + " " * 64 + "6/8" in lines
    legend = " ".join(lines[lines.index(next(x for x in lines if x.startswith("columns, "))) :])
    assert "RU after_running 1/1, DE during_side_effect -, SE after_side_effect 1/2," in legend
    assert all(len(line) <= 80 for line in lines[header:])


def test_a_wide_terminal_shows_whole_scenario_names(results: Results) -> None:
    long = "scenarios/a_rather_long_folder/an_even_longer_scenario_name_that_goes_on.yaml"
    renamed = dataclasses.replace(
        results,
        cases=tuple(
            dataclasses.replace(c, scenario_path=long) if "send_once" in c.scenario_path else c
            for c in results.cases
        ),
    )
    label = "a_rather_long_folder/an_even_longer_scenario_name_that_goes_on"
    [narrow] = [line for line in render_terminal(build_matrix(renamed)) if line.startswith("  a_rather")]
    assert len(narrow) <= 80 and label not in narrow and "…" in narrow
    [wide] = [
        line for line in render_terminal(build_matrix(renamed), width=200) if line.startswith("  a_rather")
    ]
    assert wide.startswith(f"  {label} ") and wide.endswith("4/5")


def test_the_terminal_table_falls_back_to_ascii(results: Results) -> None:
    text = "\n".join(render_terminal(build_matrix(results), encoding="ascii"))
    text.encode("ascii")
