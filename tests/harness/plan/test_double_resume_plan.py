"""Which points get a ``double@P`` item (harness.plan.enumeration), and the collection's plan
of the column: items, not reachable with why, deselected (harness.front.collection)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from crashmatrix.harness.agents.adapter_file import load_foreign
from crashmatrix.harness.agents.foreign_session import SessionSource
from crashmatrix.harness.agents.reference import ReferenceAdapter
from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.front.collection import double_plan
from crashmatrix.harness.plan.enumeration import (
    DOUBLE_BOUNDARIES,
    DOUBLE_FRAMEWORK,
    adapter_double_unreachable,
    double_points,
    double_unreachable,
)

ROOT = Path(__file__).resolve().parents[3]
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
    assert why is not None and why.startswith("adapter team is a Python adapter that does not append")


def _spec(name: str) -> Any:
    return load_foreign(ROOT / name)


def test_a_team_s_agent_gets_the_column_where_its_effects_are_each_life_s_and_its_session_a_log() -> None:
    # Its effects are served by the life (services, the mock tools over HTTP or MCP), its
    # session a JSONL file every line of both lives stays in.
    for name in (
        "tests/harness/lives/data/double_mailer/adapter.yaml",  # kind 2, services: [mail]
        "examples/http_agent/adapter.yaml",  # kind 3, services: [orders, mail]
        "examples/blackbox_agent/adapter.yaml",  # kind 3, tools: harness
        "examples/mcp_plain/adapter.yaml",  # kind 3, tools: mcp (the relay's calls run in the life)
    ):
        assert double_unreachable("team", False, _spec(name)) is None, name


def test_a_team_s_agent_whose_lives_cannot_be_told_apart_is_not_reachable_saying_why() -> None:
    cases = {
        "examples/langgraph_team/adapter.yaml": "keeps its session in its framework's store",
        "tests/golden/no_ledger/adapter.yaml": "makes effects the harness finds by probing the world",
        "tests/golden/mcp_proxy/adapter.yaml": "makes effects the harness finds by probing the world",
        "examples/python_agent/adapter.yaml": "calls only tools of its own",
    }
    for name, reason in cases.items():
        why = double_unreachable("team", False, _spec(name))
        assert why is not None and why.startswith(f"adapter team {reason}"), (name, why)
    rows = dataclasses.replace(
        _spec("examples/http_agent/adapter.yaml"), source=SessionSource(kind="sqlite", path="s.db", query="q")
    )
    why = double_unreachable("team", False, rows)
    assert why is not None and "keeps its session where the harness reads rows, not a log" in why


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
    assert {k: gap[k] for k in expected} == expected and "neither its lines nor its effects" in gap["why"]
    assert gap["points"] == [p.id for p in double_points(POINTS)]


def test_no_double_resume_deselects_the_column_naming_the_option() -> None:
    items, gaps = double_plan(ReferenceAdapter(), POINTS, on=False)  # type: ignore[arg-type]
    assert items == [] and [(g["state"], g["why"]) for g in gaps] == [("deselected", "--no-double-resume")]


def test_read_off_an_adapter_a_framework_store_says_so_and_a_spec_that_is_no_adapter_file_is_none() -> None:
    class Framework:
        name = "langgraph:team.graph:build"
        framework_store = True

    class Other:  # a Python adapter whose `spec` is not an adapter file's (its --agent text)
        name = "team"
        spec = "team.agent:build"

    why = adapter_double_unreachable(Framework.name, Framework())
    assert why == f"adapter {Framework.name} {DOUBLE_FRAMEWORK}"
    assert adapter_double_unreachable("team", Other()) == double_unreachable("team", False)
    assert adapter_double_unreachable("reference", ReferenceAdapter()) is None
