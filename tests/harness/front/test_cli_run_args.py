"""``crashmatrix run``'s arguments: a case named by its pytest node id, and the combinations
refused before anything runs (in this process: no life starts on these paths)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from crashmatrix.harness.front.cli import _case_of, main

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = "scenarios/send_email/send_once.yaml"


def _args(file: str, crash: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(file=file, crash=crash)


@pytest.mark.parametrize(
    "case",
    [
        "clean",
        "after_running[call_mail]",
        "recovery@after_running[call_mail]",
        "torn_write[call_mail:running]",
        "after_side_effect[call_invoice#2]",
    ],
)
def test_a_node_id_names_the_file_and_the_case_as_file_and_crash_would(case: str) -> None:
    assert _case_of(_args(f"{SCENARIO}::{case}")) == (Path(SCENARIO), case)


def test_a_plain_file_keeps_its_crash_option() -> None:
    assert _case_of(_args(SCENARIO, "power@after_running")) == (Path(SCENARIO), "power@after_running")
    assert _case_of(_args(SCENARIO)) == (Path(SCENARIO), None)


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["run", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1  # one line, nothing ran
    return err


def test_a_node_id_and_a_crash_option_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, f"{SCENARIO}::after_running[call_mail]", "--crash", "clean")
    assert "names its case already; give FILE::CASE or FILE --crash CASE" in err


def test_an_empty_case_after_the_colons_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert "nothing after '::'" in _refused(capsys, f"{SCENARIO}::")


def test_a_second_crash_on_a_recovery_item_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(
        capsys, f"{SCENARIO}::recovery@after_running[call_mail]", "--second", "before_tool_result[call_mail]"
    )
    assert "recovery@ already crashes at each point of the recovery" in err


def test_a_second_crash_after_the_clean_case_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, SCENARIO, "--crash", "clean", "--second", "before_tool_result[call_mail]")
    assert "--second needs --crash" in err


def test_a_second_crash_that_is_no_point_id_is_refused_before_anything_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    keep = tmp_path / "kept"
    err = _refused(
        capsys, SCENARIO, "--crash", "after_approved", "--second", "after_running", "--keep", str(keep)
    )
    assert "'after_running' is not a crash point id" in err
    assert not keep.exists()
