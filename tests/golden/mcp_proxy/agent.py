"""A small kind-3 agent whose tools are on a real MCP server it spawns over stdio (its
command in ``MCP_SERVER_COMMAND``): a plain ``mcp`` ``ClientSession`` and the openai client,
its conversation one JSON message a line. A call a previous process left without a result is
never run again: the model is told it is uncertain. A call whose server went away before
answering is uncertain too, and the server is started again for the next call.

The twin (``MCP_PROXY_BUG=blind_retry``) retries that call on the fresh server instead: a
server that died after acting acts twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from openai import OpenAI

SESSION = Path(os.environ.get("GOLDEN_SESSION", ".golden/session.jsonl"))
BUG = os.environ.get("MCP_PROXY_BUG", "")
SYSTEM = "Use the tools to do what the user asks."
# The mcp SDK's code for a request whose connection closed before its answer.
CONNECTION_CLOSED = -32000


class ServerGone(Exception):
    """The MCP server went away before it answered (its process died, the pipe closed)."""


def load() -> list[dict[str, Any]]:
    if not SESSION.exists():
        return []
    data = SESSION.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    if complete != data:  # a torn last line: set aside, so the next append starts clean
        SESSION.write_bytes(complete)
    return [json.loads(line) for line in complete.split(b"\n") if line.strip()]


def append(message: dict[str, Any]) -> None:
    SESSION.parent.mkdir(parents=True, exist_ok=True)
    new = not SESSION.exists()
    with open(SESSION, "a", encoding="utf-8") as file:
        file.write(json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n")
        file.flush()
        os.fsync(file.fileno())
    if new:  # the file's name is durable once its directory is synced
        folder = os.open(SESSION.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def server_gone(error: BaseException) -> bool:
    """Whether the call failed because the connection did, not the tool."""
    todo, seen = [error], []
    while todo:
        current = todo.pop()
        seen.append(current)
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]
        todo += list(getattr(current, "exceptions", ()))
    for current in seen:
        code = getattr(current, "code", None)
        if code is None:  # mcp 1.x keeps it on .error
            code = getattr(getattr(current, "error", None), "code", None)
        if code == CONNECTION_CLOSED or isinstance(current, OSError):
            return True
    return False


def uncertain(name: str, why: str) -> str:
    return f"UNCERTAIN: {name} may or may not have happened ({why}); it was not run again. Check the file."


class Server:
    """The MCP server: its tools as OpenAI tools, and calls to them."""

    def __init__(self) -> None:
        self.stack = contextlib.AsyncExitStack()
        self.session: ClientSession | None = None
        self.tools: list[dict[str, Any]] = []

    async def open(self) -> None:
        command = shlex.split(os.environ["MCP_SERVER_COMMAND"])
        params = StdioServerParameters(command=command[0], args=command[1:])
        read, write = await self.stack.enter_async_context(stdio_client(params))
        self.session = await self.stack.enter_async_context(ClientSession(read, write))
        await self.session.initialize()
        listed = await self.session.list_tools()
        self.tools = [tool.model_dump(by_alias=True, exclude_none=True) for tool in listed.tools]

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.stack.aclose()
        self.stack, self.session = contextlib.AsyncExitStack(), None

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
            for tool in self.tools
        ]

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        """The tool's answer as the model reads it; ``ServerGone`` when there was none."""
        if self.session is None:
            await self.open()
        assert self.session is not None
        try:
            result = await self.session.call_tool(name, arguments)
        except Exception as error:
            if server_gone(error):
                raise ServerGone(f"{name}: {error}") from error
            raise
        # As a dict by its wire names: the SDK's attribute names differ between mcp 1.x and 2.x.
        answer = result.model_dump(by_alias=True, exclude_none=True)
        text = "\n".join(
            item.get("text", "") for item in answer.get("content", []) if item.get("type") == "text"
        )
        return f"ERROR: {text}" if answer.get("isError") else text


class Agent:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.client = OpenAI()
        self.messages = load()

    def say(self, message: dict[str, Any]) -> None:
        append(message)
        self.messages.append(message)

    async def recover(self) -> None:
        """A previous process's last reply: its calls without a result are answered as
        uncertain (never run again), then the model is asked for the rest."""
        answered = {m.get("tool_call_id") for m in self.messages if m.get("role") == "tool"}
        last = next((m for m in reversed(self.messages) if m.get("role") in ("assistant", "user")), None)
        if last is not None and last.get("role") == "assistant":
            for call in last.get("tool_calls") or []:
                if call["id"] not in answered:
                    name = call["function"]["name"]
                    content = uncertain(name, "the agent stopped while it ran")
                    self.say({"role": "tool", "tool_call_id": call["id"], "content": content})
        if self.messages and self.messages[-1].get("role") in ("user", "tool"):
            await self.loop()

    async def execute(self, name: str, arguments: dict[str, Any]) -> str:
        try:
            return await self.server.call(name, arguments)
        except ServerGone:
            await self.server.reopen()
            if BUG == "blind_retry":
                try:
                    return await self.server.call(name, arguments)
                except Exception as error:
                    return uncertain(name, f"no readable answer twice: {type(error).__name__}")
            return uncertain(name, "the MCP server went away before it answered")
        except Exception as error:  # no answer it can read: the tool may have acted
            return uncertain(name, f"no readable answer: {type(error).__name__}")

    async def loop(self) -> None:
        """Ask the model until it answers without tool calls."""
        while True:
            reply = (
                self.client.chat.completions.create(
                    model="gpt-4o-mini",
                    messages=[{"role": "system", "content": SYSTEM}, *self.messages],
                    tools=self.server.openai_tools(),
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
                arguments = json.loads(call["function"]["arguments"] or "{}")
                content = await self.execute(call["function"]["name"], arguments)
                self.say({"role": "tool", "tool_call_id": call["id"], "content": content})


async def main(agent_class: type[Agent] = Agent) -> None:
    server = Server()
    await server.open()
    try:
        agent = agent_class(server)
        await agent.recover()
        while True:
            sys.stdout.write("> ")
            sys.stdout.flush()
            line = sys.stdin.readline()
            if not line:
                return
            agent.say({"role": "user", "content": line.rstrip("\n")})
            await agent.loop()
    finally:
        await server.close()


if __name__ == "__main__":
    asyncio.run(main())
