"""harness.plan.enumeration: the crash points a trace shows, ``during_side_effect`` included."""

from __future__ import annotations

from crashmatrix.harness.core.boundaries import BOUNDARIES, CrashPoint, parse_point
from crashmatrix.harness.plan.enumeration import points_from_trace, recovery_window


def _boundary(name: str, call: str, occurrence: int = 1, life: int = 1) -> dict[str, object]:
    return {"life": life, "event": "boundary", "boundary": name, "call": call, "occurrence": occurrence}


def test_during_side_effect_sits_between_running_and_the_side_effect() -> None:
    assert BOUNDARIES.index("after_running") + 1 == BOUNDARIES.index("during_side_effect")
    assert BOUNDARIES.index("during_side_effect") + 1 == BOUNDARIES.index("after_side_effect")


def test_each_step_of_an_effect_is_a_point_whose_occurrence_is_the_step() -> None:
    trace = [
        _boundary("after_running", "call_log"),
        _boundary("during_side_effect", "call_log", 1),
        _boundary("during_side_effect", "call_log", 2),
        _boundary("after_side_effect", "call_log"),
        _boundary("during_side_effect", "call_log", 1, life=2),  # another life: not this plan
    ]
    points = points_from_trace(trace)
    assert [p.id for p in points] == [
        "after_running[call_log]",
        "during_side_effect[call_log]",
        "during_side_effect[call_log#2]",
        "after_side_effect[call_log]",
    ]
    assert parse_point("during_side_effect[call_log#2]") == CrashPoint("during_side_effect", "call_log", 2)


def test_an_agent_running_calls_at_once_gets_its_points_grouped_by_call_in_the_scripts_order() -> None:
    from pathlib import Path

    from crashmatrix.harness.core.scenario import Scenario
    from crashmatrix.harness.core.script import Reply, Rule, When
    from crashmatrix.harness.plan.enumeration import by_call

    rule = Rule(When(), Reply(tool_calls=(("call_a", "send_email", {}), ("call_b", "create_order", {}))))
    scenario = Scenario(Path("s.yaml"), "s", (), {}, (), (rule,))

    def run(*names: str) -> list[CrashPoint]:
        return [CrashPoint(name.split("@")[0], name.split("@")[1]) for name in names]

    one = run(
        "after_tool_call_saved@call_a",
        "after_tool_call_saved@call_b",
        "after_running@call_b",
        "after_running@call_a",
        "after_side_effect@call_a",
        "after_side_effect@call_b",
        "x@call_zz",
    )
    two = run(
        "after_tool_call_saved@call_a",
        "after_tool_call_saved@call_b",
        "after_running@call_a",
        "after_side_effect@call_a",
        "after_running@call_b",
        "after_side_effect@call_b",
        "x@call_zz",
    )
    # Two interleavings of the same calls: one order of items, each call's own in its order.
    assert (
        by_call(one, scenario)
        == by_call(two, scenario)
        == run(
            "after_tool_call_saved@call_a",
            "after_running@call_a",
            "after_side_effect@call_a",
            "after_tool_call_saved@call_b",
            "after_running@call_b",
            "after_side_effect@call_b",
            "x@call_zz",
        )
    )


def test_the_recovery_window_has_the_recovering_lifes_torn_writes_only_when_asked() -> None:
    # Its session appends before it asks the model, in the order passed; never life 1's.
    trace = [
        {"life": 1, "event": "append", "call": "c", "label": "running", "occurrence": 1},
        {"life": 2, "event": "append", "call": "c", "label": "unknown", "occurrence": 1},
        {"life": 2, "event": "boundary", "boundary": "before_tool_result", "call": "c", "occurrence": 1},
        {"life": 2, "event": "append", "call": "c", "label": "tool_result", "occurrence": 1},
        {"life": 2, "event": "model_request"},
        {"life": 2, "event": "append", "call": "d", "label": "approved", "occurrence": 1},
    ]
    assert [p.id for p in recovery_window(trace)] == ["before_tool_result[c]"]
    assert [p.id for p in recovery_window(trace, torn=True)] == [
        "torn_write[c:unknown]",
        "before_tool_result[c]",
        "torn_write[c:tool_result]",
    ]
