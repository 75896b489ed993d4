"""Every recovery branch through ``Agent.resume()`` on a real session file and a real world.

Each test writes the session a dead agent would have left (or kills one in-process at a
boundary), starts a new agent on it, and checks the published Tool Result's ``recovery`` and
``code`` fields, the ledger, and -- what matters -- the world: how many orders, emails, writes.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from crashmatrix.harness.core.ledger import arguments_sha256
from crashmatrix.mock_tools import BASE_URL, FaultSpec
from crashmatrix.mock_tools.file_tools import plan_write
from crashmatrix.reference_agent.approval import ScriptedApprover

from .rig import (
    JSON,
    Rig,
    SimulatedCrash,
    agent_key,
    answer_any_tool_result,
    ask_then_answer,
    assistant_call,
    crash_at,
    ledger,
    user,
)

ORDER = {"item": "pen", "quantity": 2}
EMAIL = {"to": "ops@example.test", "subject": "deploy", "body": "done"}
WRITE = {"path": "notes.txt", "content": "new content"}


def scene(rig: Rig, call_id: str, name: str, args: dict[str, Any], *statuses: str, **extra: Any) -> JSON:
    """user + assistant call + ledger lines of one execution ``exec_old`` with the agent's key."""
    key, sha = agent_key(call_id, name, args), arguments_sha256(args)
    lines = [
        ledger("exec_old", call_id, s, name, key, sha, **(extra if s == "running" else {})) for s in statuses
    ]
    rig.write_session([user("please"), assistant_call(call_id, name, args), *lines])
    return {"key": key, "sha": sha}


def place_order(rig: Rig, key: str, call_id: str = "call_order") -> str:
    """The order the first attempt created before the process died (or its response was lost)."""
    response = rig.http.post(
        f"{BASE_URL}/orders",
        json=ORDER,
        headers={
            "Idempotency-Key": key,
            "X-Tool-Name": "create_order",
            "X-Tool-Call-Id": call_id,
            "X-Execution-Id": "exec_old",
        },
    )
    assert response.status_code == 201
    order_id: str = response.json()["id"]
    return order_id


def ledger_of(rig: Rig, call_id: str) -> list[tuple[str, str, str]]:
    return [
        (r["execution_id"], r["tool_name"], r["status"])
        for r in rig.records()
        if r["type"] == "tool_execution" and r["tool_call_id"] == call_id
    ]


def user_messages(rig: Rig) -> int:
    return sum(1 for r in rig.records() if r["type"] == "message" and r["message"]["role"] == "user")


# -- create_order: keyed, reconcile by lookup ---------------------------------------------------


def test_create_order_response_lost_is_reconciled_by_key_into_exactly_one_order(rig: Rig) -> None:
    ids = scene(rig, "call_order", "create_order", ORDER, "approved", "running")
    lost = {"ok": False, "status": "unknown", "execution_id": "exec_old", "code": "SIDE_EFFECT_UNCERTAIN"}
    rig.write_session(
        [
            *rig.records(),
            ledger("exec_old", "call_order", "unknown", "create_order", ids["key"], ids["sha"], result=lost),
        ]
    )
    order_id = place_order(rig, ids["key"])
    approver = ScriptedApprover()
    agent, _ = rig.agent(answer_any_tool_result(), approver=approver)

    assert agent.resume() == "done"

    published = rig.tool_results()["call_order"]
    assert published["recovery"] == "reconciled" and published["ok"] is True
    assert published["found"] is True and published["order"]["id"] == order_id
    assert rig.world.snapshot().counts["orders"] == 1
    assert approver.asked == [], "a lookup is read-only: nobody needs to approve it"
    assert user_messages(rig) == 1


def test_create_order_killed_after_the_side_effect_is_reconciled_not_recreated(rig: Rig) -> None:
    rules = ask_then_answer("call_order", "create_order", ORDER)
    first, _ = rig.agent(rules, hook=crash_at("after_side_effect", "call_order"))
    with pytest.raises(SimulatedCrash):
        first.run_turn("order two pens")
    first.close()
    assert rig.world.snapshot().counts["orders"] == 1

    second, _ = rig.agent(rules)
    second.resume()

    published = rig.tool_results()["call_order"]
    assert published["recovery"] == "reconciled" and published["found"] is True
    assert rig.world.snapshot().counts["orders"] == 1
    statuses = [status for _, _, status in ledger_of(rig, "call_order")]
    assert statuses[:3] == ["approved", "running", "unknown"]


