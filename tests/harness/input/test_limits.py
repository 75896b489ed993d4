"""Every input file is measured before it is read: one past the limit is one line naming the
file, its size, the limit and how to raise it, never minutes of parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.errors import InputError, YamlError
from crashmatrix.harness.input.limits import ENV, MAX_INPUT_BYTES, input_limit, oversize
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.reports import results as results_module
from crashmatrix.reports.errors import ResultsFileError
from crashmatrix.reports.results import load_results

EMAIL_ONCE = Path(__file__).parents[2] / "data" / "email_once.yaml"


def _padded(tmp_path: Path, size: int) -> Path:
    """email_once.yaml grown to ``size`` bytes by a trailing comment (still a valid scenario)."""
    text = EMAIL_ONCE.read_text(encoding="utf-8")
    pad = size - len(text.encode("utf-8")) - 3
    path = tmp_path / "big.yaml"
    path.write_text(text + "# " + "x" * pad + "\n", encoding="utf-8")
    assert path.stat().st_size == size
    return path


def test_a_scenario_one_byte_over_the_limit_is_one_line_naming_size_limit_and_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    path = _padded(tmp_path, MAX_INPUT_BYTES + 1)
    with pytest.raises(YamlError) as caught:
        load_scenario(path)
    assert str(caught.value) == (
        f"{path}:1:1: file is {MAX_INPUT_BYTES + 1} bytes, over crashmatrix's input limit of "
        f"{MAX_INPUT_BYTES} bytes; is it the right file? (set ${ENV} to a larger number of bytes if it is)"
    )


def test_a_scenario_at_the_limit_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "4096")
    assert load_scenario(_padded(tmp_path, 4096)).name == "email_once"
    with pytest.raises(YamlError, match="4097 bytes, over crashmatrix's input limit of 4096"):
        load_scenario(_padded(tmp_path, 4097))


def test_the_limit_is_raised_by_the_environment_and_a_bad_value_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV, "10")
    assert input_limit() == 10
    for bad in ("ten", "0", "-5"):
        monkeypatch.setenv(ENV, bad)
        with pytest.raises(InputError, match=rf"^\${ENV}={bad!r} is not a positive number of bytes"):
            input_limit()


def test_a_file_that_cannot_be_measured_is_left_to_the_reader(tmp_path: Path) -> None:
    assert oversize(tmp_path / "missing.yaml") is None


def test_a_results_file_past_its_limit_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(results_module, "RESULTS_LIMIT", 10)
    path = tmp_path / "matrix.json"
    path.write_text('{"format": "x", "cases": []}', encoding="utf-8")
    with pytest.raises(ResultsFileError, match="over the 10 bytes a crashmatrix results file reaches"):
        load_results(path)


def test_import_mcp_refuses_a_tools_list_past_the_limit_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from crashmatrix.harness.front.cli import EXIT_USAGE, main

    monkeypatch.setenv(ENV, "16")
    tools = tmp_path / "tools.json"
    tools.write_text('{"tools": []}' + " " * 20, encoding="utf-8")
    assert main(["import-mcp", str(tools), "--out", str(tmp_path / "out")]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == (
        f"crashmatrix: {tools}: file is 33 bytes, over crashmatrix's input limit of 16 bytes; "
        f"is it the right file? (set ${ENV} to a larger number of bytes if it is)\n"
    )
    assert not (tmp_path / "out").exists()
