"""A case's timeline, small enough to ship in every record: lives, session lines and world
events interleaved in the order they happened.

Three sources, three clocks, one order:

* ``trace.jsonl`` orders the lives (start, crash, exit) and, within a life, the boundaries
  and labelled appends it passed;
* the session file orders its lines, but does not say which life wrote each one: a line is
  attributed by the trace event that announced it (``append`` for ledger lines and Tool
  Results, ``after_tool_call_saved`` for the assistant message); the lines in between
  (user messages, final answers) belong to the life that wrote the next announced line;
* each world event carries the session's size when it happened and the pid of its life,
  so it goes right after the last line that was on disk by then, and never before its own
  life started.

A torn line never reaches the session (the next life sets it aside), so a ``torn_write``
crash is marked on the life, not matched against the file. Built from the case's
``Observation`` (``timeline_of``): the three sources were read once, for the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from crashmatrix.harness.core.records import Entry, ExecutionRecord, MessageEntry
from crashmatrix.harness.core.tool_side import DIED_ON_FAULT
from crashmatrix.harness.observation.observation import Observation
from crashmatrix.harness.verdict.invariants import WorldEventLike

__all__ = ["MAX_MOMENTS", "build_timeline", "summary", "timeline_of"]

# A scenario has a handful of tool calls, so ~30 moments is typical; a runaway agent that
# appends hundreds of lines must not make ~700 records megabytes each.
MAX_MOMENTS = 160

Moment = dict[str, Any]


def timeline_of(observation: Observation, *, limit: int = MAX_MOMENTS) -> tuple[Moment, ...]:
    """The timeline of a case, from its observation (nothing is read again)."""
    log = observation.session
    entries, offsets = (log.entries, log.offsets) if log is not None else ((), ())
    # Events recorded before the harness edited the session are placed by their offsets in
    # the edited file (the verdict judged them so too).
    shifted = {event.seq: event.session_bytes for event in observation.events_in_session_coordinates()}
    return build_timeline(
        observation.trace, entries, offsets, observation.world.events, shifted_bytes=shifted, limit=limit
    )


def _session_moment(entry: Entry, index: int) -> Moment:
    line = entry.line or index + 1
    if isinstance(entry, ExecutionRecord):
        return {
            "source": "session",
            "line": line,
            "type": "tool_execution",
            "status": entry.status,
            "execution_id": entry.execution_id,
            "tool_call_id": entry.tool_call_id,
        }
    if isinstance(entry, MessageEntry):
        message = entry.message
        moment: Moment = {"source": "session", "line": line, "type": "message", "role": message.role}
        if message.tool_call_id:
            moment["tool_call_id"] = message.tool_call_id
        if message.tool_calls:
            moment["tool_calls"] = [call.id for call in message.tool_calls]
        return moment
    return {"source": "session", "line": line, "type": "compaction"}


def _announces(entry: Entry, event: Mapping[str, Any]) -> bool:
    """Is this session line the one a trace event announced?"""
    kind = event.get("event")
    call = event.get("call")
    if kind == "boundary":
        return (
            isinstance(entry, MessageEntry)
            and entry.message.role == "assistant"
            and any(c.id == call for c in entry.message.tool_calls)
        )
    label = event.get("label")
    if label == "tool_result":
        return (
            isinstance(entry, MessageEntry)
            and entry.message.role == "tool"
            and entry.message.tool_call_id == call
        )
    return isinstance(entry, ExecutionRecord) and entry.tool_call_id == call and entry.status == label


def build_timeline(
    trace: Sequence[Mapping[str, Any]],
    entries: Sequence[Entry],
    offsets: Sequence[int],
    events: Sequence[WorldEventLike],
    *,
    shifted_bytes: Mapping[int, int] | None = None,
    limit: int = MAX_MOMENTS,
) -> tuple[Moment, ...]:
    """Interleave the three sources (pure; see the module docstring for the rules)."""
    moments: list[Moment] = []
    ends: list[int | None] = []  # end byte offset of session moments, None for the others
    pointer = 0
    pids: dict[int, int] = {}

    def emit(moment: Moment, end: int | None = None) -> None:
        moments.append(moment)
        ends.append(end)

    def flush(through: int, life: int | None) -> None:
        nonlocal pointer
        while pointer <= through and pointer < len(entries):
            moment = _session_moment(entries[pointer], pointer)
            if life is not None:
                moment["life"] = life
            emit(moment, offsets[pointer] if pointer < len(offsets) else None)
            pointer += 1

    for index, event in enumerate(trace):
        life = int(event.get("life", 0))
        kind = event.get("event")
        if kind == "start":
            if isinstance(event.get("pid"), int):
                pids[event["pid"]] = life
            emit({"source": "life", "life": life, "event": "start"})
        elif (kind == "boundary" and event.get("boundary") == "after_tool_call_saved") or kind == "append":
            after = trace[index + 1] if index + 1 < len(trace) else {}
            torn = after.get("event") == "crash" and str(after.get("point", "")).startswith("torn_write[")
            if kind == "append" and torn and after.get("life") == life:
                continue  # the half line was set aside: nothing in the file to match
            for probe in range(pointer, len(entries)):
                if _announces(entries[probe], event):
                    flush(probe, life)
                    break
        elif kind == "crash":
            point = str(event.get("point", ""))
            torn = point.startswith("torn_write[")
            emit({"source": "life", "life": life, "event": "torn" if torn else "crash", "point": point})
        elif kind == "exit":
            flush(len(entries) - 1, life)
            emit({"source": "life", "life": life, "event": "exit"})
        elif kind == "error":
            emit(
                {"source": "life", "life": life, "event": "error", "error": str(event.get("error", ""))[:300]}
            )
        elif kind == "ended" and event.get("status") in ("died", "hung"):
            # The harness's word on a life that ended where nothing planned it (the life
            # itself could not write it): an unplanned death, or the deadline.
            why = str(event.get("error") or event.get("signal") or "")
            if why.startswith(DIED_ON_FAULT):
                # A life that died on a tool-side fault (restarted, ``injector.died_on_fault``):
                # its own error is quoted in this one, so it is shown once, as the death.
                for back in range(len(moments) - 1, -1, -1):
                    if moments[back].get("life") == life and moments[back].get("event") == "error":
                        del moments[back], ends[back]
                        break
            emit({"source": "life", "life": life, "event": str(event["status"]), "error": why[:300]})
        elif kind == "survivors":
            left = "; ".join(str(process) for process in event.get("processes") or ())
            emit({"source": "life", "life": life, "event": "left_running", "error": left[:300]})
    flush(len(entries) - 1, None)  # a hung life never wrote "exit"

    for world_event in events:
        size = (shifted_bytes or {}).get(world_event.seq, world_event.session_bytes)
        _insert_event(moments, ends, world_event, pids, size)
    if len(moments) > limit:
        # Keep the start (the first crash) and the end (how recovery finished).
        head, tail = limit // 2, limit - limit // 2 - 1
        omitted = len(moments) - head - tail
        moments = [*moments[:head], {"source": "more", "omitted": omitted}, *moments[-tail:]]
    return tuple(moments)


def _insert_event(
    moments: list[Moment], ends: list[int | None], event: WorldEventLike, pids: Mapping[int, int], size: int
) -> None:
    life = pids.get(getattr(event, "pid", -1))  # None: not an agent life (the harness between lives)
    position = 0
    for index, end in enumerate(ends):
        if end is not None and size >= 0 and end <= size:
            position = index + 1
        if life is not None and moments[index] == {"source": "life", "life": life, "event": "start"}:
            position = max(position, index + 1)
    while position < len(moments):
        here = moments[position]
        if here["source"] == "world":
            position += 1  # events that happened at the same size stay in seq order
        elif here["source"] == "life" and here["event"] != "start" and (life is None or here["life"] < life):
            position += 1  # the previous life's crash came first
        else:
            break
    moment: Moment = {
        "source": "world",
        "seq": event.seq,
        "kind": event.kind,
        "tool": event.tool,
        "execution_id": event.execution_id,
        "tool_call_id": event.tool_call_id,
        "session_bytes": event.session_bytes,
        "life": life,
    }
    moments.insert(position, moment)
    ends.insert(position, None)


def summary(moments: Sequence[Mapping[str, Any]]) -> str:
    """A timeline in one line, for text that has no room for it whole (Markdown failure
    details): how each life ended, and the world's side effects in between, in order.
    ``life 1 crashed at after_running[call_1] -> life 2 crashed at before_tool_result[call_1]
    -> 1 world event -> life 3 exited``."""
    parts: list[str] = []
    events = 0

    def flush_events() -> None:
        nonlocal events
        if events:
            parts.append(f"{events} world event{'s' if events > 1 else ''}")
            events = 0

    for moment in moments:
        if moment.get("source") == "world":
            events += 1
            continue
        if moment.get("source") == "more":
            flush_events()
            parts.append(f"... {moment.get('omitted')} moments left out")
        if moment.get("source") != "life" or moment.get("event") == "start":
            continue
        flush_events()
        life, event = moment.get("life"), moment.get("event")
        if event in ("crash", "torn"):
            what = "torn write at" if event == "torn" else "crashed at"
            parts.append(f"life {life} {what} {moment.get('point', '')}")
        elif event == "exit":
            parts.append(f"life {life} exited")
        else:
            parts.append(f"life {life} {event}")
    flush_events()
    return " -> ".join(parts)
