"""crashmatrix's way into the team's agent (support_agent.py, unchanged): the agent and the
session its app runs it with. ``adapter.yaml`` names this ``factory: crashmatrix_factory:build``."""

import support_agent
from agents import SQLiteSession


def build(ctx):  # type: ignore[no-untyped-def]
    return support_agent.agent, SQLiteSession("customer-42", "conversations.db")
