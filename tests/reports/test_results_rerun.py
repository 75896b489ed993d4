"""reports.results: a case's record carries the rerun line its failure text prints."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.verdict.explain import explain
from crashmatrix.harness.verdict.result import CaseResult
from crashmatrix.harness.verdict.verdict import Verdict
from crashmatrix.reports.results import record_from_result

ROOT = Path(__file__).resolve().parents[2]
MUTANT = "crashmatrix.reference_agent.mutants:blind_retry"


def test_a_failed_recovery_record_reruns_its_failing_second_crash_as_the_failure_text_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    lost = Verdict("failed", None, {}, problems=("lost",))
    subs = (("after_running[call_mail]", Verdict("passed", None, {})), ("after_side_effect[call_mail]", lost))
    result = CaseResult(
        load_scenario(ROOT / "scenarios" / "send_email" / "send_once.yaml"),
        "recovery@after_approved[call_mail]",
        "recovery",
        lost,
        1.0,
        4,
        Path("/tmp/case"),
        MUTANT,
        subs,
    )
    record = record_from_result(
        result, "scenarios/send_email/send_once.yaml::recovery@after_approved[call_mail]"
    )
    assert shlex.split(record.repro)[3:9] == [
        "--crash",
        "after_approved[call_mail]",
        "--second",
        "after_side_effect[call_mail]",
        "--agent",
        MUTANT,
    ]
    assert explain(result).splitlines()[-1] == f"  rerun: {record.repro}"
