"""The reference agent behind the harness's adapter interface (no special path for it)."""

from __future__ import annotations

import sys
from collections.abc import Mapping

from crashmatrix.harness.agents.protocol import LifeContext
from crashmatrix.harness.agents.tool_faults import mock_toolbox
from crashmatrix.harness.core.boundaries import BOUNDARIES
from crashmatrix.harness.core.capabilities import NATIVE_CAPABILITIES
from crashmatrix.harness.core.dialect import NATIVE
from crashmatrix.harness.core.trace import CaseRun
from crashmatrix.harness.observation.observation import Observation
from crashmatrix.harness.observation.reading import read_observation
from crashmatrix.reference_agent.agent import Agent
from crashmatrix.reference_agent.approval import ScriptedApprover
from crashmatrix.reference_agent.lease import SessionLeased
from crashmatrix.reference_agent.model import ModelSettings, OpenAIChatModel, make_openai_client

__all__ = ["ReferenceAdapter"]


class ReferenceAdapter:
    name = "reference"
    boundaries = tuple(b for b in BOUNDARIES if b != "after_tool_call_pending")
    # Said in the matrix where the column is "not reachable".
    unreachable: Mapping[str, str] = {
        "after_tool_call_pending": (
            "the reference agent saves a model reply in one append (the assistant message): "
            "nothing holds the reply before the conversation shows it"
        )
    }
    keeps_ledger = True
    dialect = NATIVE  # the suite's own tool names and Tool Result shape
    capabilities = NATIVE_CAPABILITIES  # every tool, run by the harness
    tears_writes = True  # appends through ctx.before_append: the injector can tear a line
    # In the life's process, each session line through ctx.before_append: two lives resuming
    # one session at once are held at their first step and told apart (double@P).
    double_resume = True
    # One thread, its tools in process: a clean life paused at a boundary leaves what a kill
    # there leaves, so first crashes come from its snapshots (harness.lives.snapshots).
    snapshots = True
    # Its lives reach the model only through the harness's client (``ctx.http``: sync, TLS
    # context built once, body posted as is): the fork server prepares no client of the
    # agent's own (``harness.lives.warm_agent``).
    own_http_client = False
    agent_class: type[Agent] = Agent

    def build(self, ctx: LifeContext) -> Agent:
        settings = ModelSettings(ctx.model_base_url, "scripted", "crashmatrix-scripted", max_retries=0)
        client = make_openai_client(settings, ctx.http)
        return self.agent_class(
            session_path=ctx.session_path,
            session_id=ctx.session_id,
            model=OpenAIChatModel(client, settings.model),
            # Every call reaches the tool side, where a tool-side column's fault acts (issue 32).
            toolbox=mock_toolbox(ctx),
            contracts=ctx.scenario.contracts,
            approver=ScriptedApprover(dict(ctx.approvals), dict(ctx.approvals_again)),
            hook=ctx.hook,
            before_append=ctx.before_append,
        )

    def observe(self, run: CaseRun) -> Observation:
        return read_observation(run)

    def run_life(self, ctx: LifeContext) -> None:
        try:
            agent = self.build(ctx)
        except SessionLeased as leased:
            # Another life is resuming this session (a double resume): this one stops
            # before it reads or writes anything and ends normally (reference_agent/lease.py).
            print(leased, file=sys.stderr, flush=True)
            return
        try:
            agent.resume()
            for text in ctx.scenario.turns[agent.turns_started() :]:
                agent.run_turn(text)
        finally:
            agent.close()
