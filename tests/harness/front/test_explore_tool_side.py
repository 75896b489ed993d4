"""crashmatrix explore draws the tool-side columns (issue 32): a clean run's calls that reached
the tool side are cases like its crash points, and a finding there is written as a file that
names its case (``tool_side:<case>``: ``cover:`` takes crash points only) and reruns it."""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS
from crashmatrix.harness.front.explore import (
    TOOL_SIDE_TAG,
    CallSpec,
    Conversation,
    Finding,
    Schedule,
    _tool_side_cases,
    found_document,
    materialise,
    repro_line,
    scenario_document,
    schedule_of,
)
from crashmatrix.harness.verdict.verdict import Verdict

EMAIL = CallSpec("send_email", {"to": "a@example.com", "subject": "s", "body": "b"})


def test_each_call_that_reached_the_mock_tools_is_a_case_of_each_kind() -> None:
    trace = [
        {"life": 1, "event": "boundary", "boundary": "after_running", "call": "c1", "occurrence": 1},
        {"life": 1, "event": "mcp_call", "call": "c1", "tool": "send_email", "via": "mock tools"},
    ]
    cases = _tool_side_cases("reference", trace, [CrashPoint("after_running", "c1")])
    assert [p.id for p in cases] == [f"{kind}[c1]" for kind in TOOL_SIDE_KINDS]
    assert _tool_side_cases("reference", trace[:1], []) == ()  # nothing reached the tool side


def test_a_tool_side_finding_is_a_file_that_names_its_case_and_reruns_it(tmp_path: Path) -> None:
    doc = scenario_document(Conversation(turns=(((EMAIL,),),)))
    schedule = Schedule(CrashPoint("tool_server_died", "c1"))
    assert schedule.case_id == "tool_server_died[c1]"
    verdict = Verdict("failed", None, {}, problems=("non_idempotent_at_most_once",))
    finding = Finding(doc, schedule, verdict, "crashmatrix.reference_agent.mutants:connection_error_resent")
    found = found_document(finding)
    assert "cover" not in found
    assert f"{TOOL_SIDE_TAG}tool_server_died[c1]" in found["tags"]
    path = tmp_path / "found.yaml"
    scenario = materialise(found, path)  # a file load_scenario accepts
    assert schedule_of(scenario) == schedule
    assert "--crash 'tool_server_died[c1]'" in repro_line(path, finding)
