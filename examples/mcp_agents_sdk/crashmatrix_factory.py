"""crashmatrix's way into the team's agent (support_agent.py, and fixed.py, unchanged): the
agent on its configured MCP server, and the session its app runs it with. ``adapter.yaml``
names ``crashmatrix_factory:build``, ``adapter_fixed.yaml`` ``crashmatrix_factory:build_fixed``;
both point the team's own ``MCP_SERVER_COMMAND`` at crashmatrix's MCP server (``env:``).

The server is built, not connected: the driver connects an agent's MCP servers at the start
of each life and cleans them up at its end, as the app's ``async with`` does."""

import fixed
import support_agent
from agents import SQLiteSession


def build(ctx):  # type: ignore[no-untyped-def]
    agent = support_agent.build_agent(support_agent.configured_server())
    return agent, SQLiteSession("customer-42", "conversations.db")


def build_fixed(ctx):  # type: ignore[no-untyped-def]
    agent = fixed.build_agent(fixed.configured_server())
    return agent, SQLiteSession("customer-42", "conversations.db")
