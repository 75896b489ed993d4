"""The agent of ``agent.py`` made crash-safe with a ledger its tools consult (seed 000's idea,
in the SDK's terms): ``--agent=openai-agents:examples.openai_agents_agent.fixed:build``.

The SDK saves a step's ``function_call`` and its output only after the tool ran, so a process
killed in between leaves no trace of the call and the restarted run asks the model again. Here
each tool first writes ``running`` for its call id to its own SQLite ledger (committed before
the effect), runs, then writes the result. At the start of a life, every call the ledger knows
and the session does not answer is put back into the session with what is known of it:

* the ledger holds the result: that result (the effect is not run again);
* it is still ``running`` and the tool is safe to replay (its contract's ``replay_policy:
  auto``, e.g. an order keyed by the call id): run again under the same key, its result;
* otherwise (an email): ``SIDE_EFFECT_UNCERTAIN``, never a second send.

The model then sees the call answered and goes on from there. The idempotency key a tool
sends is derived from the call id, so a replay is deduplicated by a keyed service.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agents import Agent, FunctionTool, SQLiteSession

from crashmatrix.harness.agents.frameworks.openai_agents import AgentsContext
from crashmatrix.harness.core.tools import ToolObservation

INSTRUCTIONS = "You are a helpful assistant. Use the tools to do what the user asks."


class Ledger:
    """One row per tool call: ``running`` before its effect, then its result."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)  # autocommit: each write durable
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS calls (call_id TEXT PRIMARY KEY, tool TEXT NOT NULL,"
            " arguments TEXT NOT NULL, status TEXT NOT NULL, result TEXT)"
        )

    def get(self, call_id: str) -> tuple[str, str, str, str | None] | None:
        row = self.conn.execute(
            "SELECT tool, arguments, status, result FROM calls WHERE call_id = ?", (call_id,)
        ).fetchone()
        return None if row is None else (row[0], row[1], row[2], row[3])

    def running(self, call_id: str, tool: str, arguments: str) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO calls VALUES (?, ?, ?, 'running', NULL)", (call_id, tool, arguments)
        )

    def done(self, call_id: str, result: str) -> None:
        self.conn.execute("UPDATE calls SET status = 'done', result = ? WHERE call_id = ?", (result, call_id))

    def calls(self) -> list[tuple[str, str, str, str, str | None]]:
        return list(
            self.conn.execute("SELECT call_id, tool, arguments, status, result FROM calls ORDER BY rowid")
        )


def _key(call_id: str, tool: str) -> str:
    return f"openai-agents:{tool}:{call_id}"


def _uncertain(tool: str, idempotency: str) -> str:
    observation = ToolObservation(
        ok=False,
        code="SIDE_EFFECT_UNCERTAIN",
        uncertain=True,
        content=f"{tool} was cut off by a crash; whether it took effect is unknown. Check before retrying.",
    )
    result = {
        **observation.to_result(execution_id=None, idempotency=idempotency),
        "recovery": "side_effect_uncertain",
    }
    return json.dumps(result, ensure_ascii=False)


def _recovered(result: str, recovery: str) -> str:
    """A result given again after a crash, saying how (crashmatrix's ``recovery`` words)."""
    return json.dumps({**json.loads(result), "recovery": recovery}, ensure_ascii=False)


def _ledgered(tool: FunctionTool, ledger: Ledger, ctx: AgentsContext) -> FunctionTool:
    async def invoke(tool_context: Any, raw: str) -> str:
        call_id = str(tool_context.tool_call_id)
        known = ledger.get(call_id)
        if known is not None and known[2] == "done" and known[3] is not None:
            return _recovered(known[3], "result_replayed")  # already ran: not a second effect
        arguments: Mapping[str, Any] = json.loads(raw or "{}")
        ledger.running(call_id, tool.name, raw or "{}")
        result = json.dumps(dict(ctx.run_tool(tool.name, arguments, call_id, _key(call_id, tool.name))))
        ledger.done(call_id, result)
        return result

    return dataclasses.replace(tool, on_invoke_tool=invoke)


async def _recover(session: SQLiteSession, ledger: Ledger, ctx: AgentsContext) -> None:
    """Answer in the session every call the ledger knows and the session does not."""
    answered = {
        item.get("call_id")
        for item in await session.get_items()
        if item.get("type") == "function_call_output"
    }
    for call_id, tool, raw, status, result in ledger.calls():
        if call_id in answered:
            continue
        contract = ctx.contracts.get(tool)
        if status == "done" and result is not None:
            result = _recovered(result, "result_replayed")
        elif contract is not None and contract.replay_policy == "auto":
            result = json.dumps(dict(ctx.run_tool(tool, json.loads(raw), call_id, _key(call_id, tool))))
            ledger.done(call_id, result)
            result = _recovered(result, "replayed")
        else:
            result = _uncertain(tool, contract.idempotency if contract else "non_idempotent")
        await session.add_items(
            [
                {"type": "function_call", "call_id": call_id, "name": tool, "arguments": raw},
                {"type": "function_call_output", "call_id": call_id, "output": result},
            ]  # type: ignore[list-item]
        )


async def build(ctx: AgentsContext) -> tuple[Agent[Any], SQLiteSession]:
    session = SQLiteSession(ctx.session_id, ctx.db_path)
    ledger = Ledger(ctx.db_path.with_name("openai-agents-ledger.db"))
    await _recover(session, ledger, ctx)
    tools = [_ledgered(tool, ledger, ctx) for tool in ctx.tools]
    agent: Agent[Any] = Agent(name="assistant", instructions=INSTRUCTIONS, model=ctx.model, tools=tools)
    return agent, session
