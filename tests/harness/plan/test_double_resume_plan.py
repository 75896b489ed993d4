"""Which points get a ``double@P`` item (harness.plan.enumeration), and the collection's plan
of the column: items, not reachable with why, deselected (harness.front.collection)."""

from __future__ import annotations

from typing import Any

from crashmatrix.harness.agents.reference import ReferenceAdapter
from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.front.collection import double_plan
from crashmatrix.harness.plan.enumeration import DOUBLE_BOUNDARIES, double_points, double_unreachable

POINTS = [
    CrashPoint("after_model_reply", "call_1"),
    CrashPoint("after_tool_call_saved", "call_1"),
    CrashPoint("after_approved", "call_1"),
    CrashPoint("after_running", "call_1"),
    CrashPoint("after_side_effect", "call_1"),
    CrashPoint("after_tool_call_saved", "call_1", 2),
    CrashPoint("after_running", "call_2"),
]


def test_a_double_resume_item_at_each_first_passage_where_a_call_is_pending_undecided() -> None:
    assert DOUBLE_BOUNDARIES == ("after_tool_call_saved", "after_running")
    assert [p.id for p in double_points(POINTS)] == [
        "after_tool_call_saved[call_1]",
        "after_running[call_1]",
        "after_running[call_2]",
    ]


def test_only_an_agent_whose_two_lives_can_be_told_apart_gets_the_column() -> None:
    assert double_unreachable("reference", native=True) is None
    why = double_unreachable("team", native=False)
    assert why is not None and why.startswith("adapter team writes its own session")


class _Foreign:
    name = "team"
    boundaries = ("after_tool_call_saved", "after_running")


def test_the_reference_agent_has_the_items_and_a_foreign_agent_a_reason() -> None:
    items, gaps = double_plan(ReferenceAdapter(), POINTS)  # type: ignore[arg-type]
    assert [p.id for p in items] == [p.id for p in double_points(POINTS)] and gaps == []
    items, gaps = double_plan(_Foreign(), POINTS)  # type: ignore[arg-type]
    assert items == []
    (gap,) = gaps
    expected: dict[str, Any] = {"boundary": "double_resume", "state": "not_reachable"}
    assert {k: gap[k] for k in expected} == expected and "cannot be judged yet" in gap["why"]
    assert gap["points"] == [p.id for p in double_points(POINTS)]


def test_no_double_resume_deselects_the_column_naming_the_option() -> None:
    items, gaps = double_plan(ReferenceAdapter(), POINTS, on=False)  # type: ignore[arg-type]
    assert items == [] and [(g["state"], g["why"]) for g in gaps] == [("deselected", "--no-double-resume")]
