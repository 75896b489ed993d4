"""A support agent written the way the OpenAI Agents SDK's MCP docs show it: its tools come from
an MCP server (``MCPServerStdio`` on the server's command line, or ``MCPServerStreamableHttp``
on its URL), an ``Agent`` on a model name (the SDK's default client, ``AsyncOpenAI()`` from
``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``) with ``mcp_servers=[server]``, and a
``SQLiteSession`` the app continues a conversation from.

The server is configured the usual way: ``MCP_SERVER_URL`` (streamable HTTP) or
``MCP_SERVER_COMMAND`` (a command line, split with shlex, spawned over stdio). As the docs
suggest for a flaky network, failed MCP calls are retried (``max_retry_attempts``).

Nothing here knows crashmatrix: ``crashmatrix_factory.py`` hands this agent, its server and its
session to the harness. ``fixed.py`` is the same agent made crash-safe.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from typing import Any

from agents import Agent, Runner, SQLiteSession
from agents.mcp import MCPServer, MCPServerStdio, MCPServerStreamableHttp

INSTRUCTIONS = "You are a support assistant. Use the tools to do what the customer asks."
# What the docs' examples set: the tool list does not change while the agent runs, and a
# call that fails on the wire is tried again.
SERVER_OPTIONS: dict[str, Any] = {
    "name": "support tools",
    "cache_tools_list": True,
    "client_session_timeout_seconds": 30,
    "max_retry_attempts": 2,
}


def stdio_server(command: str, **options: Any) -> MCPServerStdio:
    argv = shlex.split(command)
    return MCPServerStdio(params={"command": argv[0], "args": argv[1:]}, **{**SERVER_OPTIONS, **options})


def http_server(url: str, **options: Any) -> MCPServerStreamableHttp:
    return MCPServerStreamableHttp(params={"url": url}, **{**SERVER_OPTIONS, **options})


def configured_server() -> MCPServer:
    url = os.environ.get("MCP_SERVER_URL")
    return http_server(url) if url else stdio_server(os.environ["MCP_SERVER_COMMAND"])


def build_agent(server: MCPServer) -> Agent:
    return Agent(name="Support", instructions=INSTRUCTIONS, model="gpt-4o-mini", mcp_servers=[server])


async def main() -> None:
    async with configured_server() as server:
        agent = build_agent(server)
        session = SQLiteSession("customer-42", "conversations.db")
        while True:
            result = await Runner.run(agent, input("> "), session=session)
            print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
