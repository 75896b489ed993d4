"""support-desk: a plain agent whose tools live on an MCP server, written the way the `mcp`
SDK's and the openai client's docs show it, with no framework.

* Its tools come from one MCP server: ``ClientSession`` over ``stdio_client`` (the server's
  command line in ``MCP_SERVER_COMMAND``, split with shlex), or over ``streamable_http_client``
  when ``MCP_SERVER_URL`` is set. Their JSON Schemas are handed to the model as OpenAI tools.
* The model is the openai package's default client (``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``).
* Its conversation is a JSONL file (``SUPPORT_DESK_SESSION``, default
  ``.support_desk/session.jsonl``): one OpenAI chat message a line, each fsynced, read back at
  start (a torn last line, from a process killed mid-write, is dropped), so a restarted
  process continues the conversation.
* The user's turns come on stdin after a ``> `` prompt.

It has the two recovery bugs a first version of such an agent has (``fixed.py`` is the same
agent with both fixed):

* on restart, a message whose tool calls have no results is finished by running those calls
  again, although the process may have died after the server acted: an email sent before the
  crash is sent a second time;
* a call that fails because the server went away (the connection broke) is retried once on a
  fresh connection: the server may have died after acting, so a non-idempotent call acts twice.

Nothing here knows crashmatrix: ``adapter.yaml`` hands it crashmatrix's MCP server through
``MCP_SERVER_COMMAND``, as a team points the agent at its own server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from openai import OpenAI

SESSION = Path(os.environ.get("SUPPORT_DESK_SESSION", ".support_desk/session.jsonl"))
MODEL = os.environ.get("SUPPORT_DESK_MODEL", "gpt-4o-mini")
SYSTEM = "You are a support assistant. Use the tools to do what the customer asks."


class ServerGone(Exception):
    """The MCP server went away during a call (its process died, the connection broke)."""


# -- the conversation, one JSON message a line ----------------------------------------------------


def load() -> list[dict[str, Any]]:
    if not SESSION.exists():
        return []
    data = SESSION.read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1]:
        # The last line has no newline: the process died while writing it. Set it aside so
        # the next append does not glue onto half a line.
        SESSION.write_bytes(data[: len(data) - len(lines[-1])])
        lines = lines[:-1]
    return [json.loads(line) for line in lines if line.strip()]


def append(message: dict[str, Any]) -> None:
    SESSION.parent.mkdir(parents=True, exist_ok=True)
    new = not SESSION.exists()
    with open(SESSION, "a", encoding="utf-8") as file:
        file.write(json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n")
        file.flush()
        os.fsync(file.fileno())
    if new:  # the file's name is durable only once its directory is synced
        folder = os.open(SESSION.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def pending_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool calls of the last assistant message that have no result yet."""
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    for message in reversed(messages):
        if message.get("role") == "assistant":
            return [c for c in message.get("tool_calls") or [] if c["id"] not in answered]
        if message.get("role") == "user":
            return []
    return []


# -- the MCP server -------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def connect() -> AsyncIterator[ClientSession]:
    """One connection to the configured MCP server, initialized."""
    url = os.environ.get("MCP_SERVER_URL")
    if url:
        transport: Any = streamable_http_client(url)
    else:
        command = shlex.split(os.environ["MCP_SERVER_COMMAND"])
        transport = stdio_client(StdioServerParameters(command=command[0], args=command[1:]))
    async with transport as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


class Tools:
    """The server's tools, as OpenAI tools, and calls to them (on a fresh connection when
    the old one broke)."""

    def __init__(self) -> None:
        self.stack = contextlib.AsyncExitStack()
        self.session: ClientSession | None = None
        self.listed: dict[str, dict[str, Any]] = {}

    async def open(self) -> None:
        self.session = await self.stack.enter_async_context(connect())
        listed = await self.session.list_tools()
        self.listed = {tool.name: tool.model_dump(by_alias=True, exclude_none=True) for tool in listed.tools}

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.stack.aclose()
        self.stack = contextlib.AsyncExitStack()
        self.session = None

    async def reopen(self) -> None:
        await self.close()
        await self.open()

    def openai_tools(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": tool["name"],
                    "description": tool.get("description", ""),
                    "parameters": tool.get("inputSchema") or {"type": "object", "properties": {}},
                },
            }
            for tool in self.listed.values()
        ]

    async def call(self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None) -> str:
        """The tool's result as the text the model reads; ``ServerGone`` when the server
        went away before it answered."""
        if self.session is None:
            await self.open()
        assert self.session is not None
        try:
            result = await self.session.call_tool(name, arguments, meta=meta)
        except Exception as error:
            if server_gone(error):
                raise ServerGone(f"{name}: {error}") from error
            raise
        return text_of(result.model_dump(by_alias=True, exclude_none=True))


