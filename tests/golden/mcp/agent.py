"""desk-mcp: an assistant whose tools are on an MCP server (a golden test agent, issue 28).

It knows nothing about crashmatrix. It is written as a team writes an MCP agent: the official
``mcp`` client (``stdio_client`` + ``ClientSession``) starts the server named by its
configuration ($DESK_MCP_SERVER, a command line; or connects to $DESK_MCP_URL, streamable
HTTP) and lists its tools; the model (the openai
package, its default client) is offered those tools, and each tool call is an MCP
``tools/call``. It keeps one JSONL file: its conversation, one chat message a line, each
fsynced before it goes on; the assistant's tool calls are saved before any of them runs.

Recovery, for a saved tool call with no Tool Result, goes by what the server says of the tool:

* read-only (``readOnlyHint``): called again;
* it takes an ``idempotency_key`` (every call sends ``desk-mcp:<call id>``): called again
  with the same key, which the server deduplicates;
* anything else may have acted: the model is told the outcome is unknown
  (``SIDE_EFFECT_UNCERTAIN``), never that it did not happen, and it is not called again.

A call the server fails (``isError``) or that fails on the way (the server died, a result the
client cannot read) is told as it is: an error for ``isError`` (nothing may have happened, the
model decides), unknown for a lost answer of a tool that may have acted. The agent restarts
its server after a broken connection, as MCP clients do.

``DESK_MCP_BUG=blind_resend`` (the twin the tests run): recovery calls every unanswered tool
again, and a send interrupted after it went out goes out twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from openai import OpenAI

BUG = os.environ.get("DESK_MCP_BUG", "")
KEY = "idempotency_key"


def append_line(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        file.flush()
        os.fsync(file.fileno())


def read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n")[:-1] if line.strip()]


def drop_torn_tail(path: Path) -> None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as file:
            file.truncate(data.rfind(b"\n") + 1)
            file.flush()
            os.fsync(file.fileno())


def field(model: Any, name: str) -> Any:
    """A field of an SDK model under its 2.x name (snake case) or its 1.x one (camel case)."""
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name)
    return getattr(model, snake, getattr(model, name, None))


def uncertain(name: str, why: str) -> dict[str, Any]:
    return {
        "ok": False,
        "status": "unknown",
        "recovery": "side_effect_uncertain",
        "code": "SIDE_EFFECT_UNCERTAIN",
        "content": f"{name}: {why}; it may or may not have happened, so it is not repeated",
    }


class Server:
    """The MCP server, (re)started on demand: a broken connection is a server to start again."""

    def __init__(self, command: list[str], url: str = "") -> None:
        self.command = command
        self.url = url
        self.tools: dict[str, Any] = {}
        self._stack: Any = None
        self.session: ClientSession | None = None

    async def start(self) -> None:
        from contextlib import AsyncExitStack

        self._stack = AsyncExitStack()
        if self.url:
            from mcp.client.streamable_http import streamable_http_client

            streams = await self._stack.enter_async_context(streamable_http_client(self.url))
            read, write = streams[0], streams[1]
        else:
            params = StdioServerParameters(command=self.command[0], args=self.command[1:])
            read, write = await self._stack.enter_async_context(stdio_client(params))
        self.session = await self._stack.enter_async_context(ClientSession(read, write))
        await self.session.initialize()
        self.tools = {tool.name: tool for tool in (await self.session.list_tools()).tools}

    async def stop(self) -> None:
        stack, self._stack, self.session = self._stack, None, None
        if stack is not None:
            # A dead server's streams fail to close: nothing is left to close.
            with contextlib.suppress(BaseException):
                await stack.aclose()

    def read_only(self, name: str) -> bool:
        tool = self.tools.get(name)
        return bool(tool and tool.annotations and field(tool.annotations, "readOnlyHint"))

    def keyed(self, name: str) -> bool:
        tool = self.tools.get(name)
        return bool(tool and KEY in (field(tool, "inputSchema").get("properties") or {}))

    async def call(self, call: dict[str, Any]) -> dict[str, Any]:
        name = call["function"]["name"]
        arguments = json.loads(call["function"]["arguments"] or "{}")
        if self.keyed(name):
            arguments[KEY] = f"desk-mcp:{call['id']}"
        if self.session is None:
            await self.start()
        assert self.session is not None
        try:
            result = await asyncio.wait_for(self.session.call_tool(name, arguments), timeout=60)
        except BaseException as error:  # the server died, or sent what the client cannot read
            if isinstance(error, (KeyboardInterrupt, SystemExit, asyncio.CancelledError)):
                raise
            await self.stop()
            if self.read_only(name):
                return {"ok": False, "code": "TOOL_ERROR", "content": f"{name}: the server failed ({error})"}
            return uncertain(name, f"the server's answer was lost ({type(error).__name__})")
        text = "".join(block.text for block in result.content if getattr(block, "type", "") == "text")
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = {"ok": not field(result, "isError"), "content": text}
        return parsed if isinstance(parsed, dict) else {"ok": not field(result, "isError"), "content": text}

    def openai_tools(self) -> list[dict[str, Any]]:
        """The server's tools as the model's functions (the key is the agent's to send)."""
        functions = []
        for tool in self.tools.values():
            schema = dict(field(tool, "inputSchema"))
            schema["properties"] = {k: v for k, v in (schema.get("properties") or {}).items() if k != KEY}
            functions.append(
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description or "",
                        "parameters": schema,
                    },
                }
            )
        return functions


