"""The pytest plugin end to end, as a user runs it: ``pytest scenarios/`` in a project.

Each test runs pytest in this process (pytester, ``tests/pytest_runs.py``): the inner run
loads the plugin through its ``pytest11`` entry point, exactly as an installed crashmatrix
is loaded, and forks its lives from a fork server subprocess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from crashmatrix.reports.matrix import build_matrix
from crashmatrix.reports.results import load_results

from ...pytest_runs import run_inprocess
from ...scenario_data import email_once

pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]


def scenario(
    outcome: str,
    *,
    cover: Sequence[str] = ("after_running",),
    default: Mapping[str, object] | None = None,
    edits: Sequence[tuple[str, str]] = (),
    **keys: object,
) -> str:
    """email_once, crashed after running only (no recovery crashes), expecting ``outcome`` there."""
    expect: dict[str, object] = {"after_running": {"outcome": {"call_1": outcome}}}
    if default is not None:
        expect["default"] = dict(default)
    return email_once(edits=edits, recovery_crashes=False, cover=list(cover), **keys, expect=expect)


def test_ids_are_point_ids_and_a_passing_matrix_passes(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", **{"scenarios/email": scenario("side_effect_uncertain")})
    result = run_inprocess(
        pytester,
        "scenarios",
        "--no-power-loss",
        "--no-double-resume",
        "--no-tool-side-faults",
        "-v",
        "-p",
        "no:cacheprovider",
    )
    result.stdout.fnmatch_lines(["*email.yaml::clean PASSED*", "*email.yaml::after_running?call_1? PASSED*"])
    result.assert_outcomes(passed=2)


def test_a_failed_case_is_explained_without_a_traceback_and_with_a_repro_command(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".yaml", **{"scenarios/email": scenario("replayed")})
    result = run_inprocess(
        pytester,
        "scenarios",
        "--no-power-loss",
        "--no-double-resume",
        "--no-tool-side-faults",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*email.yaml::after_running?call_1? FAILED (agent reference, 2 lives)",
            '*ledger?call_1?: ?"approved", "running", "unknown"?*',
            '*MISMATCH outcome?call_1?: expected "replayed", observed "side_effect_uncertain"*',
            "  rerun: crashmatrix run scenarios/email.yaml --crash 'after_running?call_1?'",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert "harness/" not in result.stdout.str()  # no frames from our own code


def test_a_broken_scenario_is_a_one_line_collection_error_for_that_file_only(
    pytester: pytest.Pytester,
) -> None:
    broken = scenario("side_effect_uncertain", edits=[("turns:", "turnz:")])
    pytester.makefile(
        ".yaml", **{"scenarios/broken": broken, "scenarios/good": scenario("side_effect_uncertain")}
    )
    result = run_inprocess(
        pytester,
        "scenarios",
        "--no-power-loss",
        "--no-double-resume",
        "--no-tool-side-faults",
        "-p",
        "no:cacheprovider",
    )
    result.stdout.fnmatch_lines(["*broken.yaml:3:1: turnz: unknown key 'turnz'; allowed keys: *"])
    # The broken file is an error for that file only: the good one still ran, the run fails.
    result.assert_outcomes(passed=2, errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "Traceback" not in result.stdout.str()


def test_a_covered_boundary_the_clean_run_never_reaches_fails_collection_loudly(
    pytester: pytest.Pytester,
) -> None:
    never = scenario(
        "side_effect_uncertain", cover=["after_running", "after_approved"], approvals={"send_email": "no"}
    )
    pytester.makefile(".yaml", **{"scenarios/never": never})
    result = run_inprocess(
        pytester,
        "scenarios",
        "--no-power-loss",
        "--no-double-resume",
        "--no-tool-side-faults",
        "-p",
        "no:cacheprovider",
    )
    result.stdout.fnmatch_lines(["*never.yaml:*: cover: 'after_running' is never reached by the clean run*"])
    result.assert_outcomes(errors=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED


BLACK_BOX = Path(__file__).resolve().parents[3] / "examples" / "blackbox_agent"


def _black_box_run(pytester: pytest.Pytester, *, extra: str = "") -> pytest.RunResult:
    """The black-box example's own scenario (plus ``extra`` YAML) against it, no power column
    and no depth-2 crashes."""
    text = (BLACK_BOX / "scenario.yaml").read_text(encoding="utf-8") + extra
    pytester.makefile(".yaml", **{"scenarios/order": text})
    return run_inprocess(
        pytester,
        "scenarios",
        "--no-power-loss",
        "--no-double-resume",
        "--no-tool-side-faults",
        "-p",
        "no:cacheprovider",
        "--no-recovery-crashes",
        f"--agent={BLACK_BOX / 'adapter.yaml'}",
    )


def test_points_a_black_box_agent_cannot_reach_are_shown_not_reachable_with_why_never_passed(
    pytester: pytest.Pytester,
) -> None:
    result = _black_box_run(pytester)
    assert result.ret == 0
    # A black box cannot be stopped between its own ledger steps: those columns have no case,
    # and show "not reachable" with why (issue 15: they showed "not reached", like a point
    # that simply never happened), in the results file and in matrix.md.
    report = pytester.path / "reports" / "latest"
    results = load_results(report / "matrix.json")
    assert results.reachable is not None and "after_approved" not in results.reachable
    row = build_matrix(results).rows[0]
    for column in ("after_approved", "before_tool_result", "after_tool_result"):
        assert row.cell(column).state == "not_reachable", column
    assert row.cell("after_running").state == "pass"
    markdown = (report / "matrix.md").read_text(encoding="utf-8")
    table = next(line for line in markdown.splitlines() if line.startswith("| order |"))
    assert table.count("🚫 not reachable") >= 3 and "✅" in table
    assert (
        "not reachable at **call pending** (`after_tool_call_pending`), **call saved** "
        "(`after_tool_call_saved`), **approved** (`after_approved`), "
        "**during effect** (`during_side_effect`), **before result** (`before_tool_result`), "
        "**after result** (`after_tool_result`) in order: kind 3 black box: the harness crashes it only "
        "at its model and service edges" in markdown
    )


def test_a_recorded_point_outside_the_adapters_boundaries_is_skipped_as_not_reachable(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".yaml", **{"scenarios/email": scenario("side_effect_uncertain")})
    pytester.makepyfile(
        limited_adapter="""
