"""outbox-mcp: an assistant whose tools live on an MCP server it starts itself (a golden test
agent for the tool-side columns, issue 28).

It knows nothing about crashmatrix. As a team writes one: the ``mcp`` SDK's ``stdio_client``
and ``ClientSession`` start the server its configuration names ($OUTBOX_MCP_SERVER, a command
line), or reach it over streamable HTTP ($OUTBOX_MCP_URL); the model (the openai package) is
offered the server's tools, and each tool call is a ``tools/call``. Its conversation is one
JSONL file ($OUTBOX_CONVERSATION), a line per chat message, fsynced.

What it does when the tool side fails it -- the server dies mid-call, its answer cannot be
read, or it answers ``isError`` -- is the point of it:

* an ``isError`` result: the model is told the tool failed (``TOOL_ERROR``), as the server said;
* no readable answer for a read-only tool: it starts the server again and reads once more;
* no readable answer for anything else: the server may have done it, so the model is told
  the outcome is unknown (``SIDE_EFFECT_UNCERTAIN``); it is not sent again.

``OUTBOX_BUG`` (the twins the tests run), each a first version of such an agent:

* ``resend``: a broken connection is retried on a fresh server (a second email);
* ``assume_sent``: a broken connection is taken for success ("the server must have done it");
* ``ignore_is_error``: the result's text is passed on as a success, ``isError`` or not;
* ``two_results``: the failure is recorded as the call's Tool Result, then the call is retried
  on a fresh server and its answer recorded too (two Tool Results for one call, as OpenHands
  wrote two observations for one tool_call_id after a sandbox restart).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from contextlib import AsyncExitStack, suppress
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from openai import OpenAI

BUG = os.environ.get("OUTBOX_BUG", "")


def save(path: Path, message: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(message, separators=(",", ":")) + "\n")
        out.flush()
        os.fsync(out.fileno())


def history(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class Tools:
    """The MCP server: started on demand, started again after it broke."""

    def __init__(self, command: list[str], url: str = "") -> None:
        self.command = command
        self.url = url
        self.listed: dict[str, Any] = {}
        self.stack: AsyncExitStack | None = None
        self.session: ClientSession | None = None

    async def start(self) -> None:
        self.stack = AsyncExitStack()
        if self.url:
            read, write, *_ = await self.stack.enter_async_context(streamable_http_client(self.url))
        else:
            server = StdioServerParameters(command=self.command[0], args=self.command[1:])
            read, write = await self.stack.enter_async_context(stdio_client(server))
        self.session = await self.stack.enter_async_context(ClientSession(read, write))
        await self.session.initialize()
        self.listed = {tool.name: tool for tool in (await self.session.list_tools()).tools}

    async def close(self) -> None:
        stack, self.stack, self.session = self.stack, None, None
        if stack is not None:
            with suppress(BaseException):  # a dead server's pipes do not close cleanly
                await stack.aclose()

    def read_only(self, name: str) -> bool:
        annotations = getattr(self.listed.get(name), "annotations", None)
        return bool(getattr(annotations, "read_only_hint", getattr(annotations, "readOnlyHint", False)))

    async def send(self, name: str, arguments: dict[str, Any]) -> Any:
        if self.session is None:
            await self.start()
        assert self.session is not None
        return await asyncio.wait_for(self.session.call_tool(name, arguments), timeout=60)

    def functions(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description or "",
                    "parameters": getattr(tool, "input_schema", None) or tool.inputSchema,
                },
            }
            for tool in self.listed.values()
        ]


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def told(result: Any) -> dict[str, Any]:
    """What the model reads of a result the server sent."""
    failed = bool(getattr(result, "is_error", getattr(result, "isError", False)))
    if BUG == "ignore_is_error":
        return {"ok": True, "content": text_of(result)}
    if failed:
        return {"ok": False, "code": "TOOL_ERROR", "content": f"the tool failed: {text_of(result)}"}
    try:
        parsed = json.loads(text_of(result))
    except ValueError:
        return {"ok": True, "content": text_of(result)}
    return parsed if isinstance(parsed, dict) else {"ok": True, "content": text_of(result)}


class Outbox:
    def __init__(self, conversation: Path, tools: Tools, client: OpenAI, model: str) -> None:
        self.conversation = conversation
        self.tools = tools
        self.client = client
        self.model = model

    def answer(self, call_id: str, content: dict[str, Any]) -> None:
        save(self.conversation, {"role": "tool", "tool_call_id": call_id, "content": json.dumps(content)})

    async def run(self, call: dict[str, Any]) -> None:
        name = call["function"]["name"]
        arguments = json.loads(call["function"]["arguments"] or "{}")
        try:
            self.answer(call["id"], told(await self.tools.send(name, arguments)))
            return
        except (KeyboardInterrupt, SystemExit, asyncio.CancelledError):
            raise
        except BaseException as error:  # the server died, or its answer is unreadable
            broken = f"{type(error).__name__}: {error}"
        await self.tools.close()
        if BUG == "assume_sent":
            self.answer(call["id"], {"ok": True, "content": f"{name} done (the server went away: {broken})"})
        elif BUG in ("resend", "two_results") or self.tools.read_only(name):
            if BUG == "two_results":
                self.answer(call["id"], {"ok": False, "code": "TOOL_ERROR", "content": broken})
            try:
                self.answer(call["id"], told(await self.tools.send(name, arguments)))
            except (KeyboardInterrupt, SystemExit, asyncio.CancelledError):
                raise
            except BaseException as again:
                await self.tools.close()
                self.answer(call["id"], {"ok": False, "code": "TOOL_ERROR", "content": str(again)})
        else:
            self.answer(
                call["id"],
                {
                    "ok": False,
                    "code": "SIDE_EFFECT_UNCERTAIN",
                    "content": f"{name}: no answer from the server ({broken}); it may have happened",
                },
            )

    async def turn(self) -> None:
        while True:
            reply = (
                self.client.chat.completions.create(
                    model=self.model,
                    messages=history(self.conversation),  # type: ignore[arg-type]
                    tools=self.tools.functions(),  # type: ignore[arg-type]
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
            save(self.conversation, message)
            if not calls:
                print(reply.content, flush=True)
                return
            for call in calls:
                await self.run(call)


async def main() -> None:
    conversation = Path(os.environ.get("OUTBOX_CONVERSATION", ".outbox/conversation.jsonl"))
    tools = Tools(shlex.split(os.environ.get("OUTBOX_MCP_SERVER", "")), os.environ.get("OUTBOX_MCP_URL", ""))
    await tools.start()
    outbox = Outbox(conversation, tools, OpenAI(max_retries=0), os.environ.get("OUTBOX_MODEL", "gpt-4o-mini"))
    try:
        loop = asyncio.get_running_loop()
        while True:
            print("> ", end="", flush=True)
            try:
                text = await loop.run_in_executor(None, input)
            except EOFError:
                return
            if text.strip():
                save(conversation, {"role": "user", "content": text})
                await outbox.turn()
    finally:
        await tools.close()


if __name__ == "__main__":
    asyncio.run(main())
