"""``crashmatrix eval``: the built-in suite against one agent, and its scorecard."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crashmatrix.harness.core.evals import SEED004_EVALS
from crashmatrix.harness.front.evaluate import main_eval, pytest_command
from crashmatrix.harness.input.suite import BUILTIN_SUITE, scenario_files

ROOT = Path(__file__).resolve().parents[3]


def test_list_shows_every_scenario_and_which_scenarios_show_each_seed004_eval(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main_eval(["--agent", "reference", "--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{len(scenario_files(BUILTIN_SUITE))} scenarios in {BUILTIN_SUITE}"
    for eval_id in SEED004_EVALS:
        at = out.index(f"  {eval_id}: {SEED004_EVALS[eval_id].title}")
        # Every eval of seed 004's list is shown by at least one built-in scenario.
        assert out[at + 1].startswith("    shown by: ") and "no scenario" not in out[at + 1]
        assert ".yaml" in out[at + 1]


def test_a_broken_adapter_is_one_line_and_exit_2_before_pytest_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    adapter = tmp_path / "agent.yaml"
    adapter.write_text("name: x\nnot_a_key: 1\n", encoding="utf-8")
    assert main_eval(["--agent", str(adapter), "--out", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing ran: no "$ pytest ..." line
    [line] = captured.err.splitlines()
    assert line.startswith(f"crashmatrix: {adapter}:")


def test_a_suite_that_does_not_exist_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main_eval(["--agent", "reference", "--scenarios", str(tmp_path / "none")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_the_child_run_is_the_plugin_run_with_the_users_extra_arguments() -> None:
    command = pytest_command(BUILTIN_SUITE, "agent.yaml", "0", Path("out"), ["-k", "send"])
    assert command[1:4] == ["-m", "pytest", str(BUILTIN_SUITE)]
    assert command[-2:] == ["-k", "send"]
    assert "-n" not in command  # 0 workers: no xdist
    assert pytest_command(BUILTIN_SUITE, "a", "2", Path("o"))[-2:] == ["-n", "2"]


def test_the_child_run_collects_the_suite_wherever_it_lives() -> None:
    command = pytest_command(Path("/teams/evals"), "a", "0", Path("o"))
    assert command[command.index("-o") + 1] == f"crashmatrix_paths={Path('/teams/evals').resolve()}"


def _one_scenario_suite(tmp_path: Path) -> Path:
    """A suite outside any folder named scenarios/, its file without the schema line: the
    child run must still collect it (crashmatrix_paths), not run nothing."""
    suite = tmp_path / "my_evals"
    (suite / "send_email").mkdir(parents=True)
    text = (ROOT / "scenarios" / "send_email" / "send_once.yaml").read_text(encoding="utf-8")
    body = "".join(line for line in text.splitlines(keepends=True) if "$schema=" not in line)
    (suite / "send_email" / "send_once.yaml").write_text(body, encoding="utf-8")
    return suite


@pytest.mark.slow
def test_a_real_run_prints_the_scorecard_and_exits_with_pytests_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    code = main_eval(
        [
            "--agent",
            "reference",
            "--scenarios",
            str(_one_scenario_suite(tmp_path)),
            "-n",
            "0",
            "--out",
            str(out),
            # The crash columns alone: the claim is that eval runs pytest, prints the scorecard
            # and exits with pytest's status; the power, double-resume and tool-side items
            # added lives, not claims (issue 31: 23.8 -> 9.4 s under load).
            "--",
            "--no-power-loss",
            "--no-double-resume",
            "--no-tool-side-faults",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "scorecard, agent reference: " in printed
    assert "crash evals:" in printed and (out / "matrix.json").exists()
    assert "send_once.yaml" in (out / "matrix.json").read_text(encoding="utf-8")
    # The crash on send_email is filed under its class, with passed/total (scorecard.COUNTS).
    assert re.search(r"^  running, non_idempotent +\S+ (\d+)/\1 ", printed, re.M), printed
    assert re.search(r"^  running, idempotent [^/]*$", printed, re.M), printed  # no case: no count


@pytest.mark.slow
def test_a_run_that_writes_no_results_never_scores_an_old_results_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    out.mkdir()
    (out / "matrix.json").write_text('{"agent": "old run", "cases": []}', encoding="utf-8")
    suite = _one_scenario_suite(tmp_path)
    # pytest refuses an unknown option before it runs anything: no results are written.
    code = main_eval(
        ["--agent", "reference", "--scenarios", str(suite), "-n", "0", "--out", str(out), "--", "--bogus"]
    )
    captured = capsys.readouterr()
    assert code == 4  # pytest's usage error
    assert "wrote no" in captured.err and "old run" not in captured.out
