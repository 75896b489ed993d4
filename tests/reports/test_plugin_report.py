"""The report after a real ``pytest scenarios/`` run.

Most runs are in-process (``tests/pytest_runs.py``); two need their own interpreter: the
run with xdist workers (``tests/xdist_run.py``, shared with test_casedir), and the run whose
lives must inherit an API key from the environment. The failing run with ``--junitxml`` is
shared by the two tests that read it.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from crashmatrix.reports.results import SCHEMA_PATH, load_results

from ..pytest_runs import OTHER_PLUGINS_OFF, run_inprocess, run_subprocess
from ..scenario_data import email_once
from ..xdist_run import ParallelRun, parallel_run

pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]


def scenario(outcome: str) -> str:
    """email_once crashed after running and after its side effect, expecting ``outcome``
    after running."""
    return email_once(
        recovery_crashes=False,
        cover=["after_running", "after_side_effect"],
        expect={"after_running": {"outcome": {"call_1": outcome}}},
    )


PASSING = scenario("side_effect_uncertain")
FAILING = scenario("replayed")
SECRET = "sk-crashmatrix-report-test-77e1c2"


@pytest.fixture(scope="module")
def xdist_run(tmp_path_factory: pytest.TempPathFactory) -> ParallelRun:
    return parallel_run(tmp_path_factory)


def test_a_run_with_xdist_writes_the_report_once_and_prints_the_table(xdist_run: ParallelRun) -> None:
    # PASSING, with two workers and without the tool-side columns (tests/xdist_run.py: the
    # run test_casedir reads for what it leaves in $TMPDIR)
    assert xdist_run.path.joinpath("scenarios", "email.yaml").read_text(encoding="utf-8") == PASSING
    result = xdist_run.result
    # clean, two crash points, each one's power loss, and two lives resuming after_running at once
    result.assert_outcomes(passed=6)
    report = xdist_run.path / "reports" / "latest"
    assert sorted(p.name for p in report.iterdir()) == ["matrix.html", "matrix.json", "matrix.md"]
    raw = json.loads((report / "matrix.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(raw)
    node_ids = [case["node_id"] for case in raw["cases"]]
    assert sorted(node_ids) == sorted(set(node_ids)) and len(node_ids) == 6  # aggregated once
    assert {case["boundary"] for case in raw["cases"]} == {
        "clean",
        "after_running",
        "after_side_effect",
        "power_loss",
        "double_resume",
    }
    power = [c for c in raw["cases"] if c["boundary"] == "power_loss"]
    assert sorted(c["point"] for c in power) == [
        "power@after_running[call_1]",
        "power@after_side_effect[call_1]",
    ]
    timeline = next(c for c in raw["cases"] if c["boundary"] == "after_running")["timeline"]
    assert {"source": "life", "life": 1, "event": "crash", "point": "after_running[call_1]"} in timeline
    result.stdout.fnmatch_lines(
        [
            "*= crashmatrix pass matrix =*",
            # cover: [after_running, after_side_effect] and recovery_crashes: false leave seven
            # columns deselected, --no-tool-side-faults four more, said so rather than shown as
            # points that never happened; the reference agent has no after_tool_call_pending:
            # not drawn, said why
            "crashmatrix: 6/6 cases passed, 1 scenarios, agent reference "
            "(1 cells not reachable by this agent, 11 cells deselected)",
            # (a column no row can reach is not drawn: the four tool-side columns here)
            "scenario*CL MR TC AP RU DE SE BR TR TW PL RC DR passed",
            "  email *✓  »  »  »  ✓  ·  ✓  »  »  »  ✓  »  ✓  6/6",
            "⊘ TP: the reference agent saves a model reply in one append*",
            "» SD RL RE RM: --no-tool-side-faults",
            f"report: {report / 'matrix.html'}*",
        ]
    )
    assert result.stdout.str().count("crashmatrix pass matrix") == 1


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pytest.RunResult]:
    """FAILING with ``--report-dir custom --junitxml junit.xml``, run once in a fresh
    interpreter with an API key in its environment (every life inherits it)."""
    path = tmp_path_factory.mktemp("failing-run")
    (path / "scenarios").mkdir()
    (path / "scenarios" / "email.yaml").write_text(FAILING, encoding="utf-8")
    args = (
        "scenarios",
        "--no-power-loss",
        "--no-double-resume",
        "--no-tool-side-faults",
        "-p",
        "no:cacheprovider",
        "--report-dir",
        "custom",
        "--junitxml",
        "junit.xml",
        *OTHER_PLUGINS_OFF,
    )
    return path, run_subprocess(path, *args, env={"OPENAI_API_KEY": SECRET})


def test_failures_are_shown_first_and_junit_xml_carries_crash_point_and_outcome(
    failing_run: tuple[Path, pytest.RunResult],
) -> None:
    path, result = failing_run
    out = path / "custom"
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "crashmatrix: 2/3 cases passed, 1 scenarios, agent reference "
            "(1 failed, 1 cells not reachable by this agent, 13 cells deselected)",
            "failures (1):",
            # fnmatch: [...] is a character class, so brackets are matched with ?
            "  ✗ email.yaml::after_running?call_1? failed: outcome?call_1?: *",
            "      rerun: crashmatrix run scenarios/email.yaml --crash 'after_running?call_1?'",
            "scenario*",
        ]
    )
    assert not (path / "reports").exists()
    markdown = (out / "matrix.md").read_text(encoding="utf-8")
    order = [markdown.index(f"### {part}") for part in ("Causes (1)", "Matrix", "Failures (1)")]
    assert order == sorted(order)
    assert load_results(out / "matrix.json").failing[0].point == "after_running[call_1]"
    cases = ET.parse(path / "junit.xml").getroot().iter("testcase")
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")} for case in cases
    }
    crashed = props["after_running[call_1]"]
    assert crashed["crash_point"] == "after_running[call_1]"
    assert crashed["status"] == "failed"
    assert json.loads(crashed["outcome"]) == {"call_1": "side_effect_uncertain"}  # JSON, not a repr


def test_the_terminal_table_gives_a_long_scenario_name_the_terminals_width(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "a_scenario_whose_name_is_much_longer_than_thirty_characters"
    pytester.makefile(".yaml", **{f"scenarios/{name}": PASSING})
    monkeypatch.setenv("COLUMNS", "200")  # what pytest's terminal writer reads for its width
    result = run_inprocess(
        pytester,
        "scenarios",
        "--no-power-loss",
        "--no-double-resume",
        "--no-tool-side-faults",
        "-p",
        "no:cacheprovider",
        "--no-doctor",
    )
    result.assert_outcomes(passed=3)
    [row] = [line for line in result.outlines if name[:20] in line and "3/3" in line]
    assert f"{name} " in row  # whole, not cut to fit 80 columns


def test_an_api_key_in_the_environment_appears_in_no_report_and_no_output(
    failing_run: tuple[Path, pytest.RunResult],
) -> None:
    path, result = failing_run  # failures print the most
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    written = [p for p in (path / "custom").rglob("*") if p.is_file()] + [path / "junit.xml"]
    assert sorted(p.name for p in written) == ["junit.xml", "matrix.html", "matrix.json", "matrix.md"]
    assert [p for p in written if SECRET.encode() in p.read_bytes()] == []
    assert SECRET not in result.stdout.str() + result.stderr.str()


def test_no_report_is_written_with_no_report_or_when_no_crash_case_ran(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", **{"scenarios/email": PASSING})
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    assert (
        run_inprocess(
            pytester,
            "scenarios",
            "--no-power-loss",
            "--no-double-resume",
            "--no-report",
            "-p",
            "no:cacheprovider",
        ).ret
        == 0
    )
    assert not (pytester.path / "reports").exists()
    plain = run_inprocess(pytester, "test_plain.py", "-p", "no:cacheprovider")
    plain.assert_outcomes(passed=1)
    assert not (pytester.path / "reports").exists()
    assert "crashmatrix pass matrix" not in plain.stdout.str()


def test_the_github_step_summary_gets_the_markdown(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = pytester.path / "step_summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))  # read by the run's controller: this process
    pytester.makefile(".yaml", **{"scenarios/email": PASSING})
    run_inprocess(
        pytester,
        "scenarios",
        "--no-power-loss",
        "--no-double-resume",
        "-p",
        "no:cacheprovider",
        "--crash-boundary",
        "after_running",
    )
    text = summary.read_text(encoding="utf-8")
    assert "## crashmatrix: 2/2 cases passed, 1 scenarios, agent reference" in text
    assert Path(pytester.path / "reports" / "latest" / "matrix.html").is_file()


def test_a_run_stopped_early_writes_the_cases_that_ran_and_marks_the_report_incomplete(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".yaml", **{"scenarios/email": FAILING})
    result = run_inprocess(
        pytester, "scenarios", "--no-power-loss", "--no-double-resume", "-x", "-p", "no:cacheprovider"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    assert results.incomplete
    # clean and after_running ran (collection order); -x stopped after_side_effect.
    assert [c.point for c in results.cases] == ["clean", "after_running[call_1]"]
    # Selected but never run (-x stopped first): not "deselected", which is pytest's selection.
    assert not [gap for gap in results.not_run if gap.boundary == "after_side_effect"]
    result.stdout.fnmatch_lines(["*INCOMPLETE (interrupted): *"])
    markdown = (pytester.path / "reports" / "latest" / "matrix.md").read_text(encoding="utf-8")
    assert "INCOMPLETE (interrupted)" in markdown


def test_a_complete_run_is_not_marked_incomplete(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", **{"scenarios/email": PASSING})
    assert (
        run_inprocess(
            pytester, "scenarios", "--no-power-loss", "--no-double-resume", "-p", "no:cacheprovider"
        ).ret
        == 0
    )
    assert not load_results(pytester.path / "reports" / "latest" / "matrix.json").incomplete


def test_items_left_out_by_pytests_own_selection_are_deselected_not_not_reached(
    pytester: pytest.Pytester,
) -> None:
    # -k deselects the clean item too: the plan travels with the scenario's first record
    # that runs, whichever it is.
    pytester.makefile(".yaml", **{"scenarios/email": PASSING})
    result = run_inprocess(pytester, "scenarios", "-k", "after_side_effect", "-p", "no:cacheprovider")
    # after_side_effect and its power loss ran; clean, after_running, its power loss, its
    # double resume and the call's four tool-side faults were deselected
    result.assert_outcomes(passed=2, deselected=8)
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    deselected = {gap.boundary: gap for gap in results.not_run if gap.state == "deselected"}
    assert deselected["clean"].points == ("clean",)
    assert deselected["after_running"].points == ("after_running[call_1]",)
    assert deselected["power_loss"].points == ("power@after_running[call_1]",)
    assert deselected["double_resume"].points == ("double@after_running[call_1]",)
    assert deselected["tool_server_died"].points == ("tool_server_died[call_1]",)
    assert "pytest's selection (-k" in deselected["after_running"].why
    assert "after_side_effect" not in deselected or "--crash-boundary" in deselected["after_side_effect"].why
    markdown = (pytester.path / "reports" / "latest" / "matrix.md").read_text(encoding="utf-8")
    row = next(line for line in markdown.splitlines() if line.startswith("| email"))
    # clean, running, its power loss, its double resume, the four tool-side faults and 6 by
    # cover; during_side_effect is empty (one step); after_tool_call_pending is not reachable
    # by the reference agent
    assert row.count("⏭ deselected") == 14 and row.count("⬜") == 1 and row.count("🚫 not reachable") == 1