def test_a_reconcile_lookup_killed_after_its_approval_continues_under_its_own_execution(rig: Rig) -> None:
    rules = ask_then_answer("call_order", "create_order", ORDER)
    first, _ = rig.agent(rules, hook=crash_at("after_side_effect", "call_order"))
    with pytest.raises(SimulatedCrash):
        first.run_turn("order two pens")
    first.close()
    # Life 2 dies right after approving its own lookup: the first after_approved it passes.
    second, _ = rig.agent(rules, hook=crash_at("after_approved", "call_order"))
    with pytest.raises(SimulatedCrash):
        second.resume()
    second.close()
    approver = ScriptedApprover()
    third, _ = rig.agent(rules, approver=approver)
    third.resume()

    published = rig.tool_results()["call_order"]
    assert published["recovery"] == "reconciled" and published["found"] is True
    assert rig.world.snapshot().counts["orders"] == 1
    assert approver.asked == [], "recovery's own lookup is not the user's to approve again"
    lookups = [(eid, status) for eid, tool, status in ledger_of(rig, "call_order") if tool != "create_order"]
    assert [status for _, status in lookups] == ["approved", "running", "succeeded"]
    assert len({eid for eid, _ in lookups}) == 1, "the interrupted lookup continued, none was left open"


def test_create_order_that_never_reached_the_service_is_retried_with_the_same_key(rig: Rig) -> None:
    ids = scene(rig, "call_order", "create_order", ORDER, "approved", "running")
    agent, _ = rig.agent(answer_any_tool_result())

    agent.resume()

    published = rig.tool_results()["call_order"]
    assert published["recovery"] == "reconciled" and published["ok"] is True
    [order] = rig.world.events("order")
    assert order.idempotency_key == ids["key"], "the retry must carry the original key"
    assert rig.world.snapshot().counts["orders"] == 1
    tools = [(tool, status) for _, tool, status in ledger_of(rig, "call_order")]
    assert ("get_order_by_idempotency_key", "succeeded") in tools
    assert tools[-1] == ("create_order", "succeeded")


def test_recovery_uses_the_idempotency_key_recorded_in_the_ledger_not_a_rederived_one(rig: Rig) -> None:
    """A ledger written under another key recipe (seed 000 writes ``<tool>:<sha256>``; a restart
    with another session id derives another key too). The service only knows the key that was
    SENT, which is the one in the ledger: recovery must look up and retry with that one."""
    sha = arguments_sha256(ORDER)
    recorded_key = f"create_order:{sha}"
    rig.write_session(
        [
            user("order two pens"),
            assistant_call("call_order", "create_order", ORDER),
            ledger("exec_old", "call_order", "approved", "create_order", recorded_key, sha),
            ledger("exec_old", "call_order", "running", "create_order", recorded_key, sha),
        ]
    )
    order_id = place_order(rig, recorded_key)
    agent, _ = rig.agent(answer_any_tool_result())

    agent.resume()

    published = rig.tool_results()["call_order"]
    keys = {r["idempotency_key"] for r in rig.records() if r["type"] == "tool_execution"}
    assert rig.world.snapshot().counts["orders"] == 1, (
        f"a second order was created: recovery used keys {sorted(keys)} instead of {recorded_key!r}"
    )
    assert published["found"] is True and published["order"]["id"] == order_id
    assert keys == {recorded_key}


# -- send_email: no key, surface the uncertainty --------------------------------------------------


def test_send_email_left_running_is_side_effect_uncertain_and_sends_nothing_more(rig: Rig) -> None:
    scene(rig, "call_mail", "send_email", EMAIL, "approved", "running")
    approver = ScriptedApprover()
    agent, _ = rig.agent(answer_any_tool_result(), approver=approver)

    agent.resume()

    published = rig.tool_results()["call_mail"]
    assert published["code"] == "SIDE_EFFECT_UNCERTAIN" and published["ok"] is False
    assert published["recovery"] == "side_effect_uncertain"
    assert published["metadata"]["retryable"] is False
    assert rig.world.snapshot().counts["emails"] == 0
    assert ledger_of(rig, "call_mail") == [
        ("exec_old", "send_email", "approved"),
        ("exec_old", "send_email", "running"),
        ("exec_old", "send_email", "unknown"),
    ]
    assert approver.asked == []


# -- approval --------------------------------------------------------------------------------------


def test_approved_but_not_started_asks_the_approver_again_and_continues_the_same_execution(rig: Rig) -> None:
    scene(rig, "call_w", "write_file", WRITE, "approved")
    approver = ScriptedApprover()
    agent, _ = rig.agent(answer_any_tool_result(), approver=approver)

    agent.resume()

    assert approver.asked == [("call_w", "write_file", True)]
    published = rig.tool_results()["call_w"]
    assert published["recovery"] == "reapproval" and published["ok"] is True
    assert published["execution_id"] == "exec_old"
    assert [s for _, _, s in ledger_of(rig, "call_w")] == ["approved", "approved", "running", "succeeded"]
    assert (rig.world.workspace / "notes.txt").read_text() == "new content"


