"""tamper_arguments on a session the agent keeps itself (harness.agents.foreign_session): the
saved call is found through the adapter's mapping and edited in the agent's own encoding,
the edit is read back before it counts, and where it cannot act the reason is precise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.agents.foreign_session import (
    LedgerMap,
    SessionSource,
    read_foreign,
    tamper_saved_arguments,
    tamper_unreachable,
    with_arguments,
)

# Its own shape: lines told apart by "kind", a chat message is the line itself.
OWN = LedgerMap(type_field="kind", message_type="chat", ledger_type="step")
SOURCE = SessionSource("jsonl", path="own/session.jsonl", ledger=OWN)
NEW = {"item": "chair", "quantity": 12}


def _call(call_id: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "create_order", "arguments": arguments}}


def _session(workspace: Path, *lines: dict[str, Any]) -> Path:
    path = workspace / SOURCE.path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


USER = {"kind": "chat", "role": "user", "content": "Order 1 chair"}
ASSISTANT = {
    "kind": "chat",
    "role": "assistant",
    "content": "",
    "tool_calls": [_call("call_chair", json.dumps({"item": "chair", "quantity": 1}))],
}
STEP = {"kind": "step", "callId": "call_chair", "stepId": "s1", "status": "approved"}


def test_arguments_held_as_a_json_string_stay_a_json_string() -> None:
    edited = with_arguments(json.dumps(ASSISTANT).encode(), OWN, "call_chair", NEW)
    assert edited is not None
    [call] = json.loads(edited)["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == NEW


def test_arguments_held_as_an_object_stay_an_object() -> None:
    line = {**ASSISTANT, "tool_calls": [_call("call_chair", {"item": "chair", "quantity": 1})]}
    edited = with_arguments(json.dumps(line).encode(), OWN, "call_chair", NEW)
    assert edited is not None
    assert json.loads(edited)["tool_calls"][0]["function"]["arguments"] == NEW


def test_a_message_under_message_is_found_too() -> None:
    seed000 = {"type": "message", "message": {k: v for k, v in ASSISTANT.items() if k != "kind"}}
    edited = with_arguments(json.dumps(seed000).encode(), LedgerMap(), "call_chair", NEW)
    assert edited is not None
    assert json.loads(json.loads(edited)["message"]["tool_calls"][0]["function"]["arguments"]) == NEW


def test_a_line_of_another_kind_or_call_is_left_alone() -> None:
    assert with_arguments(json.dumps(STEP).encode(), OWN, "call_chair", NEW) is None
    assert with_arguments(json.dumps(ASSISTANT).encode(), OWN, "call_other", NEW) is None


def test_the_agents_own_line_is_edited_and_the_shift_is_in_the_normalised_copys_offsets(
    tmp_path: Path,
) -> None:
    path = _session(tmp_path, USER, ASSISTANT, STEP)
    before, _ = read_foreign(SOURCE, tmp_path)
    done = tamper_saved_arguments(SOURCE, tmp_path, "call_chair", NEW)
    after, _ = read_foreign(SOURCE, tmp_path)
    assert done.detail == "edited the saved arguments of call_chair in session.jsonl line 2"
    assert (done.tool, json.loads(done.before)) == ("create_order", {"item": "chair", "quantity": 1})
    # (where the call's normalised line ended, how much it grew): what the judge translates by.
    assert done.shifts == ((before.offsets[1], after.offsets[1] - before.offsets[1]),)
    assert after.offsets[1] - before.offsets[1] == len('"quantity": 12') - len('"quantity": 1')
    assert after.offsets[2] - after.offsets[1] == before.offsets[2] - before.offsets[1]  # later lines move
    [call] = after.entries[1].message.tool_calls  # type: ignore[union-attr]
    assert call.parsed_arguments() == NEW
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in (lines[0], lines[2])] == [USER, STEP]  # the rest untouched


def test_only_the_latest_call_with_a_reused_id_is_edited(tmp_path: Path) -> None:
    _session(tmp_path, USER, ASSISTANT, STEP, USER, ASSISTANT)
    done = tamper_saved_arguments(SOURCE, tmp_path, "call_chair", NEW)
    assert done.detail.endswith("line 5")
    log, _ = read_foreign(SOURCE, tmp_path)
    first, last = log.entries[1], log.entries[4]
    assert first.message.tool_calls[0].parsed_arguments() == {"item": "chair", "quantity": 1}  # type: ignore[union-attr]
    assert last.message.tool_calls[0].parsed_arguments() == NEW  # type: ignore[union-attr]


def test_no_saved_call_is_said_and_nothing_is_written(tmp_path: Path) -> None:
    path = _session(tmp_path, USER)
    done = tamper_saved_arguments(SOURCE, tmp_path, "call_chair", NEW)
    assert (done.shifts, done.detail) == ((), "no saved tool call call_chair in session.jsonl")
    assert path.read_text() == json.dumps(USER) + "\n"


def test_an_unreadable_session_is_said_with_its_line(tmp_path: Path) -> None:
    path = _session(tmp_path, USER, ASSISTANT)
    path.write_bytes(path.read_bytes() + b"not json\n")
    done = tamper_saved_arguments(SOURCE, tmp_path, "call_chair", NEW)
    assert done.shifts == ()
    assert done.detail.startswith("the agent's session is unreadable (")
    assert "session.jsonl:3" in done.detail


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (
            SessionSource("sqlite", path="state.db", query="SELECT data FROM messages"),
            "its session is a SQLite database (state.db): the harness edits a saved tool call's "
            "arguments only in a JSONL session file",
        ),
        (
            SessionSource("reader", reader="reader:records"),
            "its session is read by reader:records: the harness does not know which file to edit",
        ),
        (
            SessionSource("none"),
            "the harness cannot read its session (readable: false), so it cannot find the saved tool call",
        ),
    ],
)
def test_a_session_the_harness_cannot_edit_says_why(tmp_path: Path, source: SessionSource, why: str) -> None:
    assert tamper_unreachable(source) == why
    assert tamper_saved_arguments(source, tmp_path, "call_chair", NEW).detail == why
    assert tamper_unreachable(SOURCE) == ""


def test_the_scenarios_arguments_are_written_under_the_agents_own_argument_names(tmp_path: Path) -> None:
    # A catalogue renaming item -> product, quantity -> count (memo_agent's kind): the agent
    # must find its own names in the saved call, or its recovery fails on a KeyError.
    path = _session(tmp_path, USER, ASSISTANT, STEP)
    seen: list[str] = []

    def shape(tool: str, arguments: Any) -> dict[str, Any]:
        seen.append(tool)
        return {"product": arguments["item"], "count": arguments["quantity"]}

    done = tamper_saved_arguments(SOURCE, tmp_path, "call_chair", NEW, shape)
    assert done.detail.startswith("edited the saved arguments of call_chair")
    assert seen == ["create_order"]  # the saved call's tool, as the agent names it
    [call] = json.loads(path.read_text().splitlines()[1])["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == {"product": "chair", "count": 12}


def test_the_normalised_copy_is_replaced_whole_and_never_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The copy is the harness's: a SIGKILL keeps the page cache and a power loss does not cut
    # it (harness.lives.power tracks its directory's existence only), so a sync buys nothing.
    import os

    from crashmatrix.harness.agents.foreign_session import _write_copy

    synced: list[object] = []
    monkeypatch.setattr(os, "fsync", synced.append)
    monkeypatch.setattr(os, "fdatasync", synced.append)
    copy = tmp_path / ".agent_state" / "session-case.jsonl"
    _write_copy(copy, [b'{"a": 1}\n', b'{"b": 2}\n'])
    _write_copy(copy, [b'{"c": 3}\n'])
    assert copy.read_bytes() == b'{"c": 3}\n'
    assert sorted(p.name for p in copy.parent.iterdir()) == ["session-case.jsonl"]  # no .tmp left
    assert synced == []