from crashmatrix.harness.agents.reference import ReferenceAdapter

class Limited(ReferenceAdapter):
    name = "limited"
    boundaries = ("after_tool_call_saved", "after_side_effect")
"""
    )
    pytester.syspathinsert()  # a subprocess run would find it in its working directory
    result = run_inprocess(
        pytester,
        "scenarios",
        "--no-power-loss",
        "--no-double-resume",
        "--no-tool-side-faults",
        "-rs",
        "-p",
        "no:cacheprovider",
        "--agent=limited_adapter:Limited",
    )
    result.stdout.fnmatch_lines(
        ["*SKIPPED*not reachable: agent limited_adapter:Limited cannot be killed at after_running*"]
    )
    result.assert_outcomes(passed=1, skipped=1)  # clean ran; after_running (covered) cannot be reached
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    assert {c.point: c.status for c in results.cases} == {
        "clean": "passed",
        "after_running[call_1]": "not_reachable",  # not "not_reached": it was never tried
    }


def test_the_clean_item_is_the_judged_enumeration_run_and_still_fails_when_it_is_wrong(
    pytester: pytest.Pytester,
) -> None:
    # Collection runs the clean case to enumerate the points; the clean item reports that
    # run (no second clean life) and is judged like any other case.
    wrong = scenario("side_effect_uncertain", default={"world": {"emails": 2}})
    pytester.makefile(".yaml", **{"scenarios/email": wrong})
    result = run_inprocess(
        pytester,
        "scenarios",
        "--no-power-loss",
        "--no-double-resume",
        "--no-tool-side-faults",
        "-p",
        "no:cacheprovider",
        "--keep-cases",
        "cases",
        "-k",
        "clean",
    )
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(
        ["*email.yaml::clean FAILED*", "*MISMATCH world.emails: expected 2, observed 1"]
    )
    (clean,) = load_results(pytester.path / "reports" / "latest" / "matrix.json").cases
    assert Path(clean.case_dir).name == "enumerate" and clean.lives == 1
    assert sorted(p.name for p in (pytester.path / "cases").glob("*/*/*")) == ["enumerate"]


@pytest.mark.parametrize("mutant", ["no_fsync", "fsync_before_write"])
def test_the_power_column_of_pytest_scenarios_catches_an_agent_whose_lines_are_not_durable(
    pytester: pytest.Pytester, mutant: str
) -> None:
    # Issue 19: these passed the CI suite; only `crashmatrix mutants` ran power losses. Every
    # process crash still passes (the page cache keeps the lines): the power@ items fail.
    pytester.makefile(
        ".yaml", **{"scenarios/email": scenario("side_effect_uncertain", cover=("after_side_effect",))}
    )
    agent = f"--agent=crashmatrix.reference_agent.mutants:{mutant}"
    result = run_inprocess(
        pytester, "scenarios", "-v", "-p", "no:cacheprovider", "--no-tool-side-faults", agent
    )
    result.stdout.fnmatch_lines(
        [
            "*email.yaml::after_side_effect?call_1? PASSED*",
            "*email.yaml::power@after_side_effect?call_1? FAILED*",
            "*invariant non_idempotent_at_most_once*",
        ]
    )
    result.assert_outcomes(passed=2, failed=1)
    without = run_inprocess(
        pytester,
        "scenarios",
        "--no-power-loss",
        "--no-double-resume",
        "--no-tool-side-faults",
        "-p",
        "no:cacheprovider",
        agent,
    )
    without.assert_outcomes(passed=2)


def test_a_covered_boundary_the_agent_cannot_reach_is_not_reachable_not_a_collection_error(
    pytester: pytest.Pytester,
) -> None:
    # compound_two_appends covers after_approved; a black box cannot be killed there. That
    # is a gap of the agent (a "not reachable" cell with why), not a broken scenario.
    result = _black_box_run(pytester, extra="\ncover: [after_approved, after_running]\n")
    result.assert_outcomes(passed=2)  # clean and after_running; nothing errors
    row = build_matrix(load_results(pytester.path / "reports" / "latest" / "matrix.json")).rows[0]
    assert row.cell("after_approved").state == "not_reachable"
