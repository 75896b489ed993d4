"""An OpenAI Agents SDK agent written the SDK's default way: an ``Agent`` with function tools
and a ``SQLiteSession``, continued after a restart by ``Runner.run(agent, [], session=...)``.

crashmatrix runs it with ``--agent=openai-agents:examples.openai_agents_agent.agent:build``
(from the repository's root). It sends an email twice when it is killed after the email went
out and before the SDK saved the step (docs/frameworks.md, "OpenAI Agents SDK"); ``fixed.py``
is the same agent with a ledger its tools consult.

Approvals are the SDK's human-in-the-loop: the factory says its agent asks
(``ctx.asks_for_approval()``), so ``ctx.tools`` carry ``needs_approval`` where the scenario
answers an approval (an agent that never asks has the approval scenarios not applicable),
``Runner.run`` stops with ``result.interruptions`` and the life
answers them on ``result.to_state()`` and runs again. ``build`` keeps that RunState in memory
only (the SDK docs' first example); ``build_durable`` is the same agent whose app keeps it
across restarts the SDK's way (``to_json`` / ``RunState.from_json``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents import Agent, SQLiteSession

from crashmatrix.harness.agents.frameworks.openai_agents import AgentsContext

INSTRUCTIONS = "You are a helpful assistant. Use the tools to do what the user asks."


def build(ctx: AgentsContext) -> tuple[Agent[Any], SQLiteSession]:
    ctx.asks_for_approval()
    agent: Agent[Any] = Agent(
        name="assistant", instructions=INSTRUCTIONS, model=ctx.model, tools=list(ctx.tools)
    )
    return agent, SQLiteSession(ctx.session_id, ctx.db_path)


def build_durable(ctx: AgentsContext) -> tuple[Agent[Any], SQLiteSession, Path]:
    """The same agent; a stop for approval and its answers are kept in ``ctx.run_state_path``
    (the life writes the SDK's ``RunState.to_json`` there and resumes from it)."""
    agent, session = build(ctx)
    return agent, session, ctx.run_state_path
