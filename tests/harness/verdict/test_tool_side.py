"""The verdict of a tool-side column's case: the invariants judge it, not the scenario's
expectations, and ``no_success_without_answer`` fails a Tool Result that claims a call
succeeded when a tool-side fault left the agent no answer and it never got one after."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.records import entry_from_json
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.script import Reply, Rule, When
from crashmatrix.harness.core.session_log import SessionLog
from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS, ToolFaultActed
from crashmatrix.harness.core.trace import LifeRecord
from crashmatrix.harness.observation.observation import Observation, WorldView
from crashmatrix.harness.verdict.invariants import Evidence, check_all, no_success_without_answer
from crashmatrix.harness.verdict.verdict import judge

Raw = dict[str, Any]
ORDER = ToolContract(
    name="create_order", idempotency="non_idempotent", replay_policy="reconcile", lookup_tool="get_order"
)


def _call(call_id: str, name: str) -> Raw:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def _conversation(call_id: str, name: str, told: Mapping[str, Any]) -> list[Raw]:
    messages: list[Raw] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [_call(call_id, name)]},
        {"role": "tool", "tool_call_id": call_id, "content": json.dumps(dict(told))},
        {"role": "assistant", "content": "done"},
    ]
    return [{"type": "message", "message": m} for m in messages]


def _evidence(lines: Sequence[Raw], *faults: ToolFaultActed) -> Evidence:
    entries = [entry_from_json(line) for line in lines]
    return Evidence(
        entries=entries,
        offsets=[100 * (i + 1) for i in range(len(entries))],
        events=(),
        requests=(),
        turns=("go",),
        contracts={"create_order": ORDER},
        tool_faults=faults,
    )


SUCCEEDED = {"ok": True, "content": "order ord_1 created"}
UNCERTAIN = {"ok": False, "code": "SIDE_EFFECT_UNCERTAIN", "content": "the server died; it may have happened"}


@pytest.mark.parametrize("kind", TOOL_SIDE_KINDS)
def test_told_succeeded_after_a_fault_left_no_answer_fails_naming_the_call_and_the_fault(kind: str) -> None:
    lines = _conversation("call_1", "read_file", SUCCEEDED)
    (violation,) = no_success_without_answer(_evidence(lines, ToolFaultActed(kind, "call_1")))
    assert violation.tool_call_id == "call_1"
    assert "'call_1' (read_file, Tool Result line 3)" in violation.message
    assert f"told 'succeeded' after {kind}" in violation.message
    nothing_ran = "an error result came back and nothing ran" in violation.message
    assert nothing_ran == (kind == "tool_result_error")


def test_the_truth_told_or_an_answer_found_after_the_fault_passes() -> None:
    sent = _conversation("call_1", "create_order", SUCCEEDED)
    died = ToolFaultActed("tool_server_died", "call_1")
    # told uncertain: the truth
    assert (
        no_success_without_answer(_evidence(_conversation("call_1", "create_order", UNCERTAIN), died)) == []
    )
    # sent again (a keyed retry answers with the outcome) or looked up with its contract's tool
    retried = ToolFaultActed("tool_server_died", "call_1", (("call_1", "create_order"),))
    looked_up = ToolFaultActed("tool_server_died", "call_1", (("lookup-1", "get_order"),))
    assert no_success_without_answer(_evidence(sent, retried)) == []
    assert no_success_without_answer(_evidence(sent, looked_up)) == []
    # asking another tool is no answer about this call
    elsewhere = ToolFaultActed("tool_server_died", "call_1", (("call_2", "read_file"),))
    assert len(no_success_without_answer(_evidence(sent, elsewhere))) == 1
    # and a fault on another call says nothing of this one
    assert no_success_without_answer(_evidence(sent, ToolFaultActed("tool_server_died", "call_2"))) == []
    # without a fault, success is the clean run's and nothing to judge here
    assert no_success_without_answer(_evidence(sent)) == []


def test_two_tool_results_for_one_call_after_a_restart_break_only_one_tool_result_per_call() -> None:
    # OpenHands' report: a sandbox restart, and two observations for one tool_call_id.
    lines = _conversation("call_1", "create_order", UNCERTAIN)
    lines.insert(3, lines[2])
    violations = check_all(_evidence(lines, ToolFaultActed("tool_server_died", "call_1")))
    assert {v.invariant for v in violations} == {"one_tool_result_per_call"}
    lied = _conversation("call_1", "create_order", SUCCEEDED)
    violations = check_all(_evidence(lied, ToolFaultActed("tool_result_error", "call_1")))
    assert "no_success_without_answer" in {v.invariant for v in violations}


MAIL = Scenario(
    path=Path("mail.yaml"),
    name="mail",
    tools=("send_email",),
    contracts={"send_email": ToolContract(name="send_email")},
    turns=("Send it",),
    rules=(
        Rule(When(role="user"), Reply(tool_calls=(("call_mail", "send_email", {}),))),
        Rule(When(role="tool"), Reply(content="Sent.")),
    ),
    # A crash's expectation: the email goes out once whatever happens. A tool that answered
    # an error before anything ran leaves none, and the agent that says so is right.
    expect={"default": {"world": {"emails": 1}, "told": {"call_mail": "succeeded"}}},
)


def _case(told: Mapping[str, Any], fault: str) -> Observation:
    lines = _conversation("call_mail", "send_email", told)
    lines[0]["message"]["content"] = "Send it"
    entries = tuple(entry_from_json(line) for line in lines)
    trace = (
        {"life": 1, "event": "mcp_call", "call": "call_mail", "tool": "send_email"},
        {"life": 1, "event": "fault", "fault": fault, "call": "call_mail", "acted": True},
    )
    requests = tuple(
        {"model": "scripted", "messages": [dict(e.message.to_json()) for e in entries[:end]]}  # type: ignore[union-attr]
        for end in (1, 3)
    )
    return Observation(
        case_dir=Path("/nonexistent"),
        lives=(LifeRecord(1, None, "exited", 0, 0.1),),
        trace=trace,
        session=SessionLog(
            Path("session.jsonl"), entries, offsets=tuple(100 * (i + 1) for i in range(len(entries)))
        ),
        world=WorldView({"emails": 0}, {}, ()),
        requests=requests,
        keeps_ledger=False,
    )


def test_a_tool_side_case_is_judged_by_the_invariants_not_by_the_scenarios_expectations() -> None:
    point = CrashPoint("tool_result_error", "call_mail")
    error = {"ok": False, "code": "TOOL_ERROR", "content": "send_email failed: the server said isError"}
    verdict = judge(_case(error, "tool_result_error"), MAIL, point)
    assert verdict.passed, verdict
    assert verdict.expected == {} and not verdict.mismatches
    assert "tool_result_error: judged by the invariants (a tool-side fault, not a crash)" in verdict.notes
    # The same observation judged as a crash would fail the scenario's world and told.
    assert {m.field for m in judge(_case(error, "tool_result_error"), MAIL, None).mismatches} >= {
        "world.emails"
    }
    # Told it went out, though nothing ran and nothing came back to say so: red, by the invariants.
    lied = judge(_case(SUCCEEDED, "tool_result_error"), MAIL, point)
    assert lied.status == "failed"
    assert {v.invariant for v in lied.violations} == {"no_success_without_answer", "told_the_truth"}
