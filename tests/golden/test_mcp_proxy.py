"""An agent whose tools are a team's real MCP server, tested through crashmatrix's relay in
proxy mode (issue 28): the calls pass the relay's edges and tool-side faults, the effects are
the real server's own (files in the case workspace, counted under ``effects:``).

The false red it pins: the real server (a child of the relay) outlived its killed agent for
the moment it took to notice its closed stdin, so every crash of a correct agent was red
(``no_effect_after_death``: "node ... mcp-server-filesystem was still running when its life
ended"). The server now dies with the relay (``mcp_upstream._tied``), the relay with the agent.

``mcp_proxy/agent.py`` is correct: a call left without a result, or whose server went away
before answering, is told uncertain and never run again. It is green in every case: each
agent crash point and each tool-side column stdio can reach. Its twin
(``MCP_PROXY_BUG=blind_retry``) retries the call on a fresh server: red in the
``tool_server_died`` column only, for the note appended twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.front.cases import enumerate_points, run_point, run_tool_fault
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.plan.enumeration import tool_side_unreachable
from crashmatrix.harness.verdict.result import CaseResult

from ..launchers import warm_launcher

pytestmark = pytest.mark.slow

# Seconds a case may take: each life starts three interpreters (the agent, the relay, the
# server) importing the mcp SDK; on a machine loaded to 20 the default 30 s ran out.
DEADLINE = 180.0

HERE = Path(__file__).resolve().parent / "mcp_proxy"
SCENARIO = load_scenario(HERE / "scenario.yaml")


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    # The server pytest --agent starts: the mcp SDK and the relay preloaded, so each life's
    # relay forks warm from it instead of starting an interpreter (issue 31).
    yield warm_launcher(HERE / "adapter.yaml", HERE / "adapter-twin.yaml")


def _matrix(
    adapter: str, launcher: LifeLauncher, work: Path, *, points: bool = True
) -> dict[str, CaseResult]:
    """The cases ``crashmatrix run`` runs: clean, each crash point (``points``), each
    tool-side column stdio can reach."""
    agent = str(HERE / adapter)
    enum = enumerate_points(SCENARIO, launcher, work / "clean", agent=agent, deadline=DEADLINE)
    cases = {"clean": enum.clean_case()}
    for point in enum.points if points else ():
        cases[point.id] = run_point(
            SCENARIO, point, launcher, work / point.id, agent=agent, deadline=DEADLINE
        )
    cannot = tool_side_unreachable(agent, "mcp", "stdio")
    for point in enum.tool_side:
        if point.boundary not in cannot:
            cases[point.id] = run_tool_fault(
                SCENARIO, point, launcher, work / point.id, agent=agent, deadline=DEADLINE
            )
    return cases


def _why(cases: dict[str, CaseResult]) -> str:
    """What failed, in the verdicts' own words: the assertion's message."""
    return "; ".join(
        f"{name} ({case.verdict.status}): {[v.message for v in case.verdict.violations]} "
        f"{case.verdict.problems}"
        for name, case in cases.items()
        if not case.passed
    )


def _failed(cases: dict[str, CaseResult]) -> dict[str, set[str]]:
    return {
        name: {v.invariant for v in case.verdict.violations} | {m.field for m in case.verdict.mismatches}
        for name, case in cases.items()
        if not case.passed
    }


def test_a_correct_agent_on_a_real_mcp_server_is_green_at_every_crash_and_tool_side_fault(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    cases = _matrix("adapter.yaml", launcher, tmp_path)
    assert {
        "after_model_reply[call_note]",
        "after_running[call_note]",
        "after_side_effect[call_note]",
        "tool_server_died[call_note]",
        "tool_result_error[call_note]",
        "tool_result_malformed[call_note]",
    } <= set(cases)
    assert "tool_response_lost[call_note]" not in cases  # stdio: not reachable, with why
    assert _failed(cases) == {}, _why(cases)
    # Each case's note is the real server's file: the line once (or not at all where nothing ran).
    for name, case in cases.items():
        note = case.case_dir / "world" / "workspace" / "todo.txt"
        text = note.read_text() if note.exists() else ""
        assert text in ("", "call Ana\n"), name


def test_its_twin_that_retries_on_a_fresh_server_is_red_only_where_the_server_died(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    cases = _matrix("adapter-twin.yaml", launcher, tmp_path, points=False)
    assert _failed(cases) == {"tool_server_died[call_note]": {"non_idempotent_at_most_once"}}, _why(cases)
    died = cases["tool_server_died[call_note]"].case_dir / "world" / "workspace" / "todo.txt"
    assert died.read_text() == "call Ana\ncall Ana\n"
