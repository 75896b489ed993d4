"""Faults that are not crashes, applied after a crash and before the restart, with what the
judge needs to read the edited evidence."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.session_log import split_lines
from crashmatrix.harness.lives.casedir import session_path_of

__all__ = ["apply_between_lives", "harness_wrote", "logged_so_far"]


def harness_wrote(case_dir: Path, agent: str | None, by: str, *, erases: bool = False) -> None:
    """The harness just wrote to the case's world (``by``: ``external_write``,
    ``power_loss``): an adapter that probes the agent's own world for effects
    (``harness_wrote(case_dir, by, erases=)``) records what changed as the harness's, so the
    agent's next probe diffs against what the harness left and never counts it as the
    agent's effect. ``erases``: the write took back what the agent had not made durable."""
    if agent is None:
        return
    from crashmatrix.harness.agents.loading import adapter_for

    method = getattr(adapter_for(agent), "harness_wrote", None)
    if callable(method):
        method(case_dir, by, erases=erases)


def apply_between_lives(
    case_dir: Path, scenario: Scenario, *, session_editable: bool = True, agent: str | None = None
) -> None:
    """Faults that are not crashes, done after the crash and before the restart.

    What the judge needs to read the edited evidence is kept in ``between_lives.json``:
    how many model requests came before the edit (they cannot match the edited session)
    and, for each rewritten session line, where it starts and how many bytes it grew by,
    with the last world event seq before the edit (those events' ``session_bytes`` are in
    the file's old coordinates).

    ``session_editable``: False for an agent whose session is its own file (a foreign
    adapter): crashmatrix's normalised copy is rebuilt from it, so an edit of the copy would
    do nothing. The tamper edits the agent's own file through its adapter
    (``tamper_arguments``: where the adapter's mapping finds the call, in the agent's
    encoding, fsynced); where it cannot, it is recorded as not having acted, saying why.

    ``agent``: whose world it is; what an edit changed in that agent's own effect sources
    is the harness's (``harness_wrote``), not an effect the agent's next life is blamed for."""
    if not scenario.between_lives:
        return
    from crashmatrix.mock_tools.world import World

    with World(case_dir / "world") as world:
        mark: dict[str, Any] = {
            **logged_so_far(case_dir, world),
            "shifts": [],
            "applied": [],  # one {"fault", "acted", "detail"} per step: proof it did something
        }
        for step in scenario.between_lives:
            if "external_write" in step:
                edit = step["external_write"]
                world.external_write(edit["path"], edit["content"])
                harness_wrote(case_dir, agent, "external_write")
                mark["applied"].append(
                    {"fault": "external_write", "acted": True, "detail": f"wrote {edit['path']}"}
                )
            if "tamper_arguments" in step:
                tamper = step["tamper_arguments"]
                if session_editable:
                    session = session_path_of(case_dir)
                    shifts, tool, before = _tamper(session, tamper["call"], tamper["arguments"])
                    detail = (
                        f"edited the saved arguments of {tamper['call']}"
                        if shifts
                        else f"no saved tool call {tamper['call']} in {session.name}"
                    )
                else:
                    shifts, detail, tool, before = _tamper_own(
                        case_dir, agent, tamper["call"], tamper["arguments"]
                    )
                if shifts:
                    # What the call asked for before the edit is kept: the agent may have acted
                    # on it already (a file it wrote holds that content, not the new one).
                    world.log_event(
                        "fault",
                        tool,
                        tool_call_id=tamper["call"],
                        detail={"fault": "tamper_arguments", "arguments_before": before},
                    )
                    harness_wrote(case_dir, agent, "tamper_arguments")
                mark["shifts"] += shifts
                mark["applied"].append({"fault": "tamper_arguments", "acted": bool(shifts), "detail": detail})
    (case_dir / "between_lives.json").write_text(json.dumps(mark))


def logged_so_far(case_dir: Path, world: Any = None) -> dict[str, int]:
    """How many model requests and the last world event seq logged so far: the marks a fault
    that changes the evidence (an edit between lives, a power loss that takes session lines)
    leaves for the judge (``Observation.requests_for_session``). ``world``: an open ``World``
    of the case, else it is opened (a case without a world has no events)."""
    from crashmatrix.mock_tools.world import World

    requests = case_dir / "model_requests.jsonl"
    count = len(requests.read_bytes().splitlines()) if requests.exists() else 0
    if world is None:
        if not (case_dir / "world" / "world.json").exists():
            return {"requests_before": count, "events_before": 0}
        with World(case_dir / "world") as opened:
            return logged_so_far(case_dir, opened)
    return {"requests_before": count, "events_before": max((e.seq for e in world.events()), default=0)}


def _tamper_own(
    case_dir: Path, agent: str | None, call_id: str, arguments: dict[str, Any]
) -> tuple[list[tuple[int, int]], str, str, str]:
    """The tamper of an agent that keeps its own session, done by its adapter (it knows where
    the session is and how its lines read): (shifts in the normalised copy's offsets, what was
    edited or precisely why nothing was, the call's tool, its arguments before the edit)."""
    method = None
    if agent is not None:
        from crashmatrix.harness.agents.loading import adapter_for

        method = getattr(adapter_for(agent), "tamper_arguments", None)
    if not callable(method):
        why = "the agent keeps its own session and its adapter cannot edit a saved tool call in it"
        return [], why, "", ""
    done = method(case_dir, call_id, arguments)
    shifts = [(int(end), int(delta)) for end, delta in done.shifts]
    return shifts, str(done.detail), str(done.tool), str(done.before)


def _tamper(session: Path, call_id: str, arguments: dict[str, Any]) -> tuple[list[tuple[int, int]], str, str]:
    """Someone edits the saved tool call's arguments (the harness, not the agent, does this).

    Only the LATEST assistant message with that id is edited: providers reuse ids across
    turns, and an earlier turn's call is finished history. Returns (offset where the edited
    line ended before the edit, bytes added) (none: nothing edited), the call's tool and its
    arguments before the edit."""
    data = session.read_bytes()
    lines, _ = split_lines(session, data)
    for line in reversed(lines):
        try:
            record = json.loads(line.data)
        except ValueError:
            continue
        calls = (record.get("message") or {}).get("tool_calls") or () if isinstance(record, dict) else ()
        matching = [call for call in calls if call.get("id") == call_id]
        if not matching:
            continue
        tool, before = str(matching[0]["function"]["name"]), str(matching[0]["function"]["arguments"])
        for call in matching:
            call["function"]["arguments"] = json.dumps(arguments, ensure_ascii=False)
        edited = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
        _write_durably(session, data[: line.offset] + edited + data[line.end - 1 :])
        return [(line.end, len(edited) - len(line.data))], tool, before
    return [], "", ""


def _write_durably(path: Path, data: bytes) -> None:
    """The session becomes ``data``, fsynced: the next life (or a power loss) comes after it."""
    with open(path, "wb") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())
