"""A ``cover:`` entry the reference agent's clean run never passes is refused at collection,
as a one-line error for that file (fast: the clean run is replaced by the points it would
have passed, so no program starts; the real run is in test_plugin.py)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.front import collection

from ...pytest_runs import run_inprocess
from ...scenario_data import email_once

pytest_plugins = ["pytester"]


def _clean_run_passes(monkeypatch: pytest.MonkeyPatch, *points: CrashPoint) -> None:
    def enumerate_points(*args: Any, **kwargs: Any) -> SimpleNamespace:
        return SimpleNamespace(points=points)  # the refusal needs nothing else of the run

    monkeypatch.setattr(collection, "enumerate_points", enumerate_points)


def test_a_covered_boundary_never_passed_is_one_line_naming_the_entry_and_what_was_reached(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clean_run_passes(
        monkeypatch, CrashPoint("after_approved", "call_1"), CrashPoint("after_running", "call_1")
    )
    pytester.makefile(
        ".yaml", **{"scenarios/never": email_once(cover=["after_running", "after_side_effect"])}
    )
    result = run_inprocess(pytester, "scenarios", "--no-doctor", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        [
            "*never.yaml:*: cover: 'after_side_effect' is never reached by the clean run "
            "(it reached after_approved, after_running); fix the scenario or the agent"
        ]
    )
    result.assert_outcomes(errors=1)
    assert "Traceback" not in result.stdout.str()


def test_a_covered_point_id_never_passed_is_refused_too(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _clean_run_passes(monkeypatch, CrashPoint("after_running", "call_1"))
    pytester.makefile(".yaml", **{"scenarios/never": email_once(cover=["after_running[call_1#2]"])})
    result = run_inprocess(pytester, "scenarios", "--no-doctor", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*cover: 'after_running[[]call_1#2[]]' is never reached by the clean run*"])
    result.assert_outcomes(errors=1)
