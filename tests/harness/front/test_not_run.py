"""The points of a scenario that get no test item, and why (``collection.not_run``): what the
report shows as "not reachable by this agent" or "deselected" instead of an empty cell."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from crashmatrix.harness.core.boundaries import BOUNDARIES, CrashPoint
from crashmatrix.harness.front.collection import not_run, reachable_boundaries, unreachable_why
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.plan.enumeration import selected

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = load_scenario(ROOT / "examples" / "blackbox_agent" / "scenario.yaml")
EDGES = ("after_model_reply", "after_running", "after_side_effect")
# What a black box's clean run records: its model and service edges only.
RECORDED = [CrashPoint(b, "call_order") for b in EDGES]
BLACK_BOX: object = SimpleNamespace(name="order-desk", boundaries=EDGES, spec=SimpleNamespace(kind="command"))
NATIVE: object = SimpleNamespace(name="reference", boundaries=BOUNDARIES, tears_writes=True)


def test_a_black_box_gets_not_reachable_for_every_boundary_its_clean_run_cannot_show() -> None:
    gaps = not_run(BLACK_BOX, SCENARIO, RECORDED, RECORDED, ())  # type: ignore[arg-type]
    assert [(g["boundary"], g["state"], g["points"]) for g in gaps] == [
        ("after_tool_call_pending", "not_reachable", ["call_order"]),
        ("after_tool_call_saved", "not_reachable", ["call_order"]),
        ("after_approved", "not_reachable", ["call_order"]),
        ("during_side_effect", "not_reachable", ["call_order"]),
        ("before_tool_result", "not_reachable", ["call_order"]),
        ("after_tool_result", "not_reachable", ["call_order"]),
        ("torn_write", "not_reachable", ["call_order"]),
    ]
    assert gaps[0]["why"] == (
        "kind 3 black box: the harness crashes it only at its model and service edges "
        "(after_model_reply, after_running, after_side_effect)"
    )
    assert gaps[6]["why"] == "kind 3 black box: it writes its own session, so the harness cannot tear a write"
    assert reachable_boundaries(BLACK_BOX) == EDGES  # type: ignore[arg-type]


def test_an_adapter_that_says_why_it_cannot_tear_is_quoted() -> None:
    adapter = SimpleNamespace(**vars(BLACK_BOX), torn_write_unreachable="its session is a SQLite database")
    assert unreachable_why(adapter, "torn_write") == "its session is a SQLite database"  # type: ignore[arg-type]


def test_an_agent_that_reaches_everything_has_no_gap() -> None:
    assert not_run(NATIVE, SCENARIO, RECORDED, RECORDED, ()) == []  # type: ignore[arg-type]
    assert reachable_boundaries(NATIVE)[-1] == "torn_write"  # type: ignore[arg-type]


def test_points_removed_by_crash_boundary_and_depth_two_turned_off_are_deselected_with_why() -> None:
    only = ["after_model_reply", "after_running"]
    chosen = selected(RECORDED, SCENARIO, only)
    gaps = not_run(NATIVE, SCENARIO, RECORDED, chosen, only, recovery="--no-recovery-crashes")  # type: ignore[arg-type]
    assert gaps == [
        {
            "boundary": "after_side_effect",
            "state": "deselected",
            "why": "--crash-boundary after_model_reply after_running",
            "points": ["after_side_effect[call_order]"],
        },
        {
            "boundary": "recovery",
            "state": "deselected",
            "why": "--no-recovery-crashes",
            "points": ["after_running[call_order]"],
        },
    ]


def test_no_power_loss_deselects_the_power_column_of_every_first_passage_with_why() -> None:
    again = CrashPoint("after_running", "call_order", 2)  # a second passage gets no power@ case
    gaps = not_run(NATIVE, SCENARIO, [*RECORDED, again], [*RECORDED, again], (), power="--no-power-loss")  # type: ignore[arg-type]
    assert gaps == [
        {
            "boundary": "power_loss",
            "state": "deselected",
            "why": "--no-power-loss",
            "points": [p.id for p in RECORDED],
        }
    ]


def test_an_agent_whose_fsyncs_are_not_visible_has_its_power_column_not_reachable_with_why() -> None:
    why = "kind 3 black box: its fsyncs happen in another process"
    gaps = not_run(BLACK_BOX, SCENARIO, RECORDED, RECORDED, (), power=why, power_state="not_reachable")  # type: ignore[arg-type]
    assert gaps[-1] == {
        "boundary": "power_loss",
        "state": "not_reachable",
        "why": why,
        "points": [p.id for p in RECORDED],
    }


def test_an_adapter_that_names_why_per_boundary_is_quoted() -> None:
    sdk = SimpleNamespace(
        name="sdk",
        boundaries=("after_running",),
        unreachable={"after_approved": "the SDK has no approval step before a tool runs"},
    )
    assert unreachable_why(sdk, "after_approved") == "the SDK has no approval step before a tool runs"  # type: ignore[arg-type]
    assert "does not list before_tool_result" in unreachable_why(sdk, "before_tool_result")  # type: ignore[arg-type]


def test_a_covered_boundary_an_agent_reaches_only_under_a_condition_is_not_reachable_with_why() -> None:
    # A framework agent lists after_approved but passes it only where a call asks approval.
    asks_sometimes: object = SimpleNamespace(name="sdk", boundaries=(*EDGES, "after_approved"))
    gaps = not_run(asks_sometimes, SCENARIO, RECORDED, RECORDED, (), unpassed=["after_approved"])  # type: ignore[arg-type]
    [gap] = [g for g in gaps if g["boundary"] == "after_approved"]
    assert gap["state"] == "not_reachable" and gap["points"] == ["call_order"]
    assert gap["why"].startswith(
        "the scenario covers after_approved, which sdk reaches only under some condition"
    )


def test_a_boundary_only_silent_adapter_rules_feed_is_not_reachable_with_the_rule_and_why() -> None:
    from crashmatrix.harness.agents.python_agent import SilentRule

    reached = ("after_model_reply", "after_tool_call_saved", "after_side_effect", "after_tool_result")
    kind_two = SimpleNamespace(name="mailer", boundaries=reached, spec=SimpleNamespace(kind="python"))
    recorded = [CrashPoint(b, "call_mail") for b in reached if b != "after_side_effect"]
    silent = SilentRule(
        "adapter.yaml:30:5", "boundary", "send_email", "after_side_effect", "HANDLERS['send_email'] holds it"
    )
    before = not_run(kind_two, SCENARIO, recorded, recorded, ())  # type: ignore[arg-type]
    # Without the trace's word, nothing says why the clean run never passed the send.
    assert "after_side_effect" not in [g["boundary"] for g in before]
    gaps = not_run(kind_two, SCENARIO, recorded, recorded, (), silent=[silent])  # type: ignore[arg-type]
    (gap,) = [g for g in gaps if g["boundary"] == "after_side_effect"]
    assert (gap["state"], gap["points"]) == ("not_reachable", ["call_mail"])
    assert gap["why"] == (
        "boundary rule adapter.yaml:30:5 (send_email -> after_side_effect) never fired: "
        "HANDLERS['send_email'] holds it"
    )
    # No other column's note claims the agent reaches it.
    others = [g["why"] for g in gaps if g["boundary"] != "after_side_effect"]
    assert others and all("after_side_effect" not in why for why in others), others
    # A rule whose function ran but whose where: never held may wait for what this scenario
    # lacks (an approval asked): its column stays "not reached", as the reference agent's.
    waiting = SilentRule("adapter.yaml:30:5", "boundary", "send_email", "after_side_effect", "w", True)
    assert not [
        g
        for g in not_run(kind_two, SCENARIO, recorded, recorded, (), silent=[waiting])  # type: ignore[arg-type]
        if g["boundary"] == "after_side_effect"
    ]
    # A clean run that made no tool call shows nothing to be reachable for: no such gap.
    assert not [
        g
        for g in not_run(kind_two, SCENARIO, [], [], (), silent=[silent])
        if g["boundary"] == "after_side_effect"
    ]  # type: ignore[arg-type]
