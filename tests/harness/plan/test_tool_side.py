"""harness.plan.enumeration: the tool-side columns' items come from the clean run's ``mcp_call``
events (an MCP server's, the mock tools', the loopback services'), one per kind and call, in
an order every run gives; a team's own tool functions get none, and each column that cannot
act says why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crashmatrix.harness.core.boundaries import CrashPoint, parse_point
from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS, tool_faults_acted, tool_side_calls
from crashmatrix.harness.plan.enumeration import (
    OWN_FUNCTIONS,
    STDIO_KEEPS_RESPONSES,
    TOOL_SIDE_COLUMNS,
    adapter_tool_side_unreachable,
    tool_side_points,
    tool_side_unreachable,
)

ROOT = Path(__file__).resolve().parents[3]


def _mcp(call: str, tool: str = "send_email", life: int = 1, **extra: Any) -> dict[str, Any]:
    return {"event": "mcp_call", "call": call, "tool": tool, "life": life, **extra}


def test_each_kind_gets_one_item_per_call_that_reached_the_tool_side_in_life_one() -> None:
    trace = [
        {"event": "boundary", "boundary": "after_running", "call": "call_a", "occurrence": 1, "life": 1},
        _mcp("call_a"),
        _mcp("call_a"),  # the agent's own retry: the fault acts on the first request, one item
        _mcp("call_b", "read_file"),
        _mcp("call_c", life=2),  # a restarted life's call is no clean run's
        _mcp("mcp-unattributed-1", attributed=False),  # no model tool call to name a case by
    ]
    points = tool_side_points(trace)
    assert [p.id for p in points] == [
        f"{kind}[{call}]" for kind in TOOL_SIDE_KINDS for call in ("call_a", "call_b")
    ]
    assert TOOL_SIDE_COLUMNS == TOOL_SIDE_KINDS
    # An item's name is a point id: the rerun line's --crash parses back to it.
    assert all(parse_point(p.id) == p for p in points)


def test_calls_follow_the_crash_points_order_so_every_xdist_worker_collects_the_same_items() -> None:
    # An agent running a message's calls at once reaches the tool side in either order.
    one = [_mcp("call_2"), _mcp("call_1")]
    two = [_mcp("call_1"), _mcp("call_2")]
    order = [CrashPoint("after_running", "call_1"), CrashPoint("after_running", "call_2")]
    assert tool_side_points(one, order) == tool_side_points(two, order)
    assert [p.tool_call_id for p in tool_side_points(one, order)][:2] == ["call_1", "call_2"]
    # Without points naming them, the trace's order stands.
    assert [p.tool_call_id for p in tool_side_points(one)][:2] == ["call_2", "call_1"]


def test_a_team_s_own_tool_functions_have_no_tool_side_and_every_column_says_why() -> None:
    trace = [{"event": "boundary", "boundary": "after_running", "call": "c", "occurrence": 1, "life": 1}]
    assert tool_side_points(trace) == []
    why = tool_side_unreachable("team.yaml", "agent")
    assert set(why) == set(TOOL_SIDE_KINDS)
    assert all(text == f"adapter team.yaml: {OWN_FUNCTIONS}" for text in why.values())
    # The same agent calling crashmatrix's loopback services has a tool side there.
    assert tool_side_unreachable("team.yaml", "agent", services=("orders",)) == {}


def test_the_harness_s_mock_tools_and_services_take_every_column() -> None:
    # A Python adapter (the reference agent: no adapter file), an agent served the harness's
    # tools over HTTP, one calling the loopback services: the faults act at their backends.
    assert tool_side_unreachable("reference", None) == {}
    assert tool_side_unreachable("box.yaml", "harness") == {}
    assert tool_side_unreachable("box.yaml", "harness", services=("mail",)) == {}
    trace = [{"event": "mcp_call", "call": "call_1", "tool": "send_email", "via": "mock tools", "life": 1}]
    assert [p.id for p in tool_side_points(trace)] == [f"{kind}[call_1]" for kind in TOOL_SIDE_KINDS]


def test_an_intercepted_function_runs_the_mock_tools_and_takes_every_column() -> None:
    """``tools: agent`` with ``intercept:``: the intercepted functions are replaced by the mock
    tools, where the faults act (their calls reach the tool side; a tool the agent kept its
    own has no ``mcp_call``, so no item). Not its own functions, then: n.a. would be untrue."""
    assert tool_side_unreachable("state.yaml", "agent", intercepts=("send_email",)) == {}
    assert "intercept:" in OWN_FUNCTIONS  # the n.a. reason names the way to get the columns


def test_the_columns_are_read_off_an_adapter_s_spec_as_every_front_door_reads_them() -> None:
    from crashmatrix.harness.agents.loading import load_adapter

    seed000 = load_adapter(str(ROOT / "examples" / "seed000_agent" / "adapter.yaml"))
    assert adapter_tool_side_unreachable("seed000", getattr(seed000, "spec", None)) == {}
    desk = load_adapter(str(ROOT / "examples" / "desk_agent" / "adapter.yaml"))  # its own tools
    assert set(adapter_tool_side_unreachable("desk", getattr(desk, "spec", None))) == set(TOOL_SIDE_KINDS)
    assert adapter_tool_side_unreachable("reference", None) == {}  # a Python adapter: no spec


def test_over_stdio_only_the_lost_response_is_not_reachable_and_over_http_every_column_is() -> None:
    assert tool_side_unreachable("desk.yaml", "mcp", "stdio") == {"tool_response_lost": STDIO_KEEPS_RESPONSES}
    assert "a pipe does not lose one message" in STDIO_KEEPS_RESPONSES
    assert tool_side_unreachable("desk.yaml", "mcp", "http") == {}


def test_the_verdict_reads_which_fault_acted_and_what_the_agent_asked_the_tool_side_after() -> None:
    trace = [
        _mcp("call_1"),
        {"event": "fault", "fault": "power_loss", "acted": True},  # not a tool-side fault
        {"event": "fault", "fault": "tool_server_died", "call": "call_1", "acted": True, "life": 1},
        {"event": "fault", "fault": "tool_result_error", "call": "call_2", "acted": False},  # did nothing
        _mcp("call_9", "get_order_by_idempotency_key", life=2),
        _mcp("call_1", life=2),
    ]
    (fault,) = tool_faults_acted(trace)
    assert (fault.kind, fault.call) == ("tool_server_died", "call_1")
    assert fault.retried() and fault.asked("get_order_by_idempotency_key") and not fault.asked("read_file")
    assert tool_side_calls(trace) == ["call_1", "call_9"]
    assert tool_side_calls(trace, life=2) == ["call_9", "call_1"]
