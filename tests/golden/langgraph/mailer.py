"""A team's LangGraph mailer: one ``@tool``, ``send_email``, appending to its own outbox, a
``ChatOpenAI`` from the environment, a ``ToolNode`` graph compiled with the checkpointer it is
handed. Its tool keeps a ledger of its own (a SQLite table): a row ``running`` written before
the send, ``done`` with the result after; a call found ``running`` after a restart may or may
not have gone out, and is never sent again. ``build_twin`` is the same graph with the tool
LangGraph's docs show, no ledger: LangGraph's resume runs it again after a crash past the send.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Annotated, Any

from langchain_core.messages import AIMessage
from langchain_core.tools import InjectedToolCallId, tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, ToolNode, tools_condition


def _send(to: str, subject: str, body: str) -> None:
    with open("outbox.jsonl", "a", encoding="utf-8") as outbox:
        outbox.write(json.dumps({"to": to, "subject": subject, "body": body}) + "\n")
        outbox.flush()
        os.fsync(outbox.fileno())


def mark(db: sqlite3.Connection, site: str, tool_call_id: str, status: str, result: str = "") -> str:
    db.execute("INSERT OR REPLACE INTO calls VALUES (?, ?, ?)", (site, status, result))
    return result


@tool
def send_email(
    to: str,
    subject: str,
    body: str,
    state: Annotated[dict[str, Any], InjectedState],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> str:
    """Send an email."""
    asked = [m for m in state["messages"] if isinstance(m, AIMessage) and m.tool_calls]
    site = f"{asked[-1].id}/{tool_call_id}"  # a provider's call_0 comes back in later turns
    db = sqlite3.connect("ledger.db", isolation_level=None)
    db.execute("CREATE TABLE IF NOT EXISTS calls (site TEXT PRIMARY KEY, status TEXT, result TEXT)")
    row = db.execute("SELECT status, result FROM calls WHERE site = ?", (site,)).fetchone()
    if row and row[0] == "done":
        return str(row[1])
    if row:
        return mark(db, site, tool_call_id, "done", f"Uncertain: the email to {to} may have gone out.")
    mark(db, site, tool_call_id, "running")
    _send(to, subject, body)
    return mark(db, site, tool_call_id, "done", f"Sent to {to}.")


@tool("send_email")
def send_email_twin(to: str, subject: str, body: str) -> str:
    """Send an email."""
    _send(to, subject, body)
    return f"Sent to {to}."


def _graph(tools: list[Any], checkpointer: Any) -> Any:
    model = ChatOpenAI(model="gpt-4o-mini").bind_tools(tools)
    graph = StateGraph(MessagesState)
    graph.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


def build(ctx: Any) -> Any:
    return _graph([send_email], ctx.checkpointer)


def build_twin(ctx: Any) -> Any:
    return _graph([send_email_twin], ctx.checkpointer)
