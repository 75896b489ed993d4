"""Judge one finished case: observe what the lives left behind, compare with expectations,
and run every invariant.

Observation reads only durable things (the session file, the world directory, the model's
request log), never the agent's memory: that is all a restarted agent has too.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .adapter import read_agent_session
from .boundaries import CrashPoint
from .errors import SessionCorruption
from .injector import CaseRun
from .invariants import Evidence, Violation, check_all
from .ledger import executions_by_call, tool_call_sites
from .records import MessageEntry
from .scenario import Scenario
from .session import SessionLog

__all__ = ["Mismatch", "Observed", "Verdict", "judge", "matches", "observe"]


@dataclass(frozen=True, slots=True)
class Observed:
    ledger: Mapping[str, list[str]]
    outcome: Mapping[str, str]
    code: Mapping[str, str | None]
    world: Mapping[str, Any]
    session_lines: int = 0


@dataclass(frozen=True, slots=True)
class Mismatch:
    field: str  # "outcome[call_1]", "world.orders", ...
    expected: Any
    observed: Any

    def describe(self) -> str:
        return f"{self.field}: expected {_show(self.expected)}, observed {_show(self.observed)}"


@dataclass(frozen=True)
class Verdict:
    status: str  # "passed" | "failed" | "not_reached" | "hung" | "error"
    observed: Observed | None
    expected: Mapping[str, Any]
    mismatches: tuple[Mismatch, ...] = ()
    violations: tuple[Violation, ...] = ()
    problems: tuple[str, ...] = ()  # what stopped the case from being judged normally
    indeterminate: bool = False  # passed, but only because a set of values was allowed
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def _show(value: Any) -> str:
    if isinstance(value, Mapping) and set(value) == {"in"}:
        return "one of " + json.dumps(value["in"], ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False)


def matches(expected: Any, observed: Any) -> bool:
    if isinstance(expected, Mapping) and set(expected) == {"in"}:
        return any(matches(option, observed) for option in expected["in"])
    return bool(expected == observed)


def _world_view(case_dir: Path) -> tuple[dict[str, Any], list[Any]]:
    from crashmatrix.mock_tools.world import World

    with World(case_dir / "world") as world:
        snapshot = world.snapshot()
        events = world.events()
    view: dict[str, Any] = dict(snapshot.counts)
    files: dict[str, str | None] = {}
    for path in snapshot.files:
        files[path] = snapshot.file_text(path)
    view["files"] = files
    return view, events


def observe(log: SessionLog, world: Mapping[str, Any]) -> Observed:
    entries = log.entries
    ledger: dict[str, list[str]] = {}
    outcome: dict[str, str] = {}
    code: dict[str, str | None] = {}
    for site in tool_call_sites(entries):
        call_id = site.call.id
        statuses = [r.status for _, history in executions_by_call(entries, site) for r in history]
        ledger[call_id] = statuses
        for entry in entries[site.message_index + 1 :]:
            if not isinstance(entry, MessageEntry):
                continue
            message = entry.message
            if message.role == "user":
                break
            if message.role == "tool" and message.tool_call_id == call_id:
                try:
                    body = json.loads(message.content or "")
                except ValueError:
                    body = {}
                body = body if isinstance(body, dict) else {}
                outcome[call_id] = str(body.get("recovery", "completed"))
                code[call_id] = body.get("code")
    return Observed(ledger, outcome, code, world, len(entries))


def _compare(expected: Mapping[str, Any], observed: Observed) -> tuple[list[Mismatch], bool]:
    mismatches: list[Mismatch] = []
    indeterminate = False
    for name in ("outcome", "ledger", "code"):
        table: Mapping[str, Any] = getattr(observed, name)
        for call_id, want in (expected.get(name) or {}).items():
            got = table.get(call_id, None if name != "ledger" else [])
            if name == "outcome" and call_id not in table:
                got = "(no tool result)"
            if not matches(want, got):
                mismatches.append(Mismatch(f"{name}[{call_id}]", want, got))
            elif isinstance(want, Mapping) and len(want["in"]) > 1:
                indeterminate = True
    world_want = expected.get("world") or {}
    for key, want in world_want.items():
        if key == "files":
            for path, content in want.items():
                got = observed.world.get("files", {}).get(path)
                if not matches(content, got):
                    mismatches.append(Mismatch(f"world.files[{path}]", content, got))
        elif key == "rows":
            for table_name, count in want.items():
                got = observed.world.get(f"rows:{table_name}", 0)
                if not matches(count, got):
                    mismatches.append(Mismatch(f"world.rows[{table_name}]", count, got))
        else:
            got = observed.world.get(key, 0)
            if not matches(want, got):
                mismatches.append(Mismatch(f"world.{key}", want, got))
            elif isinstance(want, Mapping) and len(want["in"]) > 1:
                indeterminate = True
    return mismatches, indeterminate


def _between_lives(case_dir: Path) -> dict[str, Any]:
    path = case_dir / "between_lives.json"
    return dict(json.loads(path.read_text())) if path.exists() else {}


def _requests(case_dir: Path, mark: Mapping[str, Any]) -> list[dict[str, Any]]:
    path = case_dir / "model_requests.jsonl"
    if not path.exists():
        return []
    requests = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if mark.get("shifts"):
        # Sent before the harness edited the session: they cannot match the edited file.
        requests = requests[mark["requests_before"] :]
    return requests


def _in_edited_coordinates(events: list[Any], mark: Mapping[str, Any]) -> list[Any]:
    """Translate ``session_bytes`` of events recorded before the harness edited the session
    into the edited file's offsets, so "running was on disk first" is judged truthfully."""
    shifts = mark.get("shifts") or []
    if not shifts:
        return events
    out = []
    for event in events:
        if event.seq <= mark["events_before"]:
            grown = sum(delta for end, delta in shifts if event.session_bytes >= end)
            event = dataclasses.replace(event, session_bytes=event.session_bytes + grown)
        out.append(event)
    return out