def test_approved_but_not_started_and_refused_on_the_second_ask_is_rejected_without_running(rig: Rig) -> None:
    scene(rig, "call_w", "write_file", WRITE, "approved")
    approver = ScriptedApprover(again_answers={"*": "no"})
    agent, _ = rig.agent(answer_any_tool_result(), approver=approver)

    agent.resume()

    published = rig.tool_results()["call_w"]
    assert (published["code"], published["recovery"]) == ("REJECTED", "reapproval")
    assert [s for _, _, s in ledger_of(rig, "call_w")] == ["approved", "rejected"]
    assert not (rig.world.workspace / "notes.txt").exists()


def test_rejected_result_is_rebuilt_identically_from_status_and_execution_id(rig: Rig) -> None:
    rules = ask_then_answer("call_w", "write_file", WRITE)
    fixed = {"new_id": lambda: "exec_fixed"}
    # Life 1: the user says no, and the process dies before the rejection is published.
    first, _ = rig.agent(
        rules, approver=ScriptedApprover({"*": "no"}), hook=crash_at("before_tool_result"), **fixed
    )
    with pytest.raises(SimulatedCrash):
        first.run_turn("write notes")
    first.close()
    assert ledger_of(rig, "call_w") == [("exec_fixed", "write_file", "rejected")]
    approver = ScriptedApprover()
    second, _ = rig.agent(rules, approver=approver, **fixed)
    second.resume()
    rebuilt = rig.tool_results()["call_w"]
    # The same rejection, published without a crash, in a fresh session.
    rig.session.unlink()
    third, _ = rig.agent(rules, approver=ScriptedApprover({"*": "no"}), **fixed)
    third.run_turn("write notes")
    original = rig.tool_results()["call_w"]

    assert rebuilt.pop("recovery") == "rejected_rebuilt"
    assert rebuilt == original
    assert (original["code"], original["execution_id"]) == ("REJECTED", "exec_fixed")
    assert approver.asked == [], "a rejection is final: recovery must not ask again"
    assert not (rig.world.workspace / "notes.txt").exists()


# -- stored results ----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["succeeded", "failed"])
def test_a_stored_terminal_result_is_replayed_without_running_the_tool(rig: Rig, status: str) -> None:
    ids = scene(rig, "call_w", "write_file", WRITE, "approved", "running")
    stored = {"ok": status == "succeeded", "status": status, "execution_id": "exec_old", "path": "notes.txt"}
    rig.write_session(
        [
            *rig.records(),
            ledger("exec_old", "call_w", status, "write_file", ids["key"], ids["sha"], result=stored),
        ]
    )
    agent, _ = rig.agent(answer_any_tool_result())

    agent.resume()

    assert rig.tool_results()["call_w"] == stored | {"recovery": "result_replayed"}
    assert rig.world.events() == []
    assert len(ledger_of(rig, "call_w")) == 3


def test_no_ledger_goes_back_through_approval_and_runs_once(rig: Rig) -> None:
    scene(rig, "call_w", "write_file", WRITE)
    approver = ScriptedApprover()
    agent, _ = rig.agent(answer_any_tool_result(), approver=approver)

    agent.resume()

    assert approver.asked == [("call_w", "write_file", False)]
    assert rig.tool_results()["call_w"]["ok"] is True
    assert len(rig.world.events("file_write")) == 1


def test_arguments_hash_mismatch_is_a_conflict_that_neither_runs_nor_reuses(rig: Rig) -> None:
    key = agent_key("call_w", "write_file", WRITE)
    stale = arguments_sha256({"path": "notes.txt", "content": "something else"})
    rig.write_session(
        [
            user("please"),
            assistant_call("call_w", "write_file", WRITE),
            ledger("exec_old", "call_w", "approved", "write_file", key, stale),
            ledger("exec_old", "call_w", "running", "write_file", key, stale),
        ]
    )
    agent, _ = rig.agent(answer_any_tool_result())

    agent.resume()

    published = rig.tool_results()["call_w"]
    assert (published["code"], published["recovery"]) == ("ARGUMENTS_MISMATCH", "conflict")
    assert rig.world.events() == []
    assert [s for _, _, s in ledger_of(rig, "call_w")] == ["approved", "running", "unknown"]


# -- write_file: the precondition check (seed 004's canReplayFileWrite) ------------------------------


def test_write_file_running_whose_content_is_already_there_is_already_applied_without_a_second_write(
    rig: Rig,
) -> None:
    plan = plan_write(rig.world, WRITE["path"], WRITE["content"])
    (rig.world.workspace / "notes.txt").write_text("new content")  # the first attempt's write
    scene(rig, "call_w", "write_file", WRITE, "approved", "running", plan=plan)
    agent, _ = rig.agent(answer_any_tool_result())

    agent.resume()

    published = rig.tool_results()["call_w"]
    assert published["recovery"] == "already_applied" and published["ok"] is True
    assert rig.world.events("file_write") == []


