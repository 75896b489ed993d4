"""no_partial_file after a tamper_arguments (issue 26, part K): an agent running its own tools
records no ``after_sha256`` of what it wrote, so what a call asked for before the harness edited
its saved arguments (the ``fault`` event the tamper leaves) is a whole new content too."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from crashmatrix.harness.core.records import entry_from_json
from crashmatrix.harness.core.session_log import encode_line
from crashmatrix.harness.verdict.invariants import Evidence, check_all

ASKED = {"path": "greeting.txt", "content": "hello"}
TAMPERED = {"path": "greeting.txt", "content": "HELLO, tampered world"}


@dataclass(frozen=True)
class Event:
    seq: int
    kind: str
    tool: str
    tool_call_id: str | None
    execution_id: str | None = None
    session_bytes: int = -1
    idempotency_key: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)


def _evidence(final: str, events: list[Event]) -> Evidence:
    call = {
        "id": "call_greet",
        "type": "function",
        "function": {"name": "write_file", "arguments": json.dumps(TAMPERED)},
    }
    lines = [
        {"type": "message", "message": {"role": "user", "content": "Write hello"}},
        {"type": "message", "message": {"role": "assistant", "content": "", "tool_calls": [call]}},
    ]
    entries = [entry_from_json(raw, line=n) for n, raw in enumerate(lines, start=1)]
    ends = [sum(len(encode_line(raw)) for raw in lines[: n + 1]) for n in range(len(lines))]
    return Evidence(
        entries=entries,
        offsets=ends,
        events=events,
        requests=[],
        turns=["Write hello"],
        contracts={},
        files={"greeting.txt": final},
    )


TAMPER = Event(
    1,
    "fault",
    "write_file",
    "call_greet",
    detail={"fault": "tamper_arguments", "arguments_before": json.dumps(ASKED)},
)


def test_what_the_call_asked_before_the_tamper_is_a_whole_content() -> None:
    assert check_all(_evidence("hello", [TAMPER]), only=["no_partial_file"]) == []
    assert check_all(_evidence("HELLO, tampered world", [TAMPER]), only=["no_partial_file"]) == []


def test_without_the_tampers_event_the_old_arguments_content_is_neither_old_nor_new() -> None:
    [violation] = check_all(_evidence("hello", []), only=["no_partial_file"])
    assert violation.invariant == "no_partial_file"


def test_half_of_either_content_is_still_partial() -> None:
    [violation] = check_all(_evidence("hel", [TAMPER]), only=["no_partial_file"])
    assert hashlib.sha256(b"hello").hexdigest() in violation.message  # named as an allowed new content
