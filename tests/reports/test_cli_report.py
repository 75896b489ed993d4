"""``crashmatrix report``: re-render a results file, or compare two, without running anything."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from crashmatrix.harness.front.cli import main
from crashmatrix.reports.results import Results, load_results, write_results

from .conftest import FIXTURE


def test_report_renders_matrix_json_md_and_html_into_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(FIXTURE), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "6/8 cases passed, 2 scenarios, agent reference" in out
    for name in ("matrix.json", "matrix.md", "matrix.html"):
        assert (tmp_path / "out" / name).is_file()
    assert load_results(tmp_path / "out" / "matrix.json") == load_results(FIXTURE)


def test_re_rendering_a_report_directory_in_place_keeps_its_results_file(tmp_path: Path) -> None:
    shutil.copy(FIXTURE, tmp_path / "matrix.json")
    before = (tmp_path / "matrix.json").read_bytes()
    assert main(["report", str(tmp_path / "matrix.json"), "--out", str(tmp_path)]) == 0
    assert (tmp_path / "matrix.json").read_bytes() == before
    assert (tmp_path / "matrix.html").is_file()


def test_a_bad_results_file_is_one_line_on_stderr_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "crashmatrix-results", "version": 1, "agent": "x", "cases": [{"node_id": 3}]}')
    assert main(["report", str(bad), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"crashmatrix: {bad}: cases[0]")
    assert not (tmp_path / "out").exists()


def test_report_without_a_file_or_compare_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report"]) == 2
    assert "give a results file" in capsys.readouterr().err


def test_compare_writes_the_side_by_side_page_and_names_the_differing_cells(
    results: Results, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fixed = dataclasses.replace(
        results,
        agent="other",
        cases=tuple(dataclasses.replace(c, status="passed") if c.failing else c for c in results.cases),
    )
    write_results(fixed, tmp_path / "b.json")
    assert main(["report", "--compare", str(FIXTURE), str(tmp_path / "b.json"), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1 cells differ" in out
    assert "send_email/send_once after_side_effect: fail -> pass" in out
    assert 'class="differs"' in (tmp_path / "compare.html").read_text(encoding="utf-8")
    assert (tmp_path / "compare.md").is_file()