def judge(
    run: CaseRun,
    scenario: Scenario,
    point: CrashPoint | None,
    *,
    recovery: bool = False,
    keeps_ledger: bool = True,
    check_ledger: bool = True,
    adapter: object | None = None,
) -> Verdict:
    """``adapter`` reads the session back when the agent keeps it its own way (foreign
    adapters); an agent that keeps no ledger has its ledger expectations reported as not
    applicable -- never as passed."""
    expected = scenario.expectation(point, recovery=recovery)
    notes: list[str] = []
    if not check_ledger:
        expected.pop("ledger", None)
    if not keeps_ledger and expected.pop("ledger", None) is not None:
        notes.append("ledger: not applicable (the agent keeps no ledger)")
    status = run.status
    if status == "not_reached":
        return Verdict(
            "not_reached", None, expected, problems=(f"{point.id if point else 'clean'}: never reached",)
        )
    problems = [
        f"life {life.life} {life.status}" + (f": {life.error}" if life.error else "")
        for life in run.lives
        if life.status in ("hung", "error", "died")
    ]
    try:
        log = read_agent_session(adapter, run.case_dir)
    except SessionCorruption as error:
        return Verdict("failed", None, expected, problems=(*problems, str(error)))
    world, events = _world_view(run.case_dir)
    mark = _between_lives(run.case_dir)
    events = _in_edited_coordinates(events, mark)
    observed = observe(log, world)
    mismatches, indeterminate = _compare(expected, observed)
    evidence = Evidence(
        entries=log.entries,
        offsets=log.offsets,
        events=events,
        requests=_requests(run.case_dir, mark),
        turns=scenario.turns,
        contracts=scenario.contracts,
        has_ledger=keeps_ledger,
    )
    # Invariants run even when a life hung or failed: the evidence often says why.
    violations = check_all(evidence)
    ok = not mismatches and not violations and status == "ok"
    if status not in ("ok", "hung", "error", "died"):
        problems.append(f"the case did not finish: {status}")
    verdict_status = {"hung": "hung", "error": "error", "died": "error"}.get(
        status, "passed" if ok else "failed"
    )
    return Verdict(
        verdict_status,
        observed,
        expected,
        tuple(mismatches),
        tuple(violations),
        tuple(problems),
        indeterminate and ok,
        tuple(notes),
    )