class Agent:
    def __init__(self, conversation: Path, client: OpenAI, model: str, server: Server) -> None:
        self.conversation = conversation
        self.client = client
        self.model = model
        self.server = server

    def messages(self) -> list[dict[str, Any]]:
        return read_lines(self.conversation)

    def answer(self, call: dict[str, Any], result: dict[str, Any]) -> None:
        append_line(
            self.conversation, {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)}
        )

    async def recover_call(self, call: dict[str, Any]) -> None:
        name = call["function"]["name"]
        if BUG == "blind_resend" or self.server.read_only(name) or self.server.keyed(name):
            self.answer(call, await self.server.call(call))
            return
        self.answer(call, uncertain(name, "interrupted by a restart before its answer was saved"))

    async def recover(self) -> None:
        messages = self.messages()
        for index, message in enumerate(messages):
            for call in message.get("tool_calls") or ():
                answered = False
                for later in messages[index + 1 :]:
                    if later["role"] == "user" or call["id"] in [
                        c["id"] for c in later.get("tool_calls") or ()
                    ]:
                        break
                    answered = answered or (
                        later["role"] == "tool" and later.get("tool_call_id") == call["id"]
                    )
                if not answered:
                    await self.recover_call(call)
        messages = self.messages()
        if messages and (messages[-1]["role"] != "assistant" or messages[-1].get("tool_calls")):
            await self.loop()

    async def loop(self) -> None:
        while True:
            reply = (
                self.client.chat.completions.create(
                    model=self.model,
                    messages=self.messages(),  # type: ignore[arg-type]
                    tools=self.server.openai_tools(),  # type: ignore[arg-type]
                )
                .choices[0]
                .message
            )
            calls = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in reply.tool_calls or ()
            ]
            message: dict[str, Any] = {"role": "assistant", "content": reply.content or ""}
            if calls:
                message["tool_calls"] = calls
            append_line(self.conversation, message)
            if not calls:
                print(reply.content, flush=True)
                return
            for call in calls:
                self.answer(call, await self.server.call(call))


async def amain() -> None:
    conversation = Path(os.environ.get("DESK_MCP_CONVERSATION", ".desk/conversation.jsonl"))
    server = Server(shlex.split(os.environ.get("DESK_MCP_SERVER", "")), os.environ.get("DESK_MCP_URL", ""))
    await server.start()
    try:
        agent = Agent(
            conversation, OpenAI(max_retries=0), os.environ.get("DESK_MCP_MODEL", "gpt-4o-mini"), server
        )
        drop_torn_tail(conversation)
        await agent.recover()
        loop = asyncio.get_running_loop()
        while True:
            print("> ", end="", flush=True)
            try:
                text = await loop.run_in_executor(None, input)
            except EOFError:
                return  # no more turns
            if text.strip():
                append_line(conversation, {"role": "user", "content": text})
                await agent.loop()
    finally:
        await server.stop()


def main() -> None:
    asyncio.run(amain())


if __name__ == "__main__":
    main()
