"""The report after a real ``pytest scenarios/`` run (pytester, in a subprocess, with xdist)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from crashmatrix.reports.results import SCHEMA_PATH, load_results

pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

SCENARIO = """
name: email_once
tools: [send_email]
turns: ["Send the invoice"]
recovery_crashes: false
cover: [after_running, after_side_effect]
model:
  - when: {role: user}
    reply:
      tool_calls:
        - {id: call_1, name: send_email, arguments: {to: a@example.com, subject: Invoice, body: hi}}
  - when: {tool: send_email}
    reply: {content: "Handled."}
expect:
  after_running:
    outcome: {call_1: %s}
"""
PASSING = SCENARIO % "side_effect_uncertain"
FAILING = SCENARIO % "replayed"


def test_a_run_with_xdist_writes_the_report_once_and_prints_the_table(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", **{"scenarios/email": PASSING})
    result = pytester.runpytest_subprocess("scenarios", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
    report = pytester.path / "reports" / "latest"
    assert sorted(p.name for p in report.iterdir()) == ["matrix.html", "matrix.json", "matrix.md"]
    raw = json.loads((report / "matrix.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(raw)
    node_ids = [case["node_id"] for case in raw["cases"]]
    assert sorted(node_ids) == sorted(set(node_ids)) and len(node_ids) == 3  # aggregated once
    assert {case["boundary"] for case in raw["cases"]} == {"clean", "after_running", "after_side_effect"}
    timeline = next(c for c in raw["cases"] if c["boundary"] == "after_running")["timeline"]
    assert {"source": "life", "life": 1, "event": "crash", "point": "after_running[call_1]"} in timeline
    result.stdout.fnmatch_lines(
        [
            "*= crashmatrix pass matrix =*",
            "crashmatrix: 3/3 cases passed, 1 scenarios, agent reference",
            "scenario*CL  TC  AP  RU  SE  BR  TR  TW  RC  passed",
            "  email *✓   ·   ·   ✓   ✓   ·   ·   ·   ·   3/3",
            f"report: {report / 'matrix.html'}*",
        ]
    )
    assert result.stdout.str().count("crashmatrix pass matrix") == 1


def test_failures_are_shown_first_and_junit_xml_carries_crash_point_and_outcome(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".yaml", **{"scenarios/email": FAILING})
    out = pytester.path / "custom"
    result = pytester.runpytest_subprocess(
        "scenarios", "-p", "no:cacheprovider", "--report-dir", str(out), "--junitxml", "junit.xml"
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "crashmatrix: 2/3 cases passed, 1 scenarios, agent reference (1 failed)",
            "failures (1):",
            # fnmatch: [...] is a character class, so brackets are matched with ?
            "  ✗ email.yaml::after_running?call_1? failed: outcome?call_1?: *",
            "      rerun: crashmatrix run scenarios/email.yaml --crash 'after_running?call_1?' --keep *",
            "scenario*",
        ]
    )
    assert not (pytester.path / "reports").exists()
    markdown = (out / "matrix.md").read_text(encoding="utf-8")
    assert markdown.index("### Failures (1)") < markdown.index("### Matrix")
    assert load_results(out / "matrix.json").failing[0].point == "after_running[call_1]"
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")} for case in cases
    }
    crashed = props["after_running[call_1]"]
    assert crashed["crash_point"] == "after_running[call_1]"
    assert crashed["status"] == "failed"
    assert crashed["outcome"] == "{'call_1': 'side_effect_uncertain'}"


def test_no_report_is_written_with_no_report_or_when_no_crash_case_ran(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", **{"scenarios/email": PASSING})
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    assert pytester.runpytest_subprocess("scenarios", "--no-report", "-p", "no:cacheprovider").ret == 0
    assert not (pytester.path / "reports").exists()
    plain = pytester.runpytest_subprocess("test_plain.py", "-p", "no:cacheprovider")
    plain.assert_outcomes(passed=1)
    assert not (pytester.path / "reports").exists()
    assert "crashmatrix pass matrix" not in plain.stdout.str()


def test_the_github_step_summary_gets_the_markdown(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = pytester.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    pytester.makefile(".yaml", **{"scenarios/email": PASSING})
    pytester.runpytest_subprocess("scenarios", "-p", "no:cacheprovider", "--crash-boundary", "after_running")
    text = summary.read_text(encoding="utf-8")
    assert "## crashmatrix: 2/2 cases passed, 1 scenarios, agent reference" in text
    assert Path(pytester.path / "reports" / "latest" / "matrix.html").is_file()


def test_a_run_stopped_early_writes_the_cases_that_ran_and_marks_the_report_incomplete(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".yaml", **{"scenarios/email": FAILING})
    result = pytester.runpytest_subprocess("scenarios", "-x", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    assert results.incomplete
    assert 0 < len(results.cases) < 3  # clean + after_running ran; -x stopped the rest
    result.stdout.fnmatch_lines(["*INCOMPLETE (interrupted): *"])
    markdown = (pytester.path / "reports" / "latest" / "matrix.md").read_text(encoding="utf-8")
    assert "INCOMPLETE (interrupted)" in markdown


def test_a_complete_run_is_not_marked_incomplete(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", **{"scenarios/email": PASSING})
    assert pytester.runpytest_subprocess("scenarios", "-p", "no:cacheprovider").ret == 0
    assert not load_results(pytester.path / "reports" / "latest" / "matrix.json").incomplete


def test_an_api_key_in_the_environment_appears_in_no_report_and_no_output(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-crashmatrix-report-test-77e1c2"
    monkeypatch.setenv("OPENAI_API_KEY", secret)  # the subprocess run inherits it
    pytester.makefile(".yaml", **{"scenarios/email": FAILING})  # failures print the most
    junit = pytester.path / "junit.xml"
    result = pytester.runpytest_subprocess("scenarios", "-p", "no:cacheprovider", f"--junitxml={junit}")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    written = [p for p in (pytester.path / "reports").rglob("*") if p.is_file()] + [junit]
    assert len(written) >= 4
    assert [p for p in written if secret.encode() in p.read_bytes()] == []
    assert secret not in result.stdout.str() + result.stderr.str()
