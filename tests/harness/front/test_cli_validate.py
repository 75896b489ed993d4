"""``crashmatrix validate`` on adapter files: read as adapters (by their top-level keys, or
their schema line), one line per bad file, exit 2 if any is bad. In this process: loading an
adapter file reads the agent's source, it runs nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.front.cli import main

ROOT = Path(__file__).resolve().parents[3]
BROKEN = ROOT / "tests" / "harness" / "data" / "broken"


def _validate(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, list[str]]:
    status = main(["validate", *map(str, paths)])
    out, err = capsys.readouterr()
    assert err == ""
    return status, out.splitlines()


def _expected(path: Path) -> str:
    """The message the broken file pins in its first line."""
    header = path.read_text(encoding="utf-8").splitlines()[0]
    return header.partition(": ")[2].replace("{path}", str(path))


def test_every_example_adapter_file_validates_as_an_adapter(capsys: pytest.CaptureFixture[str]) -> None:
    # Read as a contract, an adapter file fails (no idempotency:, unknown keys): ok means
    # it went to the adapter loader.
    status, lines = _validate(capsys, ROOT / "examples")
    adapters = sorted(ROOT.glob("examples/*/adapter*.yaml"))
    assert adapters
    assert status == 0, lines
    assert {f"{path}: ok" for path in adapters} <= set(lines)


def test_a_bad_python_or_command_adapter_is_one_line_each_and_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    python, command = BROKEN / "a16_boundary_no_call_id.yaml", BROKEN / "a08_intercept_black_box.yaml"
    good = ROOT / "examples" / "blackbox_agent" / "adapter.yaml"
    status, lines = _validate(capsys, python, good, command)
    assert status == 2
    assert lines == [_expected(python), f"{good}: ok", _expected(command)]


def test_an_adapter_without_python_or_command_is_told_so_by_its_schema_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "adapter.yaml"
    path.write_text(
        "# yaml-language-server: $schema=../harness/input/schemas/adapter.schema.json\n"
        "name: lost\ntools: agent\n",
        encoding="utf-8",
    )
    status, lines = _validate(capsys, path)
    assert status == 2
    assert lines == [f"{path}:2:1: 'python' is required here; add 'python:'"]
