"""An OpenAI Agents SDK agent written the SDK's default way: an ``Agent`` with function tools
and a ``SQLiteSession``, continued after a restart by ``Runner.run(agent, [], session=...)``.

crashmatrix runs it with ``--agent=openai-agents:examples.openai_agents_agent.agent:build``
(from the repository's root). It sends an email twice when it is killed after the email went
out and before the SDK saved the step (docs/frameworks.md, "OpenAI Agents SDK"); ``fixed.py``
is the same agent with a ledger its tools consult.
"""

from __future__ import annotations

from typing import Any

from agents import Agent, SQLiteSession

from crashmatrix.harness.agents.frameworks.openai_agents import AgentsContext

INSTRUCTIONS = "You are a helpful assistant. Use the tools to do what the user asks."


def build(ctx: AgentsContext) -> tuple[Agent[Any], SQLiteSession]:
    agent: Agent[Any] = Agent(
        name="assistant", instructions=INSTRUCTIONS, model=ctx.model, tools=list(ctx.tools)
    )
    return agent, SQLiteSession(ctx.session_id, ctx.db_path)