# The mcp SDK's error code for a request whose connection closed before its answer (the
# server process died, the stream ended): ``CONNECTION_CLOSED`` in mcp.types.
CONNECTION_CLOSED = -32000


def server_gone(error: BaseException) -> bool:
    """Whether a call failed because the connection did (not the tool): the SDK's
    connection-closed error, or a broken socket or HTTP transport under it."""
    seen, todo = [], [error]
    while todo:
        current = todo.pop()
        seen.append(current)
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]
        todo += list(getattr(current, "exceptions", ()))
    for current in seen:
        code = getattr(current, "code", None)
        if code is None:  # mcp 1.x keeps it on .error
            code = getattr(getattr(current, "error", None), "code", None)
        if code == CONNECTION_CLOSED or isinstance(current, (OSError, httpx.TransportError)):
            return True
    return False


def text_of(result: dict[str, Any]) -> str:
    """A CallToolResult as the text the model reads: its text content (an ``isError``
    result said as an error)."""
    texts = [item.get("text", "") for item in result.get("content", []) if item.get("type") == "text"]
    text = "\n".join(texts) if texts else json.dumps(result.get("structuredContent", {}))
    if result.get("isError"):
        return text if text.lstrip().startswith("{") else json.dumps({"ok": False, "error": text})
    return text


def failed(name: str, error: BaseException) -> str:
    return json.dumps({"ok": False, "error": f"{name} failed: {type(error).__name__}: {error}"[:500]})


# -- the agent ------------------------------------------------------------------------------------


class Agent:
    def __init__(self, tools: Tools) -> None:
        self.tools = tools
        self.client = OpenAI()
        self.messages = load()

    def say(self, message: dict[str, Any]) -> None:
        append(message)
        self.messages.append(message)

    async def recover(self) -> None:
        """Finish what a previous process left: the calls of its last reply, then its answer
        (a user message or a tool result last: the model is asked for the rest)."""
        calls = pending_calls(self.messages)
        for call in calls:
            await self.run_call(call)
        if self.messages and self.messages[-1].get("role") in ("user", "tool"):
            await self.loop()

    async def run_call(self, call: dict[str, Any]) -> None:
        name, arguments = call["function"]["name"], json.loads(call["function"]["arguments"] or "{}")
        content = await self.execute(call["id"], name, arguments)
        self.say({"role": "tool", "tool_call_id": call["id"], "content": content})

    async def execute(self, call_id: str, name: str, arguments: dict[str, Any]) -> str:
        try:
            try:
                return await self.tools.call(name, arguments)
            except ServerGone:
                # The server went away: connect again and try once more.
                await self.tools.reopen()
                return await self.tools.call(name, arguments)
        except Exception as error:  # the model hears of a failed tool, the agent goes on
            return failed(name, error)

    async def loop(self) -> None:
        """Ask the model until it answers without tool calls."""
        while True:
            reply = (
                self.client.chat.completions.create(
                    model=MODEL,
                    messages=[{"role": "system", "content": SYSTEM}, *self.messages],
                    tools=self.tools.openai_tools(),
                )
                .choices[0]
                .message
            )
            message: dict[str, Any] = {"role": "assistant", "content": reply.content}
            if reply.tool_calls:
                message["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.function.name, "arguments": c.function.arguments},
                    }
                    for c in reply.tool_calls
                ]
            self.say(message)
            if not reply.tool_calls:
                print(reply.content, flush=True)
                return
            for call in message["tool_calls"]:
                await self.run_call(call)

    async def turn(self, text: str) -> None:
        self.say({"role": "user", "content": text})
        await self.loop()


async def main(agent_class: type[Agent] = Agent) -> None:
    tools = Tools()
    await tools.open()
    try:
        agent = agent_class(tools)
        await agent.recover()
        while True:
            sys.stdout.write("> ")
            sys.stdout.flush()
            line = sys.stdin.readline()
            if not line:
                return
            await agent.turn(line.rstrip("\n"))
    finally:
        await tools.close()


if __name__ == "__main__":
    asyncio.run(main())
