"""A run interrupted before any crash case reported still writes its report, marked
INCOMPLETE, with no case in it: never no report at all, which a CI job would read as "last
run's matrix" or nothing (fast: the interrupt lands before the scenario's clean run, so no
program starts)."""

from __future__ import annotations

import pytest

from crashmatrix.reports.results import load_results

from ...pytest_runs import run_inprocess
from ...scenario_data import email_once

pytest_plugins = ["pytester"]

# pytest.exit takes the path of a Ctrl-C through pytest (wrap_session: exit status
# INTERRUPTED, pytest_keyboard_interrupt), without pytester re-raising it in this process.
INTERRUPT_AT_COLLECTION = """
import pytest

def pytest_collectstart(collector):
    if collector.nodeid.endswith(".yaml"):  # before the scenario's clean run
        pytest.exit("interrupted")
"""


def test_an_interrupt_during_collection_writes_an_incomplete_report_with_no_case(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(INTERRUPT_AT_COLLECTION)
    pytester.makefile(".yaml", **{"scenarios/email": email_once()})
    result = run_inprocess(pytester, "scenarios", "--no-doctor", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    written = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    assert written.incomplete
    assert written.cases == ()
    result.stdout.fnmatch_lines(["*INCOMPLETE (interrupted): 0/0 cases passed*"])


def test_an_interrupted_run_without_scenarios_writes_no_report(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(INTERRUPT_AT_COLLECTION.replace('".yaml"', '".py"'))
    pytester.makepyfile(test_plain="def test_one(): pass")
    result = run_inprocess(pytester, "test_plain.py", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert not (pytester.path / "reports").exists()
