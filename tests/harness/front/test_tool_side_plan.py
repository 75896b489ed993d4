"""harness.front.collection.tool_side_plan: which tool-side items a scenario gets and which
cells say why they have none (a team's own tool functions, a run none of whose calls reached
the tool side), as the power column has it (not reachable with why, or
deselected by the switch or --crash-boundary); never a cell left silently empty."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS
from crashmatrix.harness.front.collection import tool_side_plan
from crashmatrix.harness.plan.enumeration import NOTHING_REACHED, OWN_FUNCTIONS

RECORDED = [CrashPoint("after_running", "call_a"), CrashPoint("after_running", "call_b")]
TOOL_SIDE = [CrashPoint(kind, call) for kind in TOOL_SIDE_KINDS for call in ("call_a", "call_b")]


@dataclass(frozen=True)
class Spec:
    tools: str
    mcp_transport: str = "stdio"


@dataclass(frozen=True)
class Adapter:
    name: str
    spec: Any = None


def _by_column(gaps: list[dict[str, Any]]) -> dict[str, tuple[str, str, list[str]]]:
    return {gap["boundary"]: (gap["state"], gap["why"], gap["points"]) for gap in gaps}


def test_own_tool_functions_get_no_item_and_each_column_is_not_reachable_for_its_calls() -> None:
    items, gaps = tool_side_plan(Adapter("team.yaml", Spec("agent")), RECORDED, (), ())
    assert items == []
    columns = _by_column(gaps)
    assert set(columns) == set(TOOL_SIDE_KINDS)
    for state, why, points in columns.values():
        assert state == "not_reachable" and points == ["call_a", "call_b"]
        assert why == f"adapter team.yaml: {OWN_FUNCTIONS}"


def test_the_mock_tools_get_an_item_per_call_and_a_run_where_none_reached_them_says_so() -> None:
    # The reference agent (no adapter file) and a black box served the harness's tools.
    for adapter in (Adapter("reference"), Adapter("box.yaml", Spec("harness"))):
        items, gaps = tool_side_plan(adapter, RECORDED, TOOL_SIDE, ())
        assert (items, gaps) == (TOOL_SIDE, [])
        items, gaps = tool_side_plan(adapter, RECORDED, (), ())
        assert items == []
        assert {
            column: (state, why) for column, (state, why, _) in _by_column(gaps).items()
        } == dict.fromkeys(TOOL_SIDE_KINDS, ("not_reachable", NOTHING_REACHED))
    # No call at all (a conversation without tools): nothing to say of any call.
    assert tool_side_plan(Adapter("reference"), (), (), ()) == ([], [])


def test_an_mcp_agent_over_stdio_gets_every_column_but_the_lost_response() -> None:
    items, gaps = tool_side_plan(Adapter("desk.yaml", Spec("mcp")), RECORDED, TOOL_SIDE, ())
    assert [p.boundary for p in items] == [
        k for k in TOOL_SIDE_KINDS if k != "tool_response_lost" for _ in "ab"
    ]
    ((column, (state, why, points)),) = _by_column(gaps).items()
    assert (column, state, points) == ("tool_response_lost", "not_reachable", ["call_a", "call_b"])
    assert "a pipe does not lose one message" in why
    items, gaps = tool_side_plan(Adapter("desk.yaml", Spec("mcp", "http")), RECORDED, TOOL_SIDE, ())
    assert items == TOOL_SIDE and gaps == []


def test_the_switch_and_crash_boundary_deselect_the_items_with_their_ids() -> None:
    http = Adapter("desk.yaml", Spec("mcp", "http"))
    items, gaps = tool_side_plan(http, RECORDED, TOOL_SIDE, (), on=False)
    assert items == []
    columns = _by_column(gaps)
    assert set(columns) == set(TOOL_SIDE_KINDS)
    assert columns["tool_server_died"] == (
        "deselected",
        "--no-tool-side-faults",
        ["tool_server_died[call_a]", "tool_server_died[call_b]"],
    )
    items, gaps = tool_side_plan(http, RECORDED, TOOL_SIDE, ("tool_result_error", "tool_server_died[call_b]"))
    assert [p.id for p in items] == [
        "tool_server_died[call_b]",
        "tool_result_error[call_a]",
        "tool_result_error[call_b]",
    ]
    columns = _by_column(gaps)
    assert columns["tool_server_died"][2] == ["tool_server_died[call_a]"]
    assert columns["tool_response_lost"][1] == "--crash-boundary tool_result_error tool_server_died[call_b]"
    assert {state for state, _, _ in columns.values()} == {"deselected"}
