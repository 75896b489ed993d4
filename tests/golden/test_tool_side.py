"""Golden: the tool-side columns on an agent that reaches its tools over MCP (issue 28).

``tool_side/agent.py`` (outbox-mcp) is a plain ``mcp``-SDK agent run as a black box with
``tools: mcp`` over stdio. It runs ``pytest send_once.yaml --agent tool_side/adapter.yaml`` as
a team would, the crash columns left out (``--crash-boundary`` naming the tool-side columns):

* the correct agent is green in every tool-side column it can be put to -- the server died
  after the send, an ``isError`` before it, an answer its SDK rejects -- and the lost response
  is not reachable over stdio, with why; over streamable HTTP it is a column too, and green;
* each twin is red in the column its bug shows, by the invariant that states the rule:
  a resend on a fresh server (a second email), success assumed when no answer came, an
  ``isError`` passed on as success, two Tool Results for one call (OpenHands' sandbox restart).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS
from crashmatrix.harness.input.suite import BUILTIN_SUITE
from crashmatrix.reports.html import render_html
from crashmatrix.reports.matrix import build_matrix
from crashmatrix.reports.results import Results, load_results
from crashmatrix.reports.terminal import render_terminal

from ..pytest_runs import run_inprocess

pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent / "tool_side"
SEND_ONCE = BUILTIN_SUITE / "send_email" / "send_once.yaml"
ONLY_TOOL_SIDE = [f"--crash-boundary={kind}" for kind in TOOL_SIDE_KINDS]


def _run(pytester: pytest.Pytester, adapter: str, *columns: str) -> Results:
    """pytest on send_once.yaml with ``adapter``: its tool-side columns (``columns``, else all)."""
    shutil.copy(SEND_ONCE, pytester.path / SEND_ONCE.name)
    only = [f"--crash-boundary={kind}" for kind in columns] if columns else ONLY_TOOL_SIDE
    result = run_inprocess(
        pytester,
        SEND_ONCE.name,
        f"--agent={HERE / adapter}",
        "-p",
        "no:cacheprovider",
        "--no-doctor",
        *only,
    )
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    assert results.cases, result.stdout.str()
    return results


def _cells(results: Results) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Each tool-side case: its status and the invariants it broke."""
    return {
        case.point: (case.status, tuple(sorted({v["invariant"] for v in case.violations})))
        for case in results.cases
        if case.boundary in TOOL_SIDE_KINDS
    }


def test_an_agent_that_tells_the_truth_when_its_mcp_server_fails_it_is_green_in_the_tool_side_columns(
    pytester: pytest.Pytester,
) -> None:
    results = _run(pytester, "adapter.yaml")
    assert _cells(results) == {
        "tool_server_died[call_mail]": ("passed", ()),
        "tool_result_error[call_mail]": ("passed", ()),
        "tool_result_malformed[call_mail]": ("passed", ()),
    }
    (lost,) = [gap for gap in results.not_run if gap.boundary == "tool_response_lost"]
    assert lost.state == "not_reachable" and "a pipe does not lose one message" in lost.why
    assert lost.points == ("call_mail",)
    # The judged cases were put to the fault: it acted, and the note says they are judged by
    # the invariants (a scenario's "one email" is a crash's expectation, not an isError's).
    error = next(c for c in results.cases if c.point == "tool_result_error[call_mail]")
    assert error.expected == {} and error.observed and error.observed["world"]["emails"] == 0
    assert error.observed["told"] == {"call_mail": "error"}
    died = next(c for c in results.cases if c.point == "tool_server_died[call_mail]")
    assert died.observed and died.observed["world"]["emails"] == 1
    assert died.observed["told"] == {"call_mail": "uncertain"}
    assert "crashmatrix run send_once.yaml --crash 'tool_server_died[call_mail]' --agent " in died.repro
    # The terminal draws the columns that ran and names why the lost response did not; the
    # HTML page has every column, the lost response's cell saying why.
    matrix = build_matrix(results)
    page = render_html(results, matrix)
    assert all(f'data-col="{kind}"' in page for kind in TOOL_SIDE_KINDS)
    assert matrix.rows[0].cell("tool_response_lost").state == "not_reachable"
    assert matrix.rows[0].cell("tool_server_died").state == "pass"
    lines = render_terminal(matrix)
    header = next(line for line in lines if line.startswith("scenario"))
    assert header.split()[-4:] == ["SD", "RE", "RM", "passed"]
    assert any(line.startswith("⊘ RL: stdio transport") for line in lines), lines


def test_over_http_the_lost_response_is_a_column_too_and_the_same_agent_is_green_in_all_four(
    pytester: pytest.Pytester,
) -> None:
    results = _run(pytester, "adapter_http.yaml")
    assert _cells(results) == {f"{kind}[call_mail]": ("passed", ()) for kind in TOOL_SIDE_KINDS}
    assert not [gap for gap in results.not_run if gap.boundary in TOOL_SIDE_KINDS]
    lost = next(c for c in results.cases if c.point == "tool_response_lost[call_mail]")
    assert lost.observed and lost.observed["world"]["emails"] == 1
    assert lost.observed["told"] == {"call_mail": "uncertain"}


@pytest.mark.parametrize(
    ("twin", "column", "broken"),
    [
        ("adapter_resend.yaml", "tool_server_died[call_mail]", ("non_idempotent_at_most_once",)),
        ("adapter_assume_sent.yaml", "tool_server_died[call_mail]", ("no_success_without_answer",)),
        (
            "adapter_ignore_is_error.yaml",
            "tool_result_error[call_mail]",
            ("no_success_without_answer", "told_the_truth"),
        ),
        (
            "adapter_two_results.yaml",
            "tool_server_died[call_mail]",
            ("non_idempotent_at_most_once", "one_tool_result_per_call", "told_the_truth"),
        ),
    ],
)
def test_each_twin_is_red_where_its_bug_shows_by_the_invariant_that_states_the_rule(
    pytester: pytest.Pytester, twin: str, column: str, broken: tuple[str, ...]
) -> None:
    cells = _cells(_run(pytester, twin, column.partition("[")[0]))  # that column alone: one case
    assert cells == {column: ("failed", broken)}, cells


def test_the_rerun_line_runs_that_one_case_and_a_column_that_cannot_act_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from crashmatrix.harness.front.cli import main

    twin = HERE / "adapter_assume_sent.yaml"
    keep = ["--keep", str(tmp_path)]
    code = main(
        ["run", str(SEND_ONCE), "--crash", "tool_server_died[call_mail]", "--agent", str(twin), *keep]
    )
    out = capsys.readouterr().out
    assert code == 1, out
    assert "send_once.yaml::tool_server_died[call_mail] ... failed" in out
    assert "INVARIANT no_success_without_answer: tool call 'call_mail'" in out
    assert "--crash 'tool_server_died[call_mail]'" in out  # its own rerun line
    code = main(
        [
            "run",
            str(SEND_ONCE),
            "--crash",
            "tool_response_lost[call_mail]",
            "--agent",
            str(HERE / "adapter.yaml"),
            *keep,
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "tool_response_lost cannot act on this agent: stdio transport" in err
