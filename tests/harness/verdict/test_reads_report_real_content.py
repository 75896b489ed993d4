"""reads_report_real_content (issue 32): a read told to have succeeded reports a content its
file really had. Sessions in seed 000's JSONL shape, as the reference agent writes a read
(no ledger lines: read_file keeps none)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from crashmatrix.harness.core.categories import ResultMapping
from crashmatrix.harness.core.records import entry_from_json
from crashmatrix.harness.core.session_log import encode_line
from crashmatrix.harness.verdict.invariants import Evidence, check_all, not_applicable

NAME = "reads_report_real_content"
SEED = {"settings.json": '{"theme": "dark"}\n'}


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


def _read(result: Mapping[str, Any], *, path: str = "settings.json") -> list[dict[str, Any]]:
    call = {
        "id": "call_settings",
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": path})},
    }
    return [
        {"type": "message", "message": {"role": "user", "content": "Which theme?"}},
        {"type": "message", "message": {"role": "assistant", "content": "", "tool_calls": [call]}},
        {
            "type": "message",
            "message": {"role": "tool", "tool_call_id": "call_settings", "content": json.dumps(dict(result))},
        },
        {"type": "message", "message": {"role": "assistant", "content": "The dark theme."}},
    ]


def _evidence(
    lines: Sequence[Mapping[str, Any]],
    *,
    events: Sequence[Event] = (),
    files: Mapping[str, str | None] | None = None,
    **changes: Any,
) -> Evidence:
    entries = [entry_from_json(dict(raw), line=n) for n, raw in enumerate(lines, start=1)]
    ends = [sum(len(encode_line(dict(raw))) for raw in lines[: n + 1]) for n in range(len(lines))]
    return Evidence(
        entries=entries,
        offsets=ends,
        events=list(events),
        requests=[],
        turns=["Which theme?"],
        contracts={},
        files=dict(SEED) if files is None else dict(files),
        seed_files=SEED,
        **changes,
    )


def _read_result(content: str, **more: Any) -> dict[str, Any]:
    return {"ok": True, "status": "succeeded", "path": "settings.json", "content": content, **more}


def test_a_read_that_reports_the_files_content_passes() -> None:
    assert check_all(_evidence(_read(_read_result(SEED["settings.json"]))), only=[NAME]) == []


def test_an_empty_success_for_a_file_that_has_content_is_a_violation_naming_the_call() -> None:
    (violation,) = check_all(_evidence(_read(_read_result(""))), only=[NAME])
    assert violation.tool_call_id == "call_settings"
    assert "told the model it read '' (0 bytes)" in violation.message
    assert "a failed read must be told as failed" in violation.message


def test_a_failed_read_told_as_failed_is_not_judged() -> None:
    timeout = {"ok": False, "status": "failed", "code": "TIMEOUT", "content": "timed out"}
    assert check_all(_evidence(_read(timeout)), only=[NAME]) == []


def test_a_content_the_file_had_at_another_time_passes() -> None:
    # Another writer changed it between lives: the read may have seen either version.
    now = {"settings.json": '{"theme": "light"}\n'}
    after = hashlib.sha256(now["settings.json"].encode()).hexdigest()
    edited = Event(
        1, "external_write", "(external)", None, detail={"path": "settings.json", "after_sha256": after}
    )
    ev = _evidence(_read(_read_result('{"theme": "light"}\n')), events=[edited], files=now)
    assert check_all(ev, only=[NAME]) == []
    ev = _evidence(_read(_read_result(SEED["settings.json"])), events=[edited], files=now)
    assert check_all(ev, only=[NAME]) == []


def test_a_path_a_command_touched_or_a_truncated_read_is_not_judged() -> None:
    append = Event(
        1, "command", "run_command", "call_x", detail={"path": "settings.json", "effect": "append"}
    )
    assert check_all(_evidence(_read(_read_result("anything")), events=[append]), only=[NAME]) == []
    assert check_all(_evidence(_read(_read_result("", truncated=True))), only=[NAME]) == []


def test_a_file_nothing_is_known_of_is_not_judged() -> None:
    lines = _read(_read_result("made up", path="other.txt"), path="other.txt")
    assert check_all(_evidence(lines), only=[NAME]) == []


def test_an_agent_answering_in_its_own_words_is_not_applicable_not_judged() -> None:
    own = ResultMapping(name="sentences")
    ev = _evidence(_read(_read_result("")), results=own)
    assert check_all(ev, only=[NAME]) == []
    assert "not crashmatrix's shape" in dict(not_applicable(ev))[NAME]
