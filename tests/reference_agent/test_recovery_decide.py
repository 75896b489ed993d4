"""``recovery.decide`` branch by branch, on hand-built ledgers: no files, no processes."""

from __future__ import annotations

from typing import Any

import pytest

from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.ledger import CallSite, PendingCall
from crashmatrix.harness.core.records import ExecutionRecord, ToolCall
from crashmatrix.reference_agent.recovery import Decision, decide

SHA = "a" * 64
CALL = ToolCall("call_1", "tool_x", "{}")
LOOKUP = "lookup_x"

REPLAY_AUTO = ToolContract("tool_x", idempotency="idempotent", replay_policy="auto", recovery="replay")
REPLAY_ASK = ToolContract("tool_x", idempotency="conditional", replay_policy="ask", recovery="replay")
PRECONDITION = ToolContract(
    "tool_x", idempotency="conditional", replay_policy="auto", recovery="precondition"
)
RECONCILE = ToolContract("tool_x", recovery="reconcile", lookup_tool=LOOKUP)
SURFACE = ToolContract("tool_x", recovery="surface_uncertain")
MANUAL = ToolContract("tool_x", idempotency="conditional", replay_policy="ask", recovery="manual")


def rec(
    status: str,
    *,
    eid: str = "exec_1",
    tool: str = "tool_x",
    sha: str = SHA,
    result: dict[str, Any] | None = None,
) -> ExecutionRecord:
    return ExecutionRecord(eid, CALL.id, status, tool, "key_1", sha, result=result)


def pending(*records: ExecutionRecord) -> PendingCall:
    grouped: dict[str, list[ExecutionRecord]] = {}
    for record in records:
        grouped.setdefault(record.execution_id, []).append(record)
    return PendingCall(CallSite(CALL, 1, 1), tuple((k, tuple(v)) for k, v in grouped.items()))


def act(p: PendingCall, contract: ToolContract = SURFACE) -> tuple[str, bool]:
    decision = decide(p, contract, SHA)
    assert isinstance(decision, Decision) and decision.reason
    return decision.action, decision.close_running


def test_no_ledger_goes_back_through_the_router() -> None:
    assert act(pending()) == ("execute", False)


def test_approved_but_never_started_asks_again() -> None:
    assert act(pending(rec("approved"))) == ("reask", False)


def test_rejected_is_rebuilt_not_executed() -> None:
    assert act(pending(rec("approved"), rec("rejected"))) == ("rebuild_rejection", False)
    assert act(pending(rec("rejected"))) == ("rebuild_rejection", False)


@pytest.mark.parametrize("status", ["succeeded", "failed"])
def test_a_terminal_result_is_replayed_whatever_the_contract(status: str) -> None:
    history = pending(rec("approved"), rec("running"), rec(status, result={"ok": status == "succeeded"}))
    for contract in (REPLAY_AUTO, PRECONDITION, RECONCILE, SURFACE, MANUAL):
        assert act(history, contract) == ("replay_result", False)


@pytest.mark.parametrize(
    ("contract", "action"),
    [
        (REPLAY_AUTO, "retry"),
        (REPLAY_ASK, "ask_then_retry"),
        (PRECONDITION, "precondition"),
        (RECONCILE, "reconcile"),
        (SURFACE, "surface_uncertain"),
        (MANUAL, "manual"),
    ],
)
def test_running_closes_the_execution_then_follows_the_contract(contract: ToolContract, action: str) -> None:
    assert act(pending(rec("approved"), rec("running")), contract) == (action, True)


def test_replay_with_policy_never_surfaces_the_uncertainty() -> None:
    never = ToolContract("tool_x", idempotency="conditional", replay_policy="never", recovery="replay")
    assert act(pending(rec("approved"), rec("running")), never) == ("surface_uncertain", True)


@pytest.mark.parametrize(
    ("contract", "action"),
    [
        (REPLAY_AUTO, "retry"),
        (PRECONDITION, "precondition"),
        (RECONCILE, "reconcile"),
        (SURFACE, "surface_uncertain"),
    ],
)
def test_an_unknown_recovery_wrote_itself_is_acted_on_by_contract_without_closing_again(
    contract: ToolContract, action: str
) -> None:
    interrupted = rec("unknown", result={"status": "unknown", "interrupted": True})
    assert act(pending(rec("approved"), rec("running"), interrupted), contract) == (action, False)


def test_an_unknown_the_tool_reported_is_reconciled_when_the_contract_has_a_lookup() -> None:
    said = rec("unknown", result={"status": "unknown", "code": "SIDE_EFFECT_UNCERTAIN"})
    history = pending(rec("approved"), rec("running"), said)
    assert act(history, RECONCILE) == ("reconcile", False)
    # Without a lookup there is nothing to ask: the stored uncertain result is the answer.
    assert act(history, SURFACE) == ("replay_result", False)


def test_a_changed_arguments_hash_is_a_conflict_and_never_a_replay() -> None:
    stale = "b" * 64
    history = pending(rec("approved", sha=stale), rec("running", sha=stale))
    assert act(history, REPLAY_AUTO) == ("conflict", True)
    done = pending(
        rec("approved", sha=stale), rec("running", sha=stale), rec("succeeded", sha=stale, result={})
    )
    assert act(done, REPLAY_AUTO) == ("conflict", False)
    # Any attempt with another hash counts, not only the latest.
    mixed = pending(rec("approved", sha=stale), rec("rejected", sha=stale), rec("approved", eid="exec_2"))
    assert act(mixed, REPLAY_AUTO)[0] == "conflict"


def test_a_lookup_that_found_nothing_leads_to_reconcile_a_lookup_that_found_is_replayed() -> None:
    first = (rec("approved"), rec("running"), rec("unknown", result={"interrupted": True}))
    lookup = (rec("approved", eid="exec_2", tool=LOOKUP), rec("running", eid="exec_2", tool=LOOKUP))
    missing = rec("succeeded", eid="exec_2", tool=LOOKUP, result={"ok": True, "found": False})
    found = rec("succeeded", eid="exec_2", tool=LOOKUP, result={"ok": True, "found": True})
    assert act(pending(*first, *lookup, missing), RECONCILE) == ("reconcile", False)
    assert act(pending(*first, *lookup, found), RECONCILE) == ("replay_result", False)


def test_an_interrupted_lookup_is_looked_up_again() -> None:
    first = (rec("approved"), rec("running"), rec("unknown", result={"interrupted": True}))
    lookup = (rec("approved", eid="exec_2", tool=LOOKUP), rec("running", eid="exec_2", tool=LOOKUP))
    assert act(pending(*first, *lookup), RECONCILE) == ("reconcile", True)


@pytest.mark.parametrize(("purpose", "tool"), [("reconcile", LOOKUP), ("retry_with_key", "tool_x")])
def test_an_approval_recovery_gave_itself_carries_the_reconcile_on_instead_of_asking_the_user(
    purpose: str, tool: str
) -> None:
    first = (rec("approved"), rec("running"), rec("unknown", result={"interrupted": True}))
    own = ExecutionRecord("exec_2", CALL.id, "approved", tool, "key_1", SHA, extra={"purpose": purpose})
    assert act(pending(*first, own), RECONCILE) == ("reconcile", False)
    # An approval the user gave is still asked again.
    assert act(pending(rec("approved")), RECONCILE) == ("reask", False)
