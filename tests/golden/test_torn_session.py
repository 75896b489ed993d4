"""Golden: an agent's own session torn by a crash (issue 26, part G).

``torn_session/agent.py`` keeps a seed 000 session of its own and an outbox (``effects:``),
and cuts a torn last line off when it starts. Run as a team would (``pytest scenarios
--agent torn_session/adapter.yaml``) on ``torn_session/scenario.yaml``, whose cases tear its
session at each of its appends:

* the correct agent is green in every torn_write cell (the torn line was cut, acted);
* its twin glues its next line to the torn half. Its session is then unreadable: each torn
  case is red with "the agent left its session unreadable: FILE:LINE ..." and by
  ``torn_fragments_accounted`` (the fragment glued onto the next record), in matrix.json,
  its world still judged -- never a traceback, a case missing from the report, or a message
  to repair a file in a case directory the harness made (``crashmatrix run`` aborted so).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crashmatrix.reports.results import Results, load_results

from ..pytest_runs import run_inprocess

pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent / "torn_session"
TORN = [f"torn_write[call_mail:{label}]" for label in ("approved", "running", "succeeded", "tool_result")]


def _run(pytester: pytest.Pytester, adapter: Path) -> tuple[pytest.RunResult, Results]:
    (pytester.path / "scenarios").mkdir()
    shutil.copy(HERE / "scenario.yaml", pytester.path / "scenarios" / "torn_session.yaml")
    result = run_inprocess(
        pytester, "scenarios", f"--agent={adapter}", "--no-power-loss", "-p", "no:cacheprovider"
    )
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    return result, results


def test_an_agent_that_cuts_its_torn_line_is_green_in_every_torn_cell(pytester: pytest.Pytester) -> None:
    result, results = _run(pytester, HERE / "adapter.yaml")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert {case.point: case.status for case in results.cases} == {
        "clean": "passed",
        **dict.fromkeys(TORN, "passed"),
    }
    for case in results.cases[1:]:
        assert any(
            note.startswith("torn_write: cut the last line of session.jsonl") for note in case.notes
        ), case
        # Where the half line went: the next life cut it (the supervisor's cut is the tear).
        (fate,) = [note for note in case.notes if note.startswith("torn fragment: ")]
        assert (
            f"life 1's {case.point}" in fate
            and ": dropped: cut from world/workspace/.mailer/session.jsonl" in fate
        )
        assert case.observed is not None and case.observed["world"]["emails"] == 1


def test_an_agent_that_glues_to_its_torn_line_is_red_with_where_its_session_broke(
    pytester: pytest.Pytester,
) -> None:
    result, results = _run(pytester, HERE / "adapter-twin.yaml")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "Traceback" not in out and "SessionCorruption" not in out and "repair" not in out, out
    statuses = {case.point: case.status for case in results.cases}
    assert statuses["clean"] == "passed" and set(statuses) == {"clean", *TORN}, statuses
    for case in results.cases[1:]:
        assert case.status in ("failed", "error"), case
        first = case.problems[0]
        assert first.startswith("the agent left its session unreadable: .mailer/session.jsonl:"), first
        assert "(byte " in first and "repair" not in first
        # Its ledger cannot be judged, and says so (never passed on what could not be read).
        assert any(
            entry.startswith("executions_closed: the agent's session cannot be read")
            for entry in case.not_applicable
        )
        # The invariant says why: its next line was appended onto the torn half.
        glued = [v["message"] for v in case.violations if v["invariant"] == "torn_fragments_accounted"]
        assert glued and "runs on into other bytes" in glued[0], case.violations
        # The rest of the case is still judged: the world says the email went once.
        assert case.observed is not None and case.observed["world"]["emails"] == 1, case
    result.stdout.fnmatch_lines(
        ["crashmatrix: 1/5 cases passed, 1 scenarios, agent *adapter-twin.yaml (4 failed*"]
    )
