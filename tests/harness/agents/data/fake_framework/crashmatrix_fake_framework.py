"""A stand-in framework module for tests of the common part of framework agents
(``ForeignAdapter`` with ``framework:``): it says what a real one says, and drives nothing."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crashmatrix.harness.agents.team_life import AgentFacts, FrameworkInfo, TeamLife

FRAMEWORK = FrameworkInfo(
    boundaries=("after_model_reply", "after_running", "after_side_effect", "after_tool_result"),
    unreachable={"before_tool_result": "the fake saves a call's result with the next reply"},
    why_not_torn="the fake's store is SQLite",
    why_no_power="the fake's store is SQLite",
    preload=("json",),
    options=("durability",),
)
CHECKED: list[Any] = []


def drive(life: TeamLife) -> None:
    raise AssertionError("a test of the common part never runs a life")


def read_records(workspace: Path) -> list[Mapping[str, Any]]:
    return []


def check(spec: Any) -> AgentFacts:
    CHECKED.append(spec)
    return AgentFacts(tools=frozenset({"send_email", "create_order"}), approvals=False)
