"""reports.collector.junit_properties: what a JUnit reader gets is JSON, never a Python repr."""

from __future__ import annotations

import json
from pathlib import Path

from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.verdict.expectations import Observed
from crashmatrix.harness.verdict.result import CaseResult
from crashmatrix.harness.verdict.verdict import Verdict
from crashmatrix.reports.collector import junit_properties

ROOT = Path(__file__).resolve().parents[2]


def test_the_outcome_property_is_a_json_object_that_parses_back() -> None:
    observed = Observed({}, {"call_mail": "replayed", "call_ünï": "completed"}, {}, {})
    result = CaseResult(
        load_scenario(ROOT / "scenarios" / "send_email" / "send_once.yaml"),
        "after_running[call_mail]",
        "after_running",
        Verdict("failed", observed, {}),
        1.0,
        2,
        Path("/tmp/case"),
        "reference",
    )
    properties = dict(junit_properties(result))
    assert properties["crash_point"] == "after_running[call_mail]"
    assert properties["status"] == "failed"
    assert json.loads(properties["outcome"]) == {"call_mail": "replayed", "call_ünï": "completed"}
    assert "'" not in properties["outcome"]  # a dict repr would quote with '


def test_a_case_with_nothing_observed_has_no_outcome_property() -> None:
    result = CaseResult(
        load_scenario(ROOT / "scenarios" / "send_email" / "send_once.yaml"),
        "clean",
        "clean",
        Verdict("error", None, {}),
        0.0,
        0,
        Path("/tmp/case"),
        "reference",
    )
    assert [name for name, _ in junit_properties(result)] == ["crash_point", "status"]
