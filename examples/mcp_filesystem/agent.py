"""notes-clerk: a plain agent that keeps a person's notes through a real MCP filesystem server,
written the way the `mcp` SDK's and the openai client's docs show it, with no framework.

* Its tools are the server's (``write_file``, ``edit_file``, ... of
  ``@modelcontextprotocol/server-filesystem``): a ``ClientSession`` over ``stdio_client``, the
  server's command line in ``MCP_SERVER_COMMAND`` (split with shlex), their JSON Schemas handed
  to the model as OpenAI tools. In production that is ``npx -y
  @modelcontextprotocol/server-filesystem ~/notes``; under crashmatrix it is crashmatrix's relay
  in proxy mode, which starts that same server and passes every call on (``adapter.yaml``).
* The model is the openai package's default client (``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``).
* Its conversation is a JSONL file (``NOTES_CLERK_SESSION``, default ``.notes_clerk/session.jsonl``):
  one OpenAI chat message a line, each fsynced; a torn last line (a process killed mid-write)
  is dropped when it is read back, so a restarted process continues the conversation.
* A tool call a previous process left without a result is never run again: the edit may have
  happened before the process died, so the model is told it is uncertain.
* What it tells the model: the server's text; ``ERROR: ...`` for a tool's error;
  ``UNCERTAIN: ...`` when it cannot know whether the tool acted (``results:`` in the adapter).

Its planted bug (``fixed.py`` is the same agent without it): a call whose server went away
before answering (the connection closed) is retried once on a fresh server. The server may
have died after it edited the file: ``edit_file`` applied twice adds the line twice.
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

SESSION = Path(os.environ.get("NOTES_CLERK_SESSION", ".notes_clerk/session.jsonl"))
SYSTEM = "You keep the user's notes in files. Use the tools to change them."
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
            try:
                return await self.server.call(name, arguments)
            except ServerGone:
                # BUG (planted): the server went away, so connect again and try once more. It
                # may have died after acting: the edit is applied twice.
                await self.server.reopen()
                return await self.server.call(name, arguments)
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
