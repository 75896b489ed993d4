"""A depth-2 case's report shows every second crash: its verdict, its own timeline and its
own rerun line, in the results file, the HTML, the Markdown and the failure text."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.verdict.expectations import Mismatch, Observed
from crashmatrix.harness.verdict.explain import explain
from crashmatrix.harness.verdict.result import CaseResult, SubCase
from crashmatrix.harness.verdict.verdict import Verdict
from crashmatrix.reports.html import render_html
from crashmatrix.reports.markdown import render_markdown
from crashmatrix.reports.matrix import build_matrix
from crashmatrix.reports.results import (
    Results,
    record_from_result,
    results_from_json,
    results_to_json,
    schema,
)
from crashmatrix.reports.timeline import summary

ROOT = Path(__file__).resolve().parents[2]
MUTANT = "crashmatrix.reference_agent.mutants:blind_retry"
FIRST = "after_approved[call_mail]"
SECONDS = ("after_running[call_mail]", "before_tool_result[call_mail]", "after_side_effect[call_mail]")


def _timeline(second: str) -> tuple[dict[str, Any], ...]:
    return (
        {"source": "life", "life": 1, "event": "start"},
        {"source": "life", "life": 1, "event": "crash", "point": FIRST},
        {"source": "life", "life": 2, "event": "start"},
        {"source": "life", "life": 2, "event": "crash", "point": second},
        {"source": "life", "life": 3, "event": "start"},
        {
            "source": "world",
            "seq": 1,
            "kind": "email_sent",
            "tool": "send_email",
            "execution_id": "e1",
            "tool_call_id": "call_mail",
            "session_bytes": 10,
            "life": 3,
        },
        {"source": "life", "life": 3, "event": "exit"},
    )


OBSERVED = Observed(
    {"call_mail": ["approved", "running"]}, {"call_mail": "replayed"}, {"call_mail": None}, {}
)
TWICE = Verdict(
    "failed",
    OBSERVED,
    {},
    mismatches=(Mismatch("world.emails", {"in": [0, 1]}, 2),),
)
LOST = Verdict("failed", OBSERVED, {}, problems=("the turn never ended",))
PASSED = Verdict("passed", OBSERVED, {})


@pytest.fixture
def result(monkeypatch: pytest.MonkeyPatch) -> CaseResult:
    monkeypatch.chdir(ROOT)  # rerun lines name the scenario relative to here
    subs = ((SECONDS[0], TWICE), (SECONDS[1], PASSED), (SECONDS[2], LOST))
    return CaseResult(
        load_scenario(ROOT / "scenarios" / "send_email" / "send_once.yaml"),
        f"recovery@{FIRST}",
        "recovery",
        TWICE,
        1.0,
        10,
        Path("/tmp/case"),
        MUTANT,
        subs,
        sub_cases=tuple(
            SubCase(second, Path(f"/tmp/case/second-{i}"), _timeline(second))
            for i, second in enumerate(SECONDS)
        ),
    )


def _second_of(repro: str) -> str:
    words = shlex.split(repro)
    assert words[:2] == ["crashmatrix", "run"]
    assert words[words.index("--crash") + 1] == FIRST
    return words[words.index("--second") + 1]


def test_the_record_keeps_each_second_crash_with_its_own_rerun_line_and_timeline(result: CaseResult) -> None:
    record = record_from_result(result, f"scenarios/send_email/send_once.yaml::recovery@{FIRST}")
    seconds = record.recovery_points
    assert [s["point"] for s in seconds] == list(SECONDS)
    assert [s["status"] for s in seconds] == ["failed", "passed", "failed"]
    assert [_second_of(s["repro"]) for s in seconds] == list(SECONDS)
    assert [s["case_dir"] for s in seconds] == [f"/tmp/case/second-{i}" for i in range(3)]
    assert [len(s["timeline"]) for s in seconds] == [7, 7, 7]
    assert seconds[1]["timeline"][3]["point"] == SECONDS[1]
    assert seconds[0]["reasons"] == ["world.emails: expected one of [0, 1], observed 2"]
    assert seconds[2]["reasons"] == ["problem: the turn never ended"]
    assert "reasons" not in seconds[1]  # a pass has nothing to explain
    assert _second_of(record.repro) == SECONDS[0]  # the case's own line: its first failure


def test_the_second_crashes_fit_the_schema_and_read_back_equal(result: CaseResult) -> None:
    record = record_from_result(result, f"send_once.yaml::recovery@{FIRST}")
    raw = json.loads(json.dumps(results_to_json(Results("reference", (record,)))))
    jsonschema.validate(raw, schema())
    assert results_from_json(raw).cases == (record,)
    broken = json.loads(json.dumps(raw))
    broken["cases"][0]["recovery_points"][0]["timeline"][0]["source"] = "nowhere"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema())


def test_the_html_shows_every_second_crash_with_its_timeline_and_rerun_line(result: CaseResult) -> None:
    record = record_from_result(result, f"send_once.yaml::recovery@{FIRST}")
    results = Results("reference", (record,))
    page = render_html(results, build_matrix(results))
    blocks = re.findall(r'<details class="second"( open)?>(.*?)</details>', page, re.S)
    assert len(blocks) == 3
    assert [bool(is_open) for is_open, _ in blocks] == [True, False, True]  # failures open
    for (_, block), second, entry in zip(blocks, SECONDS, record.recovery_points, strict=True):
        assert f"second crash at <code>{second}</code>" in block
        assert block.count('<ol class="timeline">') == 1
        assert f"✗ SIGKILL at {second}" in block  # its own second crash, not the shown one's
        assert f'data-copy="{entry["repro"].replace(chr(39), "&#x27;")}"' in block
    assert "expected one of [0, 1], observed 2" in blocks[0][1]


def test_the_markdown_gives_each_failing_second_crash_its_timeline_and_rerun_line(result: CaseResult) -> None:
    record = record_from_result(result, f"send_once.yaml::recovery@{FIRST}")
    text = render_markdown(build_matrix(Results("reference", (record,))))
    reruns = re.findall(r"^  - rerun: `(.*)`$", text, re.M)
    assert [_second_of(line) for line in reruns] == [SECONDS[0], SECONDS[2]]  # the passed one has none
    assert (
        f"  - timeline: life 1 crashed at {FIRST} -> life 2 crashed at {SECONDS[2]} -> 1 world event "
        "-> life 3 exited"
    ) in text.splitlines()


def test_a_timeline_in_one_line_names_each_lifes_end_and_counts_world_events_between() -> None:
    moments = [
        *_timeline(SECONDS[0])[:5],
        {"source": "more", "omitted": 4},
        *_timeline(SECONDS[0])[5:],
    ]
    assert summary(moments) == (
        f"life 1 crashed at {FIRST} -> life 2 crashed at {SECONDS[0]} -> ... 4 moments left out "
        "-> 1 world event -> life 3 exited"
    )
    torn = [{"source": "life", "life": 1, "event": "torn", "point": "torn_write[call_1:running]"}]
    assert summary(torn) == "life 1 torn write at torn_write[call_1:running]"
    assert summary([]) == ""


def test_the_failure_text_shows_json_values_never_python_reprs(result: CaseResult) -> None:
    text = explain(dataclasses.replace(result, sub_results=(), sub_cases=()))
    assert 'ledger[call_mail]: ["approved", "running"]' in text
    assert 'outcome[call_mail]: "replayed"; code seen by the model: null' in text
    assert "None" not in text and "['" not in text
