"""harness.core.ledger: the state machine, the identities, and finding calls left without a result."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crashmatrix.harness.core.ledger import (
    TERMINAL,
    arguments_sha256,
    assert_transition,
    check_transitions,
    idempotency_key,
    normalise_status,
    pending_tool_calls,
)
from crashmatrix.harness.core.records import Entry, ExecutionRecord, Message, MessageEntry, ToolCall
from crashmatrix.harness.errors import LedgerError
from crashmatrix.harness.session_file import read_session


@pytest.mark.parametrize(
    "statuses",
    [
        ["approved", "running", "succeeded"],  # seed 000, 7.1
        ["approved", "running", "unknown"],  # seed 000, 7.2 first attempt
        ["approved", "running", "failed"],
        ["rejected"],
        ["approved", "rejected"],
        ["approved", "approved", "running", "failed"],  # asked again after a restart
        ["planned", "approved", "running", "succeeded"],  # seed 004's vocabulary
        [],
    ],
)
def test_legal_histories_are_accepted(statuses: list[str]) -> None:
    assert check_transitions(statuses) is None


@pytest.mark.parametrize(
    ("statuses", "says"),
    [
        (["running"], "'(start)' -> 'running'"),
        (["succeeded"], "'(start)' -> 'succeeded'"),
        (["approved", "succeeded"], "'approved' -> 'succeeded'"),
        (["approved", "running", "running"], "'running' -> 'running'"),
        (["approved", "running", "approved"], "'running' -> 'approved'"),
        (["approved", "running", "unknown", "succeeded"], "'succeeded' after terminal 'unknown'"),
        (["rejected", "approved"], "'approved' after terminal 'rejected'"),
        (["approved", "running", "succeeded", "succeeded"], "after terminal 'succeeded'"),
        (["approved", "running", "failed", "running"], "after terminal 'failed'"),
        (["approved", "started"], "unknown status 'started'"),  # aliases are normalised first
        (["approved", "done"], "unknown status 'done'"),
    ],
)
def test_illegal_histories_are_rejected_with_the_step(statuses: list[str], says: str) -> None:
    problem = check_transitions(statuses)
    assert problem is not None
    assert says in problem
    assert problem.startswith(f"step {len(statuses)}:")


@pytest.mark.parametrize("terminal", sorted(TERMINAL))
@pytest.mark.parametrize("after", ["approved", "rejected", "running", "succeeded", "failed", "unknown"])
def test_nothing_follows_a_terminal_status(terminal: str, after: str) -> None:
    with pytest.raises(LedgerError, match=rf"'{terminal}' -> '{after}'"):
        assert_transition(terminal, after)


def test_assert_transition_allows_the_write_order() -> None:
    for previous, status in [(None, "approved"), ("approved", "running"), ("running", "unknown")]:
        assert_transition(previous, status)


def test_assert_transition_refuses_running_before_approval() -> None:
    with pytest.raises(LedgerError, match=r"'\(start\)' -> 'running'"):
        assert_transition(None, "running")


@pytest.mark.parametrize(
    ("foreign", "ours"),
    [("started", "running"), ("uncertain", "unknown"), ("planned", "planned"), ("succeeded", "succeeded")],
)
def test_seed_004_statuses_normalise_onto_ours(foreign: str, ours: str) -> None:
    assert normalise_status(foreign) == ours


def test_an_adapter_mapping_is_applied_before_the_aliases() -> None:
    assert normalise_status("in_flight", {"in_flight": "started"}) == "running"
    assert normalise_status("ok", {"ok": "succeeded"}) == "succeeded"


def test_seed_004_history_checks_after_normalising() -> None:
    history = [normalise_status(s) for s in ["planned", "approved", "started", "uncertain"]]
    assert check_transitions(history) is None


# --- identities ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "digest"),
    [
        (
            {"path": "recovery-demo.txt", "content": "recovered"},
            "8889280b9146b06f667dd62a1bdb2f6bcb763b656a18214926a39dba97dc18fe",
        ),
        (
            {"path": "ledger-demo.txt", "content": "hello ledger"},
            "316b7a5c54fa80f28f7af606784c9af906d06657a1fd35b6094fed239dca6966",
        ),
    ],
)
def test_arguments_sha256_equals_seed_000s_hashes(arguments: dict[str, Any], digest: str) -> None:
    assert arguments_sha256(arguments) == digest


def test_arguments_sha256_hashes_non_ascii_as_utf8_not_escapes() -> None:
    # ensure_ascii=False is part of the recipe: an agent hashing "\\u6587" would disagree.
    import hashlib

    expected = hashlib.sha256('{"content":"文件"}'.encode()).hexdigest()
    assert arguments_sha256({"content": "文件"}) == expected
    escaped = hashlib.sha256(b'{"content":"\\u6587\\u4ef6"}').hexdigest()
    assert arguments_sha256({"content": "文件"}) != escaped


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(st.dictionaries(st.text(), json_values, min_size=1, max_size=6), st.randoms())
def test_arguments_sha256_is_key_order_independent(arguments: dict[str, Any], rnd: random.Random) -> None:
    items = list(arguments.items())
    rnd.shuffle(items)
    assert arguments_sha256(dict(items)) == arguments_sha256(arguments)


@given(st.dictionaries(st.text(), st.text(), min_size=1), st.text(min_size=1))
def test_arguments_sha256_changes_when_a_value_changes(arguments: dict[str, str], extra: str) -> None:
    key = next(iter(arguments))
    changed = {**arguments, key: arguments[key] + extra}
    assert arguments_sha256(changed) != arguments_sha256(arguments)


CALL = ToolCall("call_1", "write_file", json.dumps({"path": "a", "content": "b"}))
DIGEST = arguments_sha256({"path": "a", "content": "b"})


def key(**changes: Any) -> str:
    values: dict[str, Any] = {"session_id": "s1", "turn": 1, "tool_call": CALL, "args_sha256": DIGEST}
    values.update(changes)
    return idempotency_key(**values)


def test_idempotency_key_follows_the_documented_recipe() -> None:
    assert key() == f"agent:s1:t1:call_1:write_file:{DIGEST[:16]}"


def test_idempotency_key_is_stable_across_attempts() -> None:
    assert key() == key() == key(tool_call=ToolCall("call_1", "write_file", CALL.arguments))


@pytest.mark.parametrize(
    "changes",
    [
        {"turn": 2},
        {"session_id": "s2"},
        {"tool_call": ToolCall("call_2", "write_file", CALL.arguments)},
        {"tool_call": ToolCall("call_1", "delete_file", CALL.arguments)},
        {"args_sha256": arguments_sha256({"path": "a", "content": "c"})},
    ],
)
def test_idempotency_key_differs_for_a_different_business_action(changes: dict[str, Any]) -> None:
    assert key(**changes) != key()


# --- pending tool calls -------------------------------------------------------------


def user(text: str = "do it") -> MessageEntry:
    return MessageEntry(Message("user", text))


def assistant(*calls: ToolCall) -> MessageEntry:
    return MessageEntry(Message("assistant", "", tool_calls=calls))


def final(text: str = "done") -> MessageEntry:
    return MessageEntry(Message("assistant", text))


def result(call_id: str) -> MessageEntry:
    return MessageEntry(Message("tool", '{"ok": true}', tool_call_id=call_id))


def ledger(execution_id: str, call_id: str, status: str) -> ExecutionRecord:
    return ExecutionRecord(execution_id, call_id, status, "write_file", "k", DIGEST)


def test_a_completed_turn_has_no_pending_calls() -> None:
    entries: list[Entry] = [
        user(),
        assistant(CALL),
        ledger("e1", "call_1", "approved"),
        ledger("e1", "call_1", "running"),
        ledger("e1", "call_1", "succeeded"),
        result("call_1"),
        final(),
    ]
    assert pending_tool_calls(entries) == []


def test_a_call_without_a_tool_result_is_pending_with_its_ledger_grouped_by_execution() -> None:
    entries: list[Entry] = [
        user(),
        assistant(CALL),
        ledger("e1", "call_1", "approved"),
        ledger("e1", "call_1", "running"),
        ledger("e1", "call_1", "unknown"),
        ledger("e2", "call_1", "approved"),
        ledger("e2", "call_1", "running"),
    ]
    [pending] = pending_tool_calls(entries)
    assert pending.call == CALL
    assert pending.site.turn == 1 and pending.site.message_index == 1
    assert [(eid, [r.status for r in h]) for eid, h in pending.executions] == [
        ("e1", ["approved", "running", "unknown"]),
        ("e2", ["approved", "running"]),
    ]
    assert pending.latest is not None and pending.latest.execution_id == "e2"


def test_a_pending_call_without_ledger_has_no_executions() -> None:
    [pending] = pending_tool_calls([user(), assistant(CALL)])
    assert pending.executions == () and pending.latest is None


def test_only_the_calls_without_results_are_pending_in_call_order() -> None:
    other = ToolCall("call_2", "read_file", "{}")
    third = ToolCall("call_3", "write_file", "{}")
    entries: list[Entry] = [user(), assistant(third, other, CALL), result("call_2")]
    assert [p.call.id for p in pending_tool_calls(entries)] == ["call_3", "call_1"]


def test_ledger_lines_of_another_call_are_not_attributed() -> None:
    other = ToolCall("call_2", "write_file", "{}")
    entries: list[Entry] = [user(), assistant(CALL, other), ledger("e9", "call_2", "approved")]
    pending = {p.call.id: p for p in pending_tool_calls(entries)}
    assert pending["call_1"].executions == ()
    assert [eid for eid, _ in pending["call_2"].executions] == ["e9"]


def test_a_tool_call_id_reused_in_a_later_turn_inherits_nothing() -> None:
    # Some providers number calls per turn (call_0, call_0, ...): turn 2's call_0 is a new
    # business action, and turn 1's result or ledger must not answer it.
    reused = ToolCall("call_0", "write_file", CALL.arguments)
    entries: list[Entry] = [
        user("one"),
        assistant(reused),
        ledger("e1", "call_0", "approved"),
        ledger("e1", "call_0", "running"),
        ledger("e1", "call_0", "succeeded"),
        result("call_0"),
        final(),
        user("two"),
        assistant(reused),
    ]
    [pending] = pending_tool_calls(entries)
    assert pending.site.turn == 2
    assert pending.site.message_index == 8
    assert pending.executions == ()


def test_an_earlier_turns_pending_call_does_not_take_a_later_turns_result() -> None:
    reused = ToolCall("call_0", "write_file", CALL.arguments)
    entries: list[Entry] = [
        user("one"),
        assistant(reused),
        ledger("e1", "call_0", "approved"),
        user("two"),
        assistant(reused),
        ledger("e2", "call_0", "approved"),
        ledger("e2", "call_0", "running"),
        ledger("e2", "call_0", "succeeded"),
        result("call_0"),
        final(),
    ]
    [pending] = pending_tool_calls(entries)
    assert pending.site.turn == 1
    assert [eid for eid, _ in pending.executions] == ["e1"]


# --- seed 000's traces --------------------------------------------------------------

DATA = Path(__file__).parents[1] / "data"


@pytest.mark.parametrize("name", ["seed000_normal_write.jsonl", "seed000_crash_recovery.jsonl"])
def test_every_execution_in_seed_000s_traces_is_a_legal_history(name: str) -> None:
    histories: dict[str, list[str]] = {}
    for entry in read_session(DATA / name).entries:
        if isinstance(entry, ExecutionRecord):
            histories.setdefault(entry.execution_id, []).append(entry.status)
    assert histories
    assert {eid: check_transitions(h) for eid, h in histories.items()} == dict.fromkeys(histories)


def test_seed_000_crash_scene_leaves_one_pending_call_at_running() -> None:
    # The 4-line crash scene of seed 000, 7.2: user, tool call, approved, running.
    entries = read_session(DATA / "seed000_crash_recovery.jsonl").entries[:4]
    [pending] = pending_tool_calls(entries)
    assert pending.call.id == "call_recovery_demo"
    assert pending.latest is not None and pending.latest.status == "running"
    assert pending.latest.arguments_sha256 == arguments_sha256(pending.call.parsed_arguments())


def test_seed_000_recovered_session_has_nothing_pending() -> None:
    assert pending_tool_calls(read_session(DATA / "seed000_crash_recovery.jsonl").entries) == []
