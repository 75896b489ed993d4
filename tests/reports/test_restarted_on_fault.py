"""A tool-side case whose agent died on the fault and recovered when restarted (issue 32) is
green, and every report lists it apart with its note: the terminal summary, matrix.md, the
HTML page (the case's notes), so a team that requires surviving a tool failure in one life
finds each one."""

from __future__ import annotations

import dataclasses

from crashmatrix.reports.html import render_html
from crashmatrix.reports.markdown import render_markdown
from crashmatrix.reports.matrix import build_matrix
from crashmatrix.reports.results import CaseRecord, Results
from crashmatrix.reports.terminal import render_terminal

NOTE = (
    "life 1 died: on the tool-side fault tool_server_died[call_mail], restarted as a supervisor "
    "would: agent desk exited with 1: http.client.RemoteDisconnected: Remote end closed"
)


def _tool_side(results: Results, status: str, notes: tuple[str, ...], call: str = "call_mail") -> Results:
    clean = next(c for c in results.cases if c.point == "clean" and c.status == "passed")
    case: CaseRecord = dataclasses.replace(
        clean,
        node_id=f"{clean.scenario_path}::tool_server_died[{call}]",
        point=f"tool_server_died[{call}]",
        boundary="tool_server_died",
        status=status,
        lives=2,
        notes=notes,
    )
    return dataclasses.replace(results, cases=(*results.cases, case))


def test_a_pass_after_dying_on_the_fault_is_listed_apart_with_its_note(results: Results) -> None:
    matrix = build_matrix(_tool_side(results, "passed", ("tool_server_died: judged by the invariants", NOTE)))
    ((case, note),) = matrix.restarted_on_fault()
    assert (case.point, note) == ("tool_server_died[call_mail]", NOTE)
    lines = render_terminal(matrix)
    at = lines.index(
        "passed after dying on a tool-side fault (1): restarted, the agent recovered "
        "(each case's note in matrix.html)"
    )
    assert lines[at + 1] == "  ✓ send_once.yaml::tool_server_died[call_mail]"
    text = render_markdown(matrix)
    assert "### Passed after dying on a tool-side fault (1)" in text
    assert f"- `send_once.yaml::tool_server_died[call_mail]`: {NOTE}" in text
    assert NOTE in render_html(_tool_side(results, "passed", (NOTE,)), matrix)


def test_a_pass_without_a_death_and_a_failure_after_one_are_not_listed(results: Results) -> None:
    plain = build_matrix(_tool_side(results, "passed", ("tool_server_died: judged by the invariants",)))
    assert plain.restarted_on_fault() == ()
    assert not any("dying on a tool-side fault" in line for line in render_terminal(plain))
    assert "dying on a tool-side fault" not in render_markdown(plain)
    # Red after a death on the fault is a failure like any other (its problems say so).
    failed = build_matrix(_tool_side(results, "failed", (NOTE,)))
    assert failed.restarted_on_fault() == ()
    # An unplanned death of another kind is no death on the fault.
    other = build_matrix(_tool_side(results, "passed", ("life 1 died: unplanned death (SIGKILL) after x",)))
    assert other.restarted_on_fault() == ()


def test_the_terminal_lists_at_most_max_failures_of_them(results: Results) -> None:
    many = results
    for index in range(4):
        many = _tool_side(many, "passed", (NOTE,), call=f"call_{index}")
    lines = render_terminal(build_matrix(many), max_failures=2)
    at = next(i for i, line in enumerate(lines) if line.startswith("passed after dying"))
    assert lines[at + 1 : at + 4] == [
        "  ✓ send_once.yaml::tool_server_died[call_0]",
        "  ✓ send_once.yaml::tool_server_died[call_1]",
        "  ... and 2 more (see matrix.md)",
    ]
