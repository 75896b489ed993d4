"""support_graph.py made crash-safe, still the way LangGraph's docs write an agent: the same
graph, the same tools and world, each tool call keyed by its call site in a ledger of the
team's own (a table beside its orders) and recovered by its contract after a crash.

LangGraph resumes an interrupted step by running its ``ToolNode`` again: a tool that acted
and was killed before its ``ToolMessage`` was saved acts twice. Here each call first looks up
its site -- the checkpointed ``AIMessage`` that asked for it (LangChain's id, saved with the
checkpoint, so a resumed step finds the same one) and the ``tool_call_id`` (providers reuse
ids such as ``call_0`` across turns) -- and:

* a call already done returns the result it saved;
* ``send_email`` found ``running`` (started, never finished: it may or may not have gone out,
  and an outbox is no service to ask) tells the model so and sends nothing;
* ``create_order`` found ``running`` looks its order up by the key it was placed with (the
  orders table holds at most one order per key): found, it tells the model what was placed;
  not found, it places it with the same key.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Annotated, Any

import support_graph
from langchain_core.messages import AIMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.prebuilt import InjectedState

OUTBOX = support_graph.OUTBOX
ORDERS_DB = support_graph.ORDERS_DB


def _db() -> sqlite3.Connection:
    db = sqlite3.connect(ORDERS_DB, isolation_level=None)  # each statement commits
    db.execute("CREATE TABLE IF NOT EXISTS tool_calls (site TEXT PRIMARY KEY, status TEXT, result TEXT)")
    db.execute(
        "CREATE TABLE IF NOT EXISTS orders "
        "(id INTEGER PRIMARY KEY, item TEXT, quantity INTEGER, key TEXT UNIQUE)"
    )
    return db


def call_site(state: Any, tool_call_id: str) -> str:
    """``<AIMessage id>/<tool_call_id>``: the latest message that asked for this call."""
    for message in reversed(state["messages"]):
        if isinstance(message, AIMessage) and any(c["id"] == tool_call_id for c in message.tool_calls):
            return f"{message.id}/{tool_call_id}"
    raise LookupError(f"no AIMessage in the thread asked for tool call {tool_call_id!r}")


def ledger_running(db: sqlite3.Connection, site: str, tool_call_id: str) -> None:
    """The call is about to act: saved before the effect."""
    db.execute("INSERT OR REPLACE INTO tool_calls VALUES (?, 'running', NULL)", (site,))


def ledger_done(db: sqlite3.Connection, site: str, tool_call_id: str, result: str) -> str:
    """The call's result, saved: a resumed step gets it back."""
    db.execute("INSERT OR REPLACE INTO tool_calls VALUES (?, 'done', ?)", (site, result))
    return result


def _save(db: sqlite3.Connection, site: str, result: str) -> str:
    """A recovered call's result, saved (no effect happened in this process)."""
    db.execute("INSERT OR REPLACE INTO tool_calls VALUES (?, 'done', ?)", (site, result))
    return result


def _status(db: sqlite3.Connection, site: str) -> tuple[str, str | None] | None:
    row = db.execute("SELECT status, result FROM tool_calls WHERE site = ?", (site,)).fetchone()
    return (row[0], row[1]) if row else None


@tool
def send_email(
    to: str,
    subject: str,
    body: str,
    state: Annotated[dict[str, Any], InjectedState],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> str:
    """Send an email.

    Args:
        to: The recipient's address.
        subject: The subject line.
        body: The text of the email.
    """
    site = call_site(state, tool_call_id)
    with _db() as db:
        found = _status(db, site)
        if found and found[0] == "done" and found[1] is not None:
            return found[1]
        if found:
            return _save(
                db,
                site,
                f"The email to {to} may or may not have been sent before the agent stopped; "
                "check the outbox before sending it again.",
            )
        ledger_running(db, site, tool_call_id)
        with open(OUTBOX, "a", encoding="utf-8") as outbox:
            outbox.write(json.dumps({"to": to, "subject": subject, "body": body, "key": site}) + "\n")
            outbox.flush()
            os.fsync(outbox.fileno())
        return ledger_done(db, site, tool_call_id, f"Email sent to {to}.")


@tool
def create_order(
    item: str,
    quantity: int,
    state: Annotated[dict[str, Any], InjectedState],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> str:
    """Place an order.

    Args:
        item: What to order.
        quantity: How many.
    """
    site = call_site(state, tool_call_id)
    with _db() as db:
        found = _status(db, site)
        if found and found[0] == "done" and found[1] is not None:
            return found[1]
        if found:  # started before a crash: the order's key says whether it was placed
            placed = db.execute("SELECT id FROM orders WHERE key = ?", (site,)).fetchone()
            if placed:
                return _save(db, site, f"Order {placed[0]} was already placed: {quantity} x {item}.")
        ledger_running(db, site, tool_call_id)
        order = db.execute(
            "INSERT INTO orders (item, quantity, key) VALUES (?, ?, ?)", (item, quantity, site)
        ).lastrowid
        return ledger_done(db, site, tool_call_id, f"Order {order} placed: {quantity} x {item}.")


TOOLS = [send_email, create_order]


def build_graph(checkpointer: Any) -> Any:
    """support_graph's graph with these tools."""
    return support_graph.build_graph(checkpointer, TOOLS)
