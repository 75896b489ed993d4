"""harness.verdict.explain: the rerun line a case result gets names the case it was."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

import pytest

from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.verdict.explain import SECOND, explain, failing_second, rerun_command
from crashmatrix.harness.verdict.result import CaseResult, SubCase
from crashmatrix.harness.verdict.verdict import Verdict

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = load_scenario(ROOT / "scenarios" / "send_email" / "send_once.yaml")
MUTANT = "crashmatrix.reference_agent.mutants:blind_retry"
PASSED = Verdict("passed", None, {})
SENT_TWICE = Verdict("failed", None, {}, problems=("sent twice",))
LOST = Verdict("failed", None, {}, problems=("lost",))


@pytest.fixture(autouse=True)
def _at_the_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the line shows the scenario relative to here


def _result(
    point_id: str,
    verdict: Verdict,
    *,
    agent: str = "reference",
    subs: tuple[tuple[str, Verdict], ...] = (),
    extra: dict[str, object] | None = None,
) -> CaseResult:
    boundary = "recovery" if point_id.startswith("recovery@") else point_id.partition("[")[0]
    return CaseResult(
        SCENARIO, point_id, boundary, verdict, 1.0, 2, Path("/tmp/case"), agent, subs, extra or {}
    )


def _after_crash(line: str) -> list[str]:
    words = shlex.split(line)
    assert words[:3] == ["crashmatrix", "run", "scenarios/send_email/send_once.yaml"]
    return words[3:]


def test_a_failed_recovery_case_reruns_its_first_failing_second_crash_not_the_first_in_order() -> None:
    subs = (
        ("after_approved[call_mail]", PASSED),
        ("after_running[call_mail]", SENT_TWICE),
        ("after_side_effect[call_mail]", LOST),
    )
    result = _result("recovery@after_approved[call_mail]", SENT_TWICE, agent=MUTANT, subs=subs)
    assert failing_second(result) == "after_running[call_mail]"
    assert _after_crash(rerun_command(result)) == [
        "--crash",
        "after_approved[call_mail]",
        "--second",
        "after_running[call_mail]",
        "--agent",
        MUTANT,
    ]


def test_a_passed_recovery_case_reruns_as_the_whole_recovery_item() -> None:
    subs = (("before_tool_result[call_mail]", PASSED), ("after_tool_result[call_mail]", PASSED))
    result = _result("recovery@after_running[call_mail]", PASSED, subs=subs)
    assert failing_second(result) is None
    assert _after_crash(rerun_command(result))[:2] == ["--crash", "recovery@after_running[call_mail]"]


def test_a_recovery_case_that_was_not_reached_reruns_as_the_recovery_item() -> None:
    result = _result("recovery@after_running[call_mail]", Verdict("not_reached", None, {}))
    assert _after_crash(rerun_command(result)) == [
        "--crash",
        "recovery@after_running[call_mail]",
    ]


def test_a_second_crash_the_cli_ran_stays_in_the_line_and_in_the_header() -> None:
    result = _result(
        "power@after_running[call_mail]", LOST, agent=MUTANT, extra={SECOND: "before_tool_result[call_mail]"}
    )
    assert _after_crash(rerun_command(result))[:4] == [
        "--crash",
        "power@after_running[call_mail]",
        "--second",
        "before_tool_result[call_mail]",
    ]
    text = explain(result)
    assert text.splitlines()[0].startswith(
        "send_once.yaml::power@after_running[call_mail] then before_tool_result[call_mail] FAILED "
        f"(agent {MUTANT}, "
    )


def test_a_plain_point_with_a_mutant_agent_names_the_point_and_the_agent() -> None:
    result = _result("after_side_effect[call_mail]", SENT_TWICE, agent=MUTANT)
    assert _after_crash(rerun_command(result))[:4] == [
        "--crash",
        "after_side_effect[call_mail]",
        "--agent",
        MUTANT,
    ]


def test_explain_gives_each_failing_second_crash_its_own_rerun_line_and_ends_with_the_cases() -> None:
    subs = (
        ("after_running[call_mail]", SENT_TWICE),
        ("before_tool_result[call_mail]", PASSED),
        ("after_side_effect[call_mail]", LOST),
    )
    sub_cases = (SubCase("after_running[call_mail]", Path("/tmp/case/second-0")),)
    result = dataclasses.replace(
        _result("recovery@after_approved[call_mail]", SENT_TWICE, agent=MUTANT, subs=subs),
        sub_cases=sub_cases,
    )
    lines = explain(result).splitlines()
    assert lines[-1] == f"  rerun: {rerun_command(result)}"
    reruns = [
        _after_crash(line.removeprefix("    rerun: ")) for line in lines if line.startswith("    rerun: ")
    ]
    assert [words[:4] for words in reruns] == [
        ["--crash", "after_approved[call_mail]", "--second", "after_running[call_mail]"],
        ["--crash", "after_approved[call_mail]", "--second", "after_side_effect[call_mail]"],
    ]
    assert "    case directory: /tmp/case/second-0" in lines  # known only where the case recorded it
    assert not any("before_tool_result" in line for line in lines)  # a passed one needs no rerun


def test_a_second_crash_the_agent_failed_is_rerun_before_one_that_was_not_applicable() -> None:
    # A fault that could not act makes its second crash not applicable; the case's verdict
    # (and so its rerun) is the one the agent really failed, even when it comes later.
    untouched = Verdict("not_applicable", None, {}, problems=("tamper_arguments did not act",))
    subs = (("after_approved[call_mail]", untouched), ("after_running[call_mail]", SENT_TWICE))
    result = _result("recovery@after_approved[call_mail]", SENT_TWICE, subs=subs)
    assert failing_second(result) == "after_running[call_mail]"
