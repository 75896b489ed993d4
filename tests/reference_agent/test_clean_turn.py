"""Seed 000, section 7.1: one clean write_file turn is exactly seven session records."""

from __future__ import annotations

import json

from crashmatrix.harness.core.ledger import arguments_sha256
from crashmatrix.reference_agent.approval import ScriptedApprover

from .rig import Rig, ask_then_answer

ARGS = {"path": "ledger-demo.txt", "content": "hello ledger"}


def test_clean_write_file_turn_has_seed_000_seven_record_shape(rig: Rig) -> None:
    approver = ScriptedApprover()
    agent, _ = rig.agent(ask_then_answer("call_write", "write_file", ARGS, "written"), approver=approver)

    answer = agent.run_turn("create ledger-demo.txt containing exactly: hello ledger")

    assert answer == "written"
    records = rig.records()
    shape = [(r["type"], r["message"]["role"] if r["type"] == "message" else r["status"]) for r in records]
    assert shape == [
        ("message", "user"),
        ("message", "assistant"),
        ("tool_execution", "approved"),
        ("tool_execution", "running"),
        ("tool_execution", "succeeded"),
        ("message", "tool"),
        ("message", "assistant"),
    ]
    call_msg, approved, running, succeeded, result_msg, final = records[1:]
    [call] = call_msg["message"]["tool_calls"]
    assert call["id"] == "call_write"
    assert json.loads(call["function"]["arguments"]) == ARGS
    # Lines 2-6 answer the same order number.
    assert {r["tool_call_id"] for r in (approved, running, succeeded)} == {"call_write"}
    assert result_msg["message"]["tool_call_id"] == "call_write"
    # One real attempt: one execution_id on the three ledger lines and in the Tool Result.
    execution_id = approved["execution_id"]
    assert execution_id.startswith("exec_")
    assert running["execution_id"] == succeeded["execution_id"] == execution_id
    published = json.loads(result_msg["message"]["content"])
    assert published["execution_id"] == execution_id
    assert published == succeeded["result"], "the Tool Result must be the ledger's stored result"
    assert published["ok"] is True and published["bytes_written"] == 12
    # Identity fields agree across the execution.
    sha = arguments_sha256(ARGS)
    assert {r["arguments_sha256"] for r in (approved, running, succeeded)} == {sha}
    assert len({r["idempotency_key"] for r in (approved, running, succeeded)}) == 1
    assert {r["tool_name"] for r in (approved, running, succeeded)} == {"write_file"}
    assert "result" not in approved and "result" not in running
    assert "tool_calls" not in final["message"] and final["message"]["content"] == "written"
    # The side effect: exactly 12 bytes, no trailing newline; approval was asked once, fresh.
    assert (rig.world.workspace / "ledger-demo.txt").read_bytes() == b"hello ledger"
    assert approver.asked == [("call_write", "write_file", False)]
    [event] = rig.world.events("file_write")
    assert (event.tool_call_id, event.execution_id) == ("call_write", execution_id)
