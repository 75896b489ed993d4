"""harness.plan.schedule: the rerun line of each kind of case names everything it ran with."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from crashmatrix.harness.plan.schedule import repro_command

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "scenarios" / "send_email" / "send_once.yaml"
MUTANT = "crashmatrix.reference_agent.mutants:blind_retry"


@pytest.fixture(autouse=True)
def _at_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    # The scenario is shown relative to where the user stands: stand where a user of the
    # built-in suite stands.
    monkeypatch.chdir(ROOT)


def _words(line: str) -> list[str]:
    """The line as the shell hands it to the CLI: quoting must survive a paste."""
    return shlex.split(line)


def test_a_plain_point_reruns_with_its_point_and_no_fixed_keep_directory() -> None:
    # No --keep: crashmatrix run keeps a case named by --crash in a new directory of its own
    # (a fixed one would be shared by every rerun on the machine).
    line = repro_command(SCENARIO, "after_running[call_mail]")
    assert _words(line) == [
        "crashmatrix",
        "run",
        "scenarios/send_email/send_once.yaml",
        "--crash",
        "after_running[call_mail]",
    ]


def test_the_clean_case_reruns_alone_rather_than_as_the_whole_matrix() -> None:
    words = _words(repro_command(SCENARIO, "clean"))
    assert words[3:5] == ["--crash", "clean"]


def test_a_power_loss_keeps_its_power_prefix() -> None:
    words = _words(repro_command(SCENARIO, "power@after_side_effect[call_mail]"))
    assert words[3:5] == ["--crash", "power@after_side_effect[call_mail]"]
    assert "--second" not in words


def test_a_recovery_case_with_a_failing_second_crash_reruns_that_depth_two_case() -> None:
    words = _words(
        repro_command(SCENARIO, "recovery@after_approved[call_mail]", second="after_running[call_mail]")
    )
    assert words[3:7] == ["--crash", "after_approved[call_mail]", "--second", "after_running[call_mail]"]


def test_a_recovery_case_without_a_second_crash_to_name_reruns_as_the_whole_recovery_item() -> None:
    words = _words(repro_command(SCENARIO, "recovery@after_approved[call_mail]"))
    assert words[3:5] == ["--crash", "recovery@after_approved[call_mail]"]
    assert "--second" not in words


def test_a_power_loss_with_a_second_crash_keeps_both() -> None:
    words = _words(
        repro_command(SCENARIO, "power@after_running[call_mail]", second="before_tool_result[call_mail]")
    )
    assert words[3:7] == [
        "--crash",
        "power@after_running[call_mail]",
        "--second",
        "before_tool_result[call_mail]",
    ]


def test_a_mutant_agent_spec_survives_into_the_line_unchanged() -> None:
    words = _words(repro_command(SCENARIO, "after_running[call_mail]", agent=MUTANT))
    assert words[5:] == ["--agent", MUTANT]


def test_the_reference_agent_is_the_default_and_is_left_out() -> None:
    assert "--agent" not in _words(repro_command(SCENARIO, "after_running[call_mail]", agent="reference"))


def test_an_adapter_file_is_shown_relative_to_where_the_user_stands_like_the_scenario() -> None:
    adapter = ROOT / "examples" / "memo_agent" / "adapter.yaml"
    assert adapter.is_file()  # else the test would check nothing: the path would be kept as given
    words = _words(repro_command(SCENARIO, "after_running[call_mail]", agent=str(adapter)))
    assert words[5:7] == ["--agent", "examples/memo_agent/adapter.yaml"]


def test_an_adapter_path_with_spaces_and_an_occurrence_point_stay_one_word_each() -> None:
    line = repro_command(Path("/x y/s.yaml"), "after_side_effect[call_invoice#2]", agent="/a b/adapter.yaml")
    assert _words(line) == [
        "crashmatrix",
        "run",
        "/x y/s.yaml",
        "--crash",
        "after_side_effect[call_invoice#2]",
        "--agent",
        "/a b/adapter.yaml",
    ]


def test_a_keep_directory_given_is_in_the_line() -> None:
    words = _words(repro_command(SCENARIO, "after_running[call_mail]", keep="/work/cases"))
    assert words[-2:] == ["--keep", "/work/cases"]


def test_a_second_crash_after_no_first_crash_is_refused() -> None:
    with pytest.raises(ValueError, match="needs a first one"):
        repro_command(SCENARIO, "clean", second="after_running[call_mail]")
