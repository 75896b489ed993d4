"""The rerun line explore writes into a found case repeats its whole schedule."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.front.explore import Finding, Schedule, repro_line

FOUND = Path("found_abc.yaml")


def _finding(schedule: Schedule, agent: str = "reference") -> Finding:
    verdict: Any = None  # the line does not read the verdict
    return Finding({}, schedule, verdict, agent)


def test_a_power_loss_with_a_second_crash_keeps_both_and_the_agent() -> None:
    schedule = Schedule(
        parse_point("after_running[c1]"), parse_point("before_tool_result[c1]"), power_loss=True
    )
    words = shlex.split(
        repro_line(FOUND, _finding(schedule, "crashmatrix.reference_agent.mutants:blind_retry"))
    )
    assert words == [
        "crashmatrix",
        "run",
        "found_abc.yaml",
        "--crash",
        "power@after_running[c1]",
        "--second",
        "before_tool_result[c1]",
        "--agent",
        "crashmatrix.reference_agent.mutants:blind_retry",
    ]


def test_the_clean_schedule_reruns_the_clean_case_alone() -> None:
    assert shlex.split(repro_line(FOUND, _finding(Schedule(None)))) == [
        "crashmatrix",
        "run",
        "found_abc.yaml",
        "--crash",
        "clean",
    ]
