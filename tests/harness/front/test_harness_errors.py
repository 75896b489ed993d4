"""A case whose harness side fails is a case (issue 26): ``error`` with its cause in one line
and the traceback in the case's ``harness-error.log``, in ``matrix.json``, counted, red in
the headline, failing its scorecard rows -- never a traceback beside a matrix that left it
out, and never a headline greener than pytest's exit status.

The fast tests hold ``cases.guarded``; the slow ones make the harness raise inside one case
of a real run (pytest in this process, ``crashmatrix run``) and read every view.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.core.trace import CaseRun
from crashmatrix.harness.errors import HarnessError, SessionCorruption
from crashmatrix.harness.front import cases, cli
from crashmatrix.harness.front.cases import HARNESS_ERROR_LOG, guarded
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.verdict.explain import explain
from crashmatrix.harness.verdict.result import CaseResult
from crashmatrix.reports.collector import case_record
from crashmatrix.reports.results import load_results

from ...pytest_runs import OTHER_PLUGINS_OFF, run_inprocess
from ...scenario_data import DATA, email_once

pytest_plugins = ["pytester"]

SCENARIO = load_scenario(DATA / "email_once.yaml")


def _raises(error: BaseException) -> Any:
    def run() -> CaseResult:
        raise error

    return run


def _copy_failed() -> shutil.Error:
    return shutil.Error([("first/world/world.sqlite-wal", "cut/world/world.sqlite-wal", "[Errno 2] gone")])


def test_a_harness_failure_is_the_cases_error_in_one_line_with_its_log(tmp_path: Path) -> None:
    result = guarded(
        _raises(_copy_failed()), SCENARIO, "power@after_running[call_1]", "power_loss", tmp_path / "c", "ref"
    )
    assert (result.point_id, result.boundary, result.verdict.status) == (
        "power@after_running[call_1]",
        "power_loss",
        "error",
    )
    [cause] = result.verdict.problems
    log = tmp_path / "c" / HARNESS_ERROR_LOG
    assert cause.startswith("the harness failed: Error: [('first/world/world.sqlite-wal'")
    assert cause.endswith(f"(details: {log})") and "\n" not in cause
    assert "Traceback (most recent call last)" in log.read_text() and "world.sqlite-wal" in log.read_text()
    assert not result.passed
    record = json.loads(case_record(result, "x.yaml::power@after_running[call_1]"))
    assert (record["status"], record["boundary"], record["problems"]) == ("error", "power_loss", [cause])
    # The failure text is the domain's: the cause, the case directory, the rerun line.
    text = explain(result)
    assert text.splitlines()[0].endswith("ERROR (agent ref, 0 lives)") and "Traceback" not in text


def test_our_own_errors_keep_their_one_line_message(tmp_path: Path) -> None:
    result = guarded(_raises(HarnessError("the fork server died")), SCENARIO, "clean", "clean", tmp_path, "r")
    assert result.verdict.problems == (f"the fork server died (details: {tmp_path / HARNESS_ERROR_LOG})",)


def test_a_long_cause_is_cut_the_log_keeps_all(tmp_path: Path) -> None:
    result = guarded(_raises(OSError("x" * 5000)), SCENARIO, "clean", "clean", tmp_path, "r")
    said = result.verdict.problems[0].partition(" (details: ")[0]
    assert said.endswith("…") and len(said) == len("the harness failed: OSError: ") + 300
    assert "x" * 5000 in (tmp_path / HARNESS_ERROR_LOG).read_text()


def test_an_agents_unreadable_session_met_on_the_way_fails_the_case_saying_where(tmp_path: Path) -> None:
    # Not a harness error, and never "repair or move the file": the agent wrote that file.
    broken = SessionCorruption(tmp_path / "world" / "workspace" / ".s" / "s.jsonl", 3, 90, "line is not JSON")
    result = guarded(_raises(broken), SCENARIO, "torn_write[call_1:running]", "torn_write", tmp_path, "r")
    assert result.verdict.status == "failed"
    assert result.verdict.problems == (
        "the agent left its session unreadable: .s/s.jsonl:3 (byte 90): line is not JSON",
    )


def test_an_interrupt_still_stops_the_run(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt):
        guarded(_raises(KeyboardInterrupt()), SCENARIO, "clean", "clean", tmp_path, "r")
    assert not (tmp_path / HARNESS_ERROR_LOG).exists()


# -- a real run with the harness failing inside one case --------------------------------------


def _failing_observe(monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """The harness raises while observing the case whose directory names ``where``: a
    stand-in for any harness failure inside a case (the copy race of issue 26 was one)."""
    real = cases.observe

    def observe(adapter: Any, run: CaseRun) -> Any:
        if where in str(run.case_dir):
            raise _copy_failed()
        return real(adapter, run)

    monkeypatch.setattr(cases, "observe", observe)


@pytest.mark.slow
def test_a_harness_error_in_one_case_is_red_in_every_view_and_no_traceback(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makefile(
        ".yaml",
        **{
            "scenarios/email": email_once(
                recovery_crashes=False, cover=["after_running", "after_side_effect"]
            )
        },
    )
    _failing_observe(monkeypatch, "after_running[")
    result = run_inprocess(
        pytester,
        "scenarios",
        "--no-power-loss",
        "--no-tool-side-faults",
        "--no-double-resume",
        "-p",
        "no:cacheprovider",
        "--no-doctor",
    )
    out = result.stdout.str()
    # pytest fails the run, and says why in the domain's words, without a traceback.
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "Traceback" not in out and "shutil.py" not in out and "cases.py" not in out, out
    result.stdout.fnmatch_lines(
        ["*after_running[[]call_1[]] ERROR*", "*problem: the harness failed: Error: *"]
    )
    # matrix.json: the case is there, an error with its one-line cause; its log holds why.
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    [case] = [c for c in results.cases if c.point == "after_running[call_1]"]
    assert case.status == "error" and case.lives == 0
    [cause] = case.problems
    assert cause.startswith("the harness failed: Error: ")
    log = Path(cause.rpartition("(details: ")[2].rstrip(")"))
    assert log.name == HARNESS_ERROR_LOG and "world.sqlite-wal" in log.read_text()
    assert {c.point: c.status for c in results.cases} == {
        "clean": "passed",
        "after_running[call_1]": "error",
        "after_side_effect[call_1]": "passed",
    }
    # Every headline counts it and none is greener than pytest's exit status.
    headline = "2/3 cases passed, 1 scenarios, agent reference (1 failed (1 error), "
    result.stdout.fnmatch_lines([f"crashmatrix: {headline}*"])
    markdown = (pytester.path / "reports" / "latest" / "matrix.md").read_text(encoding="utf-8")
    assert f"## crashmatrix: {headline}" in markdown
    html = (pytester.path / "reports" / "latest" / "matrix.html").read_text(encoding="utf-8")
    assert '<p class="headline bad">' in html
    # Its scorecard rows fail (the turn never finished, as far as anyone knows).
    raw = json.loads((pytester.path / "reports" / "latest" / "matrix.json").read_text(encoding="utf-8"))
    failing = [row for row in raw["scorecard"] if case.node_id in row["failing"]]
    assert failing and all(row["state"] == "fail" for row in failing), raw["scorecard"]


@pytest.mark.slow
def test_crashmatrix_run_goes_on_past_a_harness_error_in_one_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "email.yaml"
    scenario.write_text(email_once(recovery_crashes=False, cover=["after_running", "after_side_effect"]))
    _failing_observe(monkeypatch, "after_running[")
    code = cli.main(
        [
            "run",
            str(scenario),
            "--no-power-loss",
            "--no-tool-side-faults",
            "--no-double-resume",
            "--keep",
            str(tmp_path / "kept"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "email.yaml::after_running[call_1] ... error" in out
    assert "email.yaml::after_side_effect[call_1] ... passed" in out  # the matrix went on
    assert "problem: the harness failed: Error: " in out and "Traceback" not in out
    assert "2 passed, 1 failed" in out
    assert (tmp_path / "kept" / "after_running[call_1]" / HARNESS_ERROR_LOG).is_file()


@pytest.mark.slow
def test_a_case_pytest_fails_outside_its_verdict_is_an_error_in_the_report(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A failure in setup (here: injected) leaves the case no verdict; it still has a record.
    from crashmatrix.harness.front.collection import CrashCase

    def setup(self: CrashCase) -> None:
        if self.name.startswith("after_side_effect"):
            raise RuntimeError("the case's setup broke")

    monkeypatch.setattr(CrashCase, "setup", setup)
    pytester.makefile(
        ".yaml",
        **{
            "scenarios/email": email_once(
                recovery_crashes=False, cover=["after_running", "after_side_effect"]
            )
        },
    )
    result = run_inprocess(
        pytester,
        "scenarios",
        "--no-power-loss",
        "--no-tool-side-faults",
        "--no-double-resume",
        "-p",
        "no:cacheprovider",
        "--no-doctor",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    assert {c.point: c.status for c in results.cases} == {
        "clean": "passed",
        "after_running[call_1]": "passed",
        "after_side_effect[call_1]": "error",
    }
    [case] = [c for c in results.cases if c.status == "error"]
    assert case.problems[0].startswith(
        "pytest failed the case in its setup: RuntimeError: the case's setup broke"
    )
    assert case.idempotency == ("non_idempotent",)  # its scenario's row, its scorecard rows
    result.stdout.fnmatch_lines(
        ["crashmatrix: 2/3 cases passed, 1 scenarios, agent reference (1 failed (1 error), *"]
    )


@pytest.mark.slow
def test_a_harness_error_in_the_clean_run_of_collection_is_one_line_and_a_red_row(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makefile(".yaml", **{"scenarios/email": email_once(recovery_crashes=False)})
    _failing_observe(monkeypatch, "enumerate")
    result = run_inprocess(
        pytester,
        "scenarios",
        "--no-power-loss",
        "--no-tool-side-faults",
        "--no-double-resume",
        "-p",
        "no:cacheprovider",
        "--no-doctor",
    )
    out = result.stdout.str()
    assert result.ret != pytest.ExitCode.OK
    assert "Traceback" not in out and "cases.py" not in out, out
    result.stdout.fnmatch_lines(["*the harness failed: Error: *harness-error.log)"])
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    [case] = results.cases
    assert (case.node_id, case.point, case.status) == ("scenarios/email.yaml", "clean", "error")
    assert case.problems[0].startswith("the scenario was not collected: ")
    assert "the harness failed: Error: " in case.problems[0]
    result.stdout.fnmatch_lines(["crashmatrix: 0/1 cases passed, 1 scenarios, agent reference (1 failed*"])


@pytest.mark.slow
def test_a_case_whose_xdist_worker_died_is_an_error_in_the_report(pytester: pytest.Pytester) -> None:
    # The worker dies in the middle of one case (as under a kernel's OOM kill): xdist fails
    # the case and no record ever arrives. The controller still counts it, red.
    pytester.makefile(
        ".yaml",
        **{
            "scenarios/email": email_once(
                recovery_crashes=False, cover=["after_running", "after_side_effect"]
            )
        },
    )
    pytester.makeconftest(
        """
