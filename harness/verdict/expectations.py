"""A scenario's expectation for a point compared with what a case showed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from crashmatrix.harness.core.categories import CRASHMATRIX, ResultMapping
from crashmatrix.harness.core.ledger import executions_by_call, tool_call_sites
from crashmatrix.harness.core.records import MessageEntry
from crashmatrix.harness.core.session_log import SessionLog

__all__ = [
    "LEDGER_FIELDS",
    "PORTABLE_FIELDS",
    "Mismatch",
    "Observed",
    "compare",
    "matches",
    "project",
    "show_value",
]


# The fields of an expectation, by tier. Portable: what any agent must get right, seen from
# outside (what the model was told, as a category; the world). Ledger: crashmatrix's own
# vocabulary (the ledger's statuses, the ``recovery`` outcome and the ``code`` of its Tool
# Results), applied when the agent keeps a ledger the adapter maps and answers in that shape.
PORTABLE_FIELDS = ("told", "world")
LEDGER_FIELDS = ("ledger", "outcome", "code")


@dataclass(frozen=True, slots=True)
class Observed:
    ledger: Mapping[str, list[str]]
    outcome: Mapping[str, str]
    code: Mapping[str, str | None]
    world: Mapping[str, Any]
    session_lines: int = 0
    told: Mapping[str, str] = field(default_factory=dict)  # call id -> category


@dataclass(frozen=True, slots=True)
class Mismatch:
    field: str  # "outcome[call_1]", "world.orders", ...
    expected: Any
    observed: Any

    def describe(self) -> str:
        return f"{self.field}: expected {show_value(self.expected)}, observed {show_value(self.observed)}"


def show_value(value: Any) -> str:
    """An expected or observed value in a text a person reads and a machine could parse:
    JSON (``null``, ``["saved", "running"]``), never a Python repr (``None``, ``['saved']``),
    so the same value reads the same in the failure text, the Markdown and the terminal.
    A set of allowed values (``{"in": [...]}``) is ``one of [...]``."""
    if isinstance(value, Mapping) and set(value) == {"in"}:
        return "one of " + json.dumps(value["in"], ensure_ascii=False, default=str)
    return json.dumps(value, ensure_ascii=False, default=str)


def matches(expected: Any, observed: Any) -> bool:
    if isinstance(expected, Mapping) and set(expected) == {"in"}:
        return any(matches(option, observed) for option in expected["in"])
    return bool(expected == observed)


def project(log: SessionLog, world: Mapping[str, Any], results: ResultMapping = CRASHMATRIX) -> Observed:
    """What the expectations compare: per call, the ledger statuses, the recovery outcome
    and error code the model was told, and the category of what it was told (read through
    the agent's ``results`` mapping); and the world."""
    entries = log.entries
    ledger: dict[str, list[str]] = {}
    outcome: dict[str, str] = {}
    code: dict[str, str | None] = {}
    told: dict[str, str] = {}
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
                told[call_id] = results.category(message.content)
    return Observed(ledger, outcome, code, world, len(entries), told)


def _ledger_as_expected(want: Any, got: list[str]) -> list[str]:
    """The observed statuses in the vocabulary of the expectation ``want``: a sequence in ours
    (no ``planned``) is compared without a seed 004 agent's ``planned`` steps. ``planned`` is
    the state "recorded, nobody approved it yet", our state "no ledger yet" (``core.ledger``):
    an agent that writes it before asking is as correct as one that does not. A sequence that
    names ``planned`` (a scenario written for such an agent) is compared as observed."""
    options = want["in"] if isinstance(want, Mapping) and set(want) == {"in"} else [want]
    if any(isinstance(option, list) and "planned" in option for option in options):
        return got
    return [status for status in got if status != "planned"]


def compare(expected: Mapping[str, Any], observed: Observed) -> tuple[list[Mismatch], bool]:
    """The mismatches, and whether a match relied on a set of allowed values."""
    mismatches: list[Mismatch] = []
    indeterminate = False
    for name in ("told", "outcome", "ledger", "code"):
        table: Mapping[str, Any] = getattr(observed, name)
        for call_id, want in (expected.get(name) or {}).items():
            got = table.get(call_id, None if name != "ledger" else [])
            if name in ("outcome", "told") and call_id not in table:
                got = "(no tool result)"
            # The mismatch shows the ledger as the agent wrote it, planned steps included.
            if not matches(want, _ledger_as_expected(want, got) if name == "ledger" else got):
                mismatches.append(Mismatch(f"{name}[{call_id}]", want, got))
            elif isinstance(want, Mapping) and len(want["in"]) > 1 and name != "told":
                # A set of categories is the suite being fair to every agent's wording
                # (succeeded or replayed), not an outcome the case left undetermined.
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