def test_write_file_running_whose_target_changed_since_the_plan_is_a_conflict(rig: Rig) -> None:
    plan = plan_write(rig.world, WRITE["path"], WRITE["content"])
    scene(rig, "call_w", "write_file", WRITE, "approved", "running", plan=plan)
    rig.world.external_write("notes.txt", "the user's own edit")
    agent, _ = rig.agent(answer_any_tool_result())

    agent.resume()

    published = rig.tool_results()["call_w"]
    assert (published["code"], published["recovery"]) == ("CONFLICT", "conflict")
    assert (rig.world.workspace / "notes.txt").read_text() == "the user's own edit"


# -- replay contracts: retry with a new execution, or ask first -----------------------------------


def _replaying_write(rig: Rig, policy: str) -> dict[str, Any]:
    contract = dataclasses.replace(rig.contracts["write_file"], recovery="replay", replay_policy=policy)
    return {**rig.contracts, "write_file": contract}


def test_running_with_replay_auto_retries_under_a_new_execution_id(rig: Rig) -> None:
    scene(rig, "call_w", "write_file", WRITE, "approved", "running")
    approver = ScriptedApprover()
    agent, _ = rig.agent(answer_any_tool_result(), contracts=_replaying_write(rig, "auto"), approver=approver)

    agent.resume()

    published = rig.tool_results()["call_w"]
    assert published["recovery"] == "replayed" and published["ok"] is True
    history = ledger_of(rig, "call_w")
    assert [s for _, _, s in history] == [
        "approved",
        "running",
        "unknown",
        "approved",
        "running",
        "succeeded",
    ]
    assert history[3][0] != "exec_old" and published["execution_id"] == history[3][0]
    assert approver.asked == []


@pytest.mark.parametrize(("answer", "recovery", "writes"), [("yes", "replayed", 1), ("no", "manual", 0)])
def test_running_with_replay_ask_asks_again_before_retrying(
    rig: Rig, answer: str, recovery: str, writes: int
) -> None:
    scene(rig, "call_w", "write_file", WRITE, "approved", "running")
    approver = ScriptedApprover(again_answers={"*": answer})
    agent, _ = rig.agent(answer_any_tool_result(), contracts=_replaying_write(rig, "ask"), approver=approver)

    agent.resume()

    assert approver.asked == [("call_w", "write_file", True)]
    published = rig.tool_results()["call_w"]
    assert published["recovery"] == recovery
    if answer == "no":
        assert published["code"] == "MANUAL_CHECK_REQUIRED"
    assert len(rig.world.events("file_write")) == writes


def test_conditional_command_left_running_needs_a_manual_check_when_the_user_declines(rig: Rig) -> None:
    scene(rig, "call_cmd", "run_command", {"command": "npm test"}, "approved", "running")
    approver = ScriptedApprover(again_answers={"*": "no"})
    agent, _ = rig.agent(answer_any_tool_result(), approver=approver)

    agent.resume()

    published = rig.tool_results()["call_cmd"]
    assert (published["code"], published["recovery"]) == ("MANUAL_CHECK_REQUIRED", "manual")
    assert approver.asked == [("call_cmd", "run_command", True)]
    assert rig.world.events() == []


def test_conditional_command_left_running_is_replayed_after_the_user_agrees(rig: Rig) -> None:
    scene(rig, "call_cmd", "run_command", {"command": "npm test"}, "approved", "running")
    approver = ScriptedApprover(again_answers={"*": "yes"})
    agent, _ = rig.agent(answer_any_tool_result(), approver=approver)

    agent.resume()

    published = rig.tool_results()["call_cmd"]
    assert (published["ok"], published["recovery"]) == (True, "replayed")
    assert approver.asked == [("call_cmd", "run_command", True)]
    assert [e.kind for e in rig.world.events()] == ["command"]


def test_a_read_only_tool_call_without_result_is_simply_run_with_no_ledger(rig: Rig) -> None:
    (rig.world.workspace / "notes.txt").write_text("hi")
    scene(rig, "call_r", "read_file", {"path": "notes.txt"})
    rig.world.add_fault(FaultSpec("read_file", "response_lost"))
    agent, _ = rig.agent(answer_any_tool_result())

    agent.resume()

    published = rig.tool_results()["call_r"]
    assert published["content"] == "hi" and published["attempts"] == 2
    assert ledger_of(rig, "call_r") == []
    assert json.dumps(published).count("execution_id") == 0
