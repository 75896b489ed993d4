"""Seed 000, section 7.2: one Tool Call, two Executions, twelve records after recovery."""

from __future__ import annotations

import json
from typing import Any

import pytest

from crashmatrix.harness.core.ledger import arguments_sha256
from crashmatrix.harness.core.script import Reply, Rule, When
from crashmatrix.reference_agent.approval import ScriptedApprover

from .rig import (
    SEED_ARGUMENTS_JSON,
    SEED_CALL_ID,
    SEED_EXEC,
    SEED_KEY,
    SEED_SHA,
    Rig,
    SimulatedCrash,
    assistant_call,
    crash_at,
    ledger,
    user,
)

ARGS = {"path": "recovery-demo.txt", "content": "recovered"}
READ_ID = "call_read_verify"

# Stateless, so the same script serves every life: write, then verify by reading, then answer.
RULES = [
    Rule(When(role="user"), Reply(tool_calls=((SEED_CALL_ID, "write_file", ARGS),))),
    Rule(
        When(role="tool", tool="write_file", ok=True),
        Reply(tool_calls=((READ_ID, "read_file", {"path": ARGS["path"]}),)),
    ),
    Rule(When(role="tool", tool="read_file", ok=True), Reply("recovery-demo.txt now contains: recovered")),
    # Anything else (a CONFLICT, an error) ends the turn, so the shape assertions say what went wrong.
    Rule(When(role="tool"), Reply("the write did not succeed")),
]


def _shape(records: list[dict[str, Any]], old_exec: str) -> list[str]:
    out = []
    for r in records:
        if r["type"] == "message":
            m = r["message"]
            out.append(m["role"] + ("+calls" if m.get("tool_calls") else ""))
        else:
            out.append(("old" if r["execution_id"] == old_exec else "new") + ":" + r["status"])
    return out


def assert_twelve_record_recovery(records: list[dict[str, Any]], old_exec: str) -> None:
    shape = _shape(records, old_exec)
    assert shape == [
        "user",
        "assistant+calls",
        "old:approved",
        "old:running",
        "old:unknown",
        "new:approved",
        "new:running",
        "new:succeeded",
        "tool",
        "assistant+calls",
        "tool",
        "assistant",
    ], shape
    ledger_lines = records[2:8]
    new_exec = records[5]["execution_id"]
    assert new_exec != old_exec and new_exec.startswith("exec_")
    assert {r["execution_id"] for r in records[5:8]} == {new_exec}
    # The SAME order number throughout; the Tool Result answers it with the NEW attempt's id.
    assert {r["tool_call_id"] for r in ledger_lines} == {SEED_CALL_ID}
    published = records[8]["message"]
    assert published["tool_call_id"] == SEED_CALL_ID
    content = json.loads(published["content"])
    assert content["ok"] is True and content["execution_id"] == new_exec
    assert content == records[7]["result"]
    assert records[4]["result"]["status"] == "unknown"
    # The verification read is a new order with no ledger lines of its own.
    [read_call] = records[9]["message"]["tool_calls"]
    assert read_call["id"] == READ_ID != SEED_CALL_ID
    assert read_call["function"]["name"] == "read_file"
    assert records[10]["message"]["tool_call_id"] == READ_ID
    assert json.loads(records[10]["message"]["content"])["content"] == "recovered"
    assert not records[11]["message"].get("tool_calls")
    # Recovery continues the old turn: it never appends a user message.
    assert [r for r in records if r["type"] == "message" and r["message"]["role"] == "user"] == records[:1]
    # One business action: every attempt shares the arguments hash and the idempotency key.
    assert {r["arguments_sha256"] for r in ledger_lines} == {arguments_sha256(ARGS)}
    keys = [r["idempotency_key"] for r in ledger_lines]
    assert len(set(keys)) == 1, f"one tool call, several idempotency keys: {keys}"


def test_seed_000_crash_scene_recovers_into_twelve_records(rig: Rig) -> None:
    """The seed's own 4-line crash scene (a ledger without a write plan, seed-format key)."""
    rig.write_session(
        [
            user("set the complete content of recovery-demo.txt to: recovered"),
            assistant_call(SEED_CALL_ID, "write_file", SEED_ARGUMENTS_JSON),
            ledger(SEED_EXEC, SEED_CALL_ID, "approved", "write_file", SEED_KEY, SEED_SHA),
            ledger(SEED_EXEC, SEED_CALL_ID, "running", "write_file", SEED_KEY, SEED_SHA),
        ]
    )
    assert arguments_sha256(json.loads(SEED_ARGUMENTS_JSON)) == SEED_SHA
    approver = ScriptedApprover()
    agent, _ = rig.agent(RULES, approver=approver)

    answer = agent.resume()

    records = rig.records()
    assert_twelve_record_recovery(records, SEED_EXEC)
    assert records[2]["idempotency_key"] == SEED_KEY
    assert answer == "recovery-demo.txt now contains: recovered"
    assert (rig.world.workspace / "recovery-demo.txt").read_bytes() == b"recovered"


def test_crash_after_running_recovers_into_twelve_records(rig: Rig) -> None:
    """The same scene as the agent itself leaves it: killed right after ``running`` was fsynced."""
    first, _ = rig.agent(RULES, hook=crash_at("after_running", SEED_CALL_ID))
    with pytest.raises(SimulatedCrash):
        first.run_turn("set the complete content of recovery-demo.txt to: recovered")
    first.close()
    assert [r.get("status") for r in rig.records()] == [None, None, "approved", "running"]
    assert not (rig.world.workspace / "recovery-demo.txt").exists()
    old_exec = rig.records()[2]["execution_id"]

    second, _ = rig.agent(RULES)
    answer = second.resume()

    assert_twelve_record_recovery(rig.records(), old_exec)
    assert rig.records()[8]["message"]["content"].count('"recovery": "reapplied"') == 1
    assert answer == "recovery-demo.txt now contains: recovered"
    assert (rig.world.workspace / "recovery-demo.txt").read_bytes() == b"recovered"
    [write] = rig.world.events("file_write")
    assert write.execution_id == rig.records()[5]["execution_id"]
