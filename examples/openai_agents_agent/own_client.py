"""The agent of ``agent.py`` on a model of its own: a model name, so the SDK's default client
(``AsyncOpenAI()`` from ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``) sends its requests. crashmatrix
points those at its scripted model before the factory runs, and sets the SDK's default API to
Chat Completions (the API that model serves):
``--agent=openai-agents:examples.openai_agents_agent.own_client:build``."""

from __future__ import annotations

from typing import Any

from agents import Agent, SQLiteSession

from crashmatrix.harness.agents.frameworks.openai_agents import AgentsContext

INSTRUCTIONS = "You are a helpful assistant. Use the tools to do what the user asks."


def build(ctx: AgentsContext) -> tuple[Agent[Any], SQLiteSession]:
    agent: Agent[Any] = Agent(
        name="assistant", instructions=INSTRUCTIONS, model="gpt-4o-mini", tools=list(ctx.tools)
    )
    return agent, SQLiteSession(ctx.session_id, ctx.db_path)
