"""support_agent.py made crash-safe the way a careful team would, still the SDK's way: the same
``Agent`` on the same MCP server, the server given a ``tool_meta_resolver`` (the SDK's hook
for a request's ``_meta``) and a small ledger of its own around ``call_tool`` (``ledger.db``,
one row per call site, each write its own committed transaction).

The SDK saves a step's ``function_call`` with its output only after the step's tools ran, so a
process killed in between leaves no trace of the call: the restarted run asks the model
again, which asks for the same call again. The server's client, not the SDK, can tell it ran:

* a call site is ``<turn>:<call_id>`` (the turn counted in the run's input: providers reuse
  ids such as ``call_0`` in a later turn); the resolver sends it in ``_meta`` as the call's
  idempotency key, with the model's call id, so the server knows which call a request is;
* ``running`` is committed before the request goes out, ``done`` with the result after it;
* asked again for a site the ledger knows: ``done`` -> the result it got (the model never saw
  it; nothing runs again); ``running`` (a process killed in between) -> by what the server
  declared of the tool: one that takes an idempotency key (its schema has the property) is
  called again with the SAME key, and the server finds the first attempt instead of acting
  twice; a read-only or idempotent one (``readOnlyHint`` / ``idempotentHint``) is called
  again; any other (``send_email``) is never sent twice: the model is told it may have gone
  out (``SIDE_EFFECT_UNCERTAIN``);
* a keyed or repeatable tool answering that it cannot tell whether it acted (its own response
  was lost) is asked again under the same key, and answers what the first attempt did;
* the same rule when the server goes away mid-call (its process died, the connection broke):
  no blind retry of a tool that acts (``max_retry_attempts`` is 0 here), the server
  reconnected, a keyed or repeatable call sent again under its key, any other one uncertain.
"""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
from typing import Any

from agents import Agent
from agents.mcp import MCPServer, MCPServerStdio, MCPServerStreamableHttp
from agents.mcp.util import MCPToolMetaContext
from mcp.types import CallToolResult, TextContent
from support_agent import INSTRUCTIONS, SERVER_OPTIONS

LEDGER_DB = "ledger.db"


def ledger() -> sqlite3.Connection:
    db = sqlite3.connect(LEDGER_DB, isolation_level=None)  # autocommit: each write durable
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE IF NOT EXISTS calls (site TEXT PRIMARY KEY, status TEXT, result TEXT)")
    return db


def call_site(context: MCPToolMetaContext) -> dict[str, Any]:
    """The request's ``_meta``: the call site as its idempotency key, and the model's call id."""
    run = context.run_context
    call_id = str(getattr(run, "tool_call_id", ""))
    turn_input = getattr(run, "turn_input", None) or []
    turn = sum(1 for item in turn_input if isinstance(item, dict) and item.get("role") == "user")
    return {"idempotency_key": f"support:{turn}:{call_id}", "tool_call_id": call_id}


def uncertain(tool: str, why: str) -> CallToolResult:
    text = json.dumps(
        {
            "ok": False,
            "code": "SIDE_EFFECT_UNCERTAIN",
            "error": f"{tool} may or may not have happened ({why}); it was not run again. "
            "Check before asking for it again.",
        }
    )
    return CallToolResult(content=[TextContent(type="text", text=text)])


def _dumped(result: CallToolResult) -> str:
    return json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True))


def _said_uncertain(result: CallToolResult) -> bool:
    """Whether a tool's answer says it cannot tell whether it acted."""
    for item in result.content:
        try:
            data = json.loads(getattr(item, "text", "") or "")
        except ValueError:
            continue
        if isinstance(data, dict) and (
            data.get("code") == "SIDE_EFFECT_UNCERTAIN" or data.get("status") == "unknown"
        ):
            return True
    return False


class Ledgered:
    """Mixed into an SDK MCP server class: ``call_tool`` through the ledger."""

    async def call_tool(
        self, tool_name: str, arguments: dict[str, Any] | None, meta: dict[str, Any] | None = None
    ) -> CallToolResult:
        server: Any = super()
        site = str((meta or {}).get("idempotency_key") or "")
        if not site:  # not a model's call (no resolver ran): nothing to recover
            result: CallToolResult = await server.call_tool(tool_name, arguments, meta=meta)
            return result
        calls = ledger()
        row = calls.execute("SELECT status, result FROM calls WHERE site = ?", (site,)).fetchone()
        if row is not None and row[0] == "done":
            return CallToolResult.model_validate(json.loads(row[1]))
        safe = self._retry_safe(tool_name)
        if row is not None and not safe:
            return self._done(calls, site, uncertain(tool_name, "the agent stopped while it was running"))
        if row is None:
            calls.execute("INSERT INTO calls VALUES (?, 'running', NULL)", (site,))
        try:
            result = await server.call_tool(tool_name, arguments, meta=meta)
        except Exception as error:
            await self._reconnect()
            if not safe:
                why = f"the tool server went away before it answered: {type(error).__name__}"
                return self._done(calls, site, uncertain(tool_name, why))
            result = await server.call_tool(tool_name, arguments, meta=meta)
        if safe and _said_uncertain(result):
            # The server lost track of its own answer: asked again under the same key, a
            # keyed tool finds the first attempt instead of acting twice.
            try:
                result = await server.call_tool(tool_name, arguments, meta=meta)
            except Exception as error:
                result = uncertain(tool_name, f"no readable answer on asking again: {type(error).__name__}")
        return self._done(calls, site, result)

    def _done(self, calls: sqlite3.Connection, site: str, result: CallToolResult) -> CallToolResult:
        calls.execute("UPDATE calls SET status = 'done', result = ? WHERE site = ?", (_dumped(result), site))
        return result

    def _retry_safe(self, tool_name: str) -> bool:
        """What the server declared: the tool takes an idempotency key, or is read-only or
        idempotent."""
        listed: Any = getattr(self, "cached_tools", None) or []
        for tool in listed:
            if tool.name != tool_name:
                continue
            data = tool.model_dump(by_alias=True, exclude_none=True)
            hints = data.get("annotations") or {}
            keyed = "idempotency_key" in ((data.get("inputSchema") or {}).get("properties") or {})
            return keyed or bool(hints.get("readOnlyHint") or hints.get("idempotentHint"))
        return False

    async def _reconnect(self) -> None:
        server: Any = self
        try:
            await server.cleanup()
        finally:
            await server.connect()


class LedgeredStdio(Ledgered, MCPServerStdio):
    pass


class LedgeredHttp(Ledgered, MCPServerStreamableHttp):
    pass


# A failed call is never retried blindly: the ledger decides.
OPTIONS: dict[str, Any] = {**SERVER_OPTIONS, "max_retry_attempts": 0, "tool_meta_resolver": call_site}


def configured_server() -> MCPServer:
    """support_agent's configuration (``MCP_SERVER_URL`` or ``MCP_SERVER_COMMAND``), ledgered."""
    url = os.environ.get("MCP_SERVER_URL")
    if url:
        return LedgeredHttp(params={"url": url}, **OPTIONS)
    argv = shlex.split(os.environ["MCP_SERVER_COMMAND"])
    return LedgeredStdio(params={"command": argv[0], "args": argv[1:]}, **OPTIONS)


def build_agent(server: MCPServer) -> Agent:
    return Agent(name="Support", instructions=INSTRUCTIONS, model="gpt-4o-mini", mcp_servers=[server])
