"""What the OpenAI Agents SDK adapter judges an agent by, found on the agent its factory built
at load: the suite tools it really has (a missing one is not applicable), whether it asks for
approvals (the team's own ``needs_approval``, or a factory that says so; never forced), and
the vocabulary its results are read in (the SDK's, so outcome / code are not applicable)."""

from __future__ import annotations

import asyncio
import sys
import types
from pathlib import Path

import pytest

pytest.importorskip("agents")

from crashmatrix.harness.agents.frameworks import openai_agents as oa
from crashmatrix.harness.agents.loading import load_adapter
from crashmatrix.harness.core.contracts import default_contract
from crashmatrix.harness.plan.applicability import not_applicable

SUITE = Path(__file__).resolve().parents[4] / "scenarios"


@pytest.fixture
def team(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    from agents import Agent, SQLiteSession, function_tool

    def session(ctx: oa.AgentsContext) -> SQLiteSession:
        return SQLiteSession(ctx.session_id, ctx.db_path)

    def everything(ctx: oa.AgentsContext) -> object:
        return Agent(name="a", model=ctx.model, tools=list(ctx.tools)), session(ctx)

    def mail_only(ctx: oa.AgentsContext) -> object:
        tools = {tool.name: tool for tool in ctx.tools}
        return Agent(name="a", model=ctx.model, tools=[tools["send_email"]]), session(ctx)

    def declared(ctx: oa.AgentsContext) -> object:
        ctx.asks_for_approval()
        return everything(ctx)

    @function_tool(needs_approval=True)
    def wire_money(amount: int) -> str:
        """Wire money."""
        return "ok"

    def own_asks(ctx: oa.AgentsContext) -> object:
        return Agent(name="a", model=ctx.model, tools=[*ctx.tools, wire_money]), session(ctx)

    module = types.ModuleType("crashmatrix_oa_capabilities")
    for factory in (everything, mail_only, declared, own_asks):
        setattr(module, factory.__name__, factory)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def _adapter(factory: str) -> oa.OpenAIAgentsAdapter:
    adapter = load_adapter(f"openai-agents:crashmatrix_oa_capabilities:{factory}")
    assert isinstance(adapter, oa.OpenAIAgentsAdapter)
    return adapter


def test_its_results_are_read_in_the_sdks_vocabulary_not_crashmatrixs(team: types.ModuleType) -> None:
    # verdict._VOCABULARY judges outcome / code / ledger only for results named "crashmatrix".
    assert _adapter("everything").dialect.results.name == "openai-agents"


def test_the_load_check_gives_the_factory_every_suite_tool(team: types.ModuleType) -> None:
    """``tools["send_email"]`` at load finds the tool (it was a KeyError with no tools), and
    the suite tools the built agent lacks are not applicable."""
    tools = _adapter("mail_only").capabilities.tools
    assert tools.has("send_email")
    assert not tools.has("read_file") and not tools.has("create_order")
    assert _adapter("everything").capabilities.tools.has("refund_payment")  # a scenario's own mock: tool


def test_an_agent_that_never_asks_has_the_approval_scenarios_not_applicable(team: types.ModuleType) -> None:
    from crashmatrix.harness.input.scenario import load_scenario

    adapter = _adapter("everything")
    assert adapter.capabilities.approvals is False
    assert "after_approved" not in adapter.boundaries
    assert adapter.unreachable["after_tool_call_saved"] == oa.WHY_NO_APPROVAL
    scenario = load_scenario(SUITE / "approvals" / "send_email_rejected.yaml")
    assert any("approval" in why for why in not_applicable(scenario, adapter.capabilities))


@pytest.mark.parametrize("factory", ["declared", "own_asks"])
def test_an_agent_that_asks_has_the_approval_moments(team: types.ModuleType, factory: str) -> None:
    adapter = _adapter(factory)
    assert adapter.capabilities.approvals is True
    assert {"after_approved", "after_tool_call_saved"} <= set(adapter.boundaries)


def test_the_scenarios_approvals_ask_only_where_the_factory_declared() -> None:
    """``ctx.tools``' needs_approval asks nothing unless the factory said its agent asks."""
    declared = [False]
    tool = oa._function_tool(default_contract("send_email"), lambda *a: {}, lambda: declared[0])

    def needs() -> bool:
        return bool(asyncio.run(tool.needs_approval(None, {"to": "a"}, "call_1")))

    assert needs() is False
    declared[0] = True
    assert needs() is True