import os

def pytest_runtest_call(item):
    if item.name == "after_side_effect[call_1]" and os.environ.get("PYTEST_XDIST_WORKER"):
        os._exit(1)
"""
    )
    # One worker, not restarted: the case it died in is the last (the cheapest run that shows it).
    result = pytester.runpytest_subprocess(
        "scenarios",
        "-n",
        "1",
        "--no-power-loss",
        "--no-tool-side-faults",
        "--no-double-resume",
        "-p",
        "no:cacheprovider",
        "--no-doctor",
        "--max-worker-restart=0",
        *OTHER_PLUGINS_OFF,
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    statuses = {case.point: case.status for case in results.cases}
    assert statuses == {
        "clean": "passed",
        "after_running[call_1]": "passed",
        "after_side_effect[call_1]": "error",
    }
    [case] = [c for c in results.cases if c.status == "error"]
    assert case.problems == (
        "pytest failed the case: worker 'gw0' crashed while running "
        "'scenarios/email.yaml::after_side_effect[call_1]'",
    )
    raw = json.loads((pytester.path / "reports" / "latest" / "matrix.json").read_text(encoding="utf-8"))
    failing = [row for row in raw["scorecard"] if case.node_id in row["failing"]]
    assert failing and all(row["state"] == "fail" for row in failing), raw["scorecard"]
    result.stdout.fnmatch_lines(["crashmatrix: 2/3 cases passed, 1 scenarios, agent reference (1 failed*"])


@pytest.mark.slow
def test_a_harness_error_anywhere_in_collecting_a_scenario_is_one_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crashmatrix.harness.front import collection

    def power_target(*args: Any) -> Any:
        raise RuntimeError("the power column could not be planned")

    monkeypatch.setattr(collection, "power_target", power_target)
    pytester.makefile(".yaml", **{"scenarios/email": email_once(recovery_crashes=False)})
    result = run_inprocess(pytester, "scenarios", "-p", "no:cacheprovider", "--no-doctor")
    out = result.stdout.str()
    assert result.ret != pytest.ExitCode.OK
    assert "Traceback" not in out and "collection.py" not in out, out
    result.stdout.fnmatch_lines(
        [
            "*the harness failed: RuntimeError: the power column could not be planned "
            "(details: *harness-error.log)"
        ]
    )
    [case] = load_results(pytester.path / "reports" / "latest" / "matrix.json").cases
    assert (case.point, case.status) == ("clean", "error")


@pytest.mark.slow
def test_a_harness_error_after_the_verdict_is_one_line_and_the_case_an_error(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Raised after the case's record was made (its JUnit properties): pytest fails the case,
    # in one line; the passed record it had is an error on the controller.
    from crashmatrix.reports import collector

    real = collector.junit_properties

    def junit_properties(result: CaseResult) -> Any:
        if result.point_id.startswith("after_running"):
            raise RuntimeError("no properties")
        return real(result)

    monkeypatch.setattr(collector, "junit_properties", junit_properties)
    pytester.makefile(
        ".yaml",
        **{
            "scenarios/email": email_once(
                recovery_crashes=False, cover=["after_running", "after_side_effect"]
            )
        },
    )
    result = run_inprocess(
        pytester,
        "scenarios",
        "--no-power-loss",
        "--no-tool-side-faults",
        "--no-double-resume",
        "-p",
        "no:cacheprovider",
        "--no-doctor",
    )
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "Traceback" not in out and "collection.py" not in out, out
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    [case] = [c for c in results.cases if c.point == "after_running[call_1]"]
    assert case.status == "error"
    assert case.problems[0].startswith(
        "pytest failed the case in its call: the harness failed: RuntimeError: no properties (details: "
    ), case.problems
