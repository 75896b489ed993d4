"""A LangGraph tool-calling agent, two ways, for ``--agent=langgraph:examples.langgraph_agent.agent:build``.

``build``: LangGraph's default way -- a model node, ``ToolNode`` running the tools as plain
functions, ``SqliteSaver`` as the checkpointer. On a crash after a tool's effect but before
its ``ToolMessage`` was saved, LangGraph resumes the thread by re-running the whole ToolNode
task: the email goes out twice (docs/frameworks.md shows the cells and the cases).

``build_fixed``: the same graph, with each tool call keyed in a small ledger of its own (a
SQLite table beside the checkpoint) that it consults before acting. The key is the call's
site, not its id alone: the id of the checkpointed ``AIMessage`` that asked for it (LangChain
gives each one a unique id, saved with the checkpoint, so a resumed step finds the same key)
plus the ``tool_call_id`` (providers reuse ids such as ``call_0`` across turns; by id alone
the second turn's call would get the first turn's result). The same key goes to the service
as its idempotency key. A call already done returns its saved result; a call that started
and never finished is run again only when that is safe for this call (the service
deduplicates on the key, the call is read-only -- ``run_command("ls")`` is, ``rm`` is not --
or the effect is a whole-file write), otherwise the model is told the effect is uncertain
(``SIDE_EFFECT_UNCERTAIN``). A lost response or a retryable timeout on a call that is safe to
repeat (read-only, or keyed where the service deduplicates) is retried once with the same key.

Both take crashmatrix's ``GraphContext``: the model, the suite's tools (run by the mock tools),
and the checkpoint file. In production the same graph gets a real ``ChatOpenAI``, real tool
functions and a real database path.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.tools import InjectedToolCallId, StructuredTool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, ToolNode, tools_condition

SYSTEM = "You are a helpful assistant."


def _graph(ctx: Any, tools: list[Any]) -> Any:
    model = ctx.model.bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    saver = SqliteSaver(sqlite3.connect(ctx.checkpoint_path, check_same_thread=False))
    return graph.compile(checkpointer=saver)


def build(ctx: Any) -> Any:
    """The framework's default way: ToolNode runs the tools, the checkpointer saves the state."""
    return _graph(ctx, list(ctx.tools))


# -- the fixed way: each tool consults a ledger keyed by its call site -----------------------


class Ledger:
    """What each tool call did, saved before and after the effect (autocommit rows)."""

    def __init__(self, path: Any) -> None:
        self.conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS calls (site TEXT PRIMARY KEY, status TEXT, result TEXT)"
        )

    def get(self, site: str) -> tuple[str, str | None] | None:
        row = self.conn.execute("SELECT status, result FROM calls WHERE site = ?", (site,)).fetchone()
        return (row[0], row[1]) if row else None

    def set(self, site: str, status: str, result: str | None = None) -> None:
        self.conn.execute("INSERT OR REPLACE INTO calls VALUES (?, ?, ?)", (site, status, result))


def call_site(messages: Sequence[Any], tool_call_id: str) -> str:
    """``<AIMessage id>/<tool_call_id>``: the latest checkpointed message that asked for this
    call (ToolNode runs the calls of the thread's last AIMessage)."""
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(c["id"] == tool_call_id for c in message.tool_calls):
            return f"{message.id}/{tool_call_id}"
    raise LookupError(f"no AIMessage in the thread asked for tool call {tool_call_id!r}")


def _uncertain(name: str) -> str:
    return json.dumps(
        {
            "ok": False,
            "status": "unknown",
            "code": "SIDE_EFFECT_UNCERTAIN",
            "content": f"{name} started before a crash and may have taken effect; check before retrying.",
            "metadata": {"retryable": False, "idempotency": "non_idempotent"},
        }
    )


def _safe_again(contract: Any) -> bool:
    """Safe to run again after a crash: the service deduplicates on the key we send, the call
    is read-only, or its effect is a whole-file write (the same bytes again)."""
    return (
        contract.recovery in ("replay", "precondition", "reconcile") or contract.idempotency == "idempotent"
    )


def _worth_one_more(result: str, contract: Any) -> bool:
    """A lost response or a timeout the service says is safe to retry, on a call that is safe
    to repeat: a read-only call, or a keyed one the service deduplicates (replay_policy auto)."""
    try:
        told = json.loads(result)
    except ValueError:
        return False
    if not isinstance(told, dict) or told.get("ok"):
        return False
    retryable = bool((told.get("metadata") or {}).get("retryable"))
    return (retryable and contract.idempotency == "idempotent") or (
        told.get("code") == "SIDE_EFFECT_UNCERTAIN" and contract.replay_policy == "auto"
    )


def _keyed_tool(ctx: Any, ledger: Ledger, name: str, schema: Any, description: str) -> Any:
    def call(
        tool_call_id: Annotated[str, InjectedToolCallId],
        messages: Annotated[list[AnyMessage], InjectedState("messages")],
        **arguments: Any,
    ) -> str:
        site = call_site(messages, tool_call_id)
        given = {k: v for k, v in arguments.items() if v is not None}
        # Per call: run_command("ls src") is read-only where run_command("rm -rf x") is not.
        contract = ctx.contracts[name].for_call(given)
        done = ledger.get(site)
        if done and done[0] == "done":
            return done[1] or ""  # the saved result: no second effect
        if done and done[0] == "running" and not _safe_again(contract):
            result = _uncertain(name)
        else:
            ledger.set(site, "running")
            result = ctx.run_tool(name, given, tool_call_id, key=site)
            if _worth_one_more(result, contract):
                result = ctx.run_tool(name, given, tool_call_id, key=site)  # the same key: deduplicated
        ledger.set(site, "done", result)
        return result

    return StructuredTool.from_function(func=call, name=name, description=description, args_schema=schema)


def build_fixed(ctx: Any) -> Any:
    """The same graph; each tool checks its ledger first (see the module's docstring)."""
    ledger = Ledger(ctx.checkpoint_path.with_name("tool-ledger.sqlite"))
    tools = [_keyed_tool(ctx, ledger, t.name, t.args_schema, t.description) for t in ctx.tools]
    return _graph(ctx, tools)


__all__ = ["build", "build_fixed"]
