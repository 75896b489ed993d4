"""``crashmatrix doctor`` on an agent whose tools are on crashmatrix's MCP server (``tools: mcp``):
each tool-side column is proven to act on it, or named blind or n.a. with why; and a proxy-mode
agent (its own MCP server's tools, none of the suite's) is doctored on the scenario beside its
adapter instead of refused.

The tool-side columns reach such an agent only through its own configuration (the server it
starts or connects to): an agent that talks to a server of its own passes every tool-side case
as "not reached" in silence. The fast tests hold the plan (``tool_side_plan``: which columns,
on which call, and why not); the slow one proves the columns on the reference agent over MCP
and catches the plain mcp-SDK agent pointed at a server of its own.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.agents.loading import fork_preload, load_adapter
from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.errors import InputError
from crashmatrix.harness.front import doctor
from crashmatrix.harness.front.doctor import tool_side_plan
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.plan.enumeration import TOOL_SIDE_COLUMNS
from crashmatrix.harness.verdict.coverage import BLIND, FIRES, NOT_APPLICABLE, Proof

ROOT = Path(__file__).resolve().parents[3]
PLAIN = ROOT / "examples" / "mcp_plain"
SCENARIO = ROOT / "scenarios" / "send_email" / "send_once.yaml"


def _reached(*calls: str, attributed: bool = True) -> list[dict[str, Any]]:
    """A clean run's trace as the MCP server writes it: one ``mcp_call`` event per request."""
    return [
        {"event": "mcp_call", "call": call, "tool": "send_email", "life": 1, "attributed": attributed}
        for call in calls
    ]


def _plan(adapter: str, trace: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (p.boundary, p.id) if isinstance(p, CrashPoint) else (p.subject.split()[2], f"{p.state}: {p.detail}")
        for p in tool_side_plan(load_adapter(adapter), trace)
    ]


def test_each_tool_side_column_of_an_mcp_agent_is_proven_on_its_first_call_that_reached_the_server() -> None:
    plan = _plan(str(PLAIN / "adapter_http.yaml"), _reached("call_mail", "call_order", "call_mail"))
    assert plan == [(kind, f"{kind}[call_mail]") for kind in TOOL_SIDE_COLUMNS]


def test_over_stdio_a_lost_response_is_not_applicable_with_why() -> None:
    plan = dict(_plan(str(PLAIN / "adapter.yaml"), _reached("call_mail")))
    lost = plan.pop("tool_response_lost")
    assert lost.startswith(f"{NOT_APPLICABLE}: stdio transport: a pipe does not lose"), lost
    assert plan == {kind: f"{kind}[call_mail]" for kind in plan}


@pytest.mark.parametrize("trace", [[], _reached("call_?", attributed=False)], ids=["none", "unattributed"])
def test_an_mcp_agent_whose_calls_never_reached_crashmatrixs_server_is_blind_in_every_column(
    trace: list[dict[str, Any]],
) -> None:
    plan = _plan(str(PLAIN / "adapter_http.yaml"), trace)
    assert [kind for kind, _ in plan] == list(TOOL_SIDE_COLUMNS)
    for _, why in plan:
        assert why.startswith(f"{BLIND}: no call of the clean case reached crashmatrix's MCP server"), why
        assert "{mcp_command}" in why
    assert ("attributed to none" in plan[0][1]) == bool(trace)


def test_an_agent_whose_tool_side_is_the_harnesss_own_code_has_no_tool_side_proof() -> None:
    # The mock tools (the reference agent) and a team's own functions: nothing of the agent's
    # configuration stands between its calls and the harness's faults.
    assert tool_side_plan(load_adapter("reference"), _reached("call_mail")) == []
    assert tool_side_plan(load_adapter(str(ROOT / "examples" / "desk_agent" / "adapter.yaml")), []) == []


def test_a_proxy_agent_with_none_of_the_suites_tools_is_doctored_on_the_scenario_beside_its_adapter(
    tmp_path: Path,
) -> None:
    example = ROOT / "examples" / "mcp_filesystem"
    adapter = load_adapter(str(example / "adapter.yaml"))
    assert doctor.beside_adapter(adapter) == [example / "scenario.yaml"]  # not the adapters beside it
    assert doctor.doctor_scenario(adapter).path == example / "scenario.yaml"
    # Without one, the one line says where it looked and what to do.
    shutil.copytree(example / "contracts", tmp_path / "contracts")
    shutil.copy(example / "adapter.yaml", tmp_path / "adapter.yaml")
    alone = load_adapter(str(tmp_path / "adapter.yaml"))
    with pytest.raises(InputError, match="nor does one beside its adapter file; give one with --scenario"):
        doctor.doctor_scenario(alone)


# -- slow: real MCP agents -------------------------------------------------------------------

# A server of the team's own: it answers send_email and sends nothing anywhere crashmatrix sees.
OWN_SERVER = """\
from mcp.server.mcpserver import MCPServer

server = MCPServer("own")


@server.tool()
def send_email(to: str, subject: str, body: str) -> str:
    return f"Email sent to {to}."


server.run()
"""

OWN_ADAPTER = f"""\
name: support-desk-own-server
description: examples/mcp_plain/agent.py pointed at an MCP server of its own, not crashmatrix's.
command: ["{{python}}", "-u", "{PLAIN}/agent.py"]
tools: mcp
env: {{MCP_SERVER_COMMAND: "{{python}} {{here}}/own_server.py"}}
input: {{prompt: "> "}}
session: {{path: .support_desk/session.jsonl, keeps_ledger: false}}
"""


def _tool_side_proofs(agent: str, base: Path) -> list[Proof]:
    """The doctor's tool-side proofs on ``agent``'s clean case of send_once (and nothing else
    of the doctor: the rest costs cases this test does not need)."""
    adapter = load_adapter(agent)
    launcher = LifeLauncher("fork", preload=fork_preload(agent), warm=(agent,))
    cases = doctor._Cases(agent, adapter, launcher, base, deadline=120.0, explicit=True)
    case = cases.case(load_scenario(SCENARIO))
    assert isinstance(case, doctor._Case), case
    return doctor._tool_side_proofs(case, cases)


@pytest.mark.slow
def test_the_tool_side_columns_act_on_an_mcp_agent_and_are_blind_on_one_that_uses_its_own_server(
    tmp_path: Path,
) -> None:
    pytest.importorskip("mcp")
    proven = _tool_side_proofs(str(ROOT / "examples" / "reference_mcp" / "adapter.yaml"), tmp_path / "ref")
    assert [(p.subject, p.state) for p in proven] == [
        ("tool-side column tool_server_died[call_mail] acts", FIRES),
        ("tool-side column tool_response_lost acts", NOT_APPLICABLE),
        ("tool-side column tool_result_error[call_mail] acts", FIRES),
        ("tool-side column tool_result_malformed[call_mail] acts", FIRES),
    ], proven
    (tmp_path / "own_server.py").write_text(OWN_SERVER, encoding="utf-8")
    (tmp_path / "adapter.yaml").write_text(OWN_ADAPTER, encoding="utf-8")
    blind = _tool_side_proofs(str(tmp_path / "adapter.yaml"), tmp_path / "own")
    assert [p.state for p in blind] == [BLIND, NOT_APPLICABLE, BLIND, BLIND], blind
    assert "does the agent start the server the adapter gives it" in blind[0].detail
