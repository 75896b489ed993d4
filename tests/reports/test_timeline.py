"""The per-case timeline: lives, session lines and world events in the order they happened."""

from __future__ import annotations

from typing import Any

from crashmatrix.harness.core.records import Entry, ExecutionRecord, Message, MessageEntry, ToolCall
from crashmatrix.mock_tools.world import WorldEvent
from crashmatrix.reports.timeline import build_timeline


def _ledger(status: str, line: int, execution: str = "e1") -> ExecutionRecord:
    return ExecutionRecord(execution, "c1", status, "send_email", "k", "h", line=line)


ENTRIES: list[Entry] = [
    MessageEntry(Message("user", "send it"), line=1),
    MessageEntry(Message("assistant", "", (ToolCall("c1", "send_email", "{}"),)), line=2),
    _ledger("approved", 3),
    _ledger("running", 4),
    _ledger("unknown", 5),
    MessageEntry(Message("tool", "{}", tool_call_id="c1"), line=6),
    MessageEntry(Message("assistant", "Done."), line=7),
]
OFFSETS = [100, 200, 300, 400, 500, 600, 700]


def _event(seq: int, kind: str, pid: int, session_bytes: int) -> WorldEvent:
    return WorldEvent(seq, kind, "send_email", "c1", "e1", None, session_bytes, {}, pid)


def _short(moment: dict[str, Any]) -> str:
    if moment["source"] == "life":
        return f"life{moment['life']}:{moment['event']}"
    if moment["source"] == "session":
        return f"L{moment['line']}@{moment.get('life')}"
    if moment["source"] == "world":
        return f"#{moment['seq']}"
    return "more"


def test_a_crash_then_restart_interleaves_lines_and_world_events_by_session_size() -> None:
    trace = [
        {"life": 1, "event": "start", "pid": 11},
        {"life": 1, "event": "boundary", "boundary": "after_tool_call_saved", "call": "c1", "occurrence": 1},
        {"life": 1, "event": "append", "call": "c1", "label": "approved", "occurrence": 1},
        {"life": 1, "event": "append", "call": "c1", "label": "running", "occurrence": 1},
        {"life": 1, "event": "boundary", "boundary": "after_running", "call": "c1", "occurrence": 1},
        {"life": 1, "event": "crash", "point": "after_running[c1]"},
        {"life": 2, "event": "start", "pid": 22},
        {"life": 2, "event": "append", "call": "c1", "label": "unknown", "occurrence": 1},
        {"life": 2, "event": "append", "call": "c1", "label": "tool_result", "occurrence": 1},
        {"life": 2, "event": "exit"},
    ]
    events = [_event(1, "external_write", 99, 400), _event(2, "email", 22, 500)]
    timeline = build_timeline(trace, ENTRIES, OFFSETS, events)
    assert [_short(m) for m in timeline] == [
        "life1:start",
        "L1@1",
        "L2@1",
        "L3@1",
        "L4@1",
        "life1:crash",
        "#1",  # the harness's edit between lives: after the crash, before the restart
        "life2:start",
        "L5@2",
        "#2",  # on disk after `unknown`, before the Tool Result
        "L6@2",
        "L7@2",
        "life2:exit",
    ]
    assert timeline[5]["point"] == "after_running[c1]"


def test_a_torn_write_is_marked_on_its_life_and_the_rewritten_line_belongs_to_the_next() -> None:
    entries = [*ENTRIES[:3], _ledger("running", 4, "e2")]
    trace = [
        {"life": 1, "event": "start", "pid": 11},
        {"life": 1, "event": "boundary", "boundary": "after_tool_call_saved", "call": "c1", "occurrence": 1},
        {"life": 1, "event": "append", "call": "c1", "label": "approved", "occurrence": 1},
        {"life": 1, "event": "append", "call": "c1", "label": "running", "occurrence": 1},
        {"life": 1, "event": "crash", "point": "torn_write[c1:running]"},
        {"life": 2, "event": "start", "pid": 22},
        {"life": 2, "event": "append", "call": "c1", "label": "running", "occurrence": 1},
    ]
    timeline = build_timeline(trace, entries, OFFSETS[:4], [])
    assert [_short(m) for m in timeline] == [
        "life1:start",
        "L1@1",
        "L2@1",
        "L3@1",
        "life1:torn",
        "life2:start",
        "L4@2",
    ]


def test_a_long_timeline_keeps_its_start_and_end() -> None:
    entries = [MessageEntry(Message("user", str(i)), line=i + 1) for i in range(50)]
    trace = [{"life": 1, "event": "start", "pid": 1}, {"life": 1, "event": "exit"}]
    timeline = build_timeline(trace, entries, list(range(1, 51)), [], limit=11)
    assert len(timeline) == 11
    assert _short(timeline[0]) == "life1:start" and _short(timeline[-1]) == "life1:exit"
    assert timeline[5] == {"source": "more", "omitted": 42}


def test_an_unplanned_death_and_what_a_life_left_running_are_on_the_timeline() -> None:
    left = "pid 7 `sh -c sleep 4; echo late >> audit.log` (session 7)"
    trace = [
        {"life": 1, "event": "start", "pid": 11},
        {"life": 1, "event": "boundary", "boundary": "after_tool_call_saved", "call": "c1", "occurrence": 1},
        {"life": 1, "event": "survivors", "processes": [left]},
        {"life": 1, "event": "ended", "status": "died", "error": "unplanned death (SIGKILL) after x"},
        {"life": 2, "event": "start", "pid": 22},
        {"life": 2, "event": "exit"},
    ]
    timeline = build_timeline(trace, ENTRIES, OFFSETS, [])
    shown = [_short(m) for m in timeline if m["source"] == "life"]
    assert shown == ["life1:start", "life1:left_running", "life1:died", "life2:start", "life2:exit"]
    by_event = {m["event"]: m for m in timeline if m["source"] == "life"}
    assert by_event["left_running"]["error"] == left
    assert by_event["died"]["error"] == "unplanned death (SIGKILL) after x"
    # The lines after the death are the restarted life's, not the dead one's.
    lines = [_short(m) for m in timeline if m["source"] == "session"]
    assert lines == ["L1@1", "L2@1", "L3@2", "L4@2", "L5@2", "L6@2", "L7@2"]


def test_a_life_that_died_on_a_tool_side_fault_shows_one_death_not_an_error_and_a_death() -> None:
    raised = "RuntimeError: the tool server went away"
    died = f"on the tool-side fault tool_server_died[c1], restarted as a supervisor would: {raised}"
    trace = [
        {"life": 1, "event": "start", "pid": 11},
        {"life": 1, "event": "error", "error": raised},
        {"life": 1, "event": "ended", "status": "died", "error": died},
        {"life": 2, "event": "start", "pid": 22},
        {"life": 2, "event": "error", "error": "a later life's own error"},
        {"life": 2, "event": "ended", "status": "error"},
    ]
    timeline = build_timeline(trace, ENTRIES, OFFSETS, [])
    shown = [(m["life"], m["event"], m.get("error")) for m in timeline if m["source"] == "life"]
    assert shown == [
        (1, "start", None),
        (1, "died", died),
        (2, "start", None),
        (2, "error", "a later life's own error"),
    ]
