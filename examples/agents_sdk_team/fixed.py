"""support_agent.py made crash-safe the way a careful team would, still the SDK's way: the same
``Agent`` and tools, each tool keeping a small ledger of its own (``ledger.db``, one row per
call site, every write its own committed transaction) and recovering by its tool's contract.

The SDK saves a step's ``function_call`` with its output only after the step's tools ran, so a
process killed in between leaves no trace of the call: the restarted run asks the model
again, which asks for the same call again. The tool, not the SDK, can tell it ran before:

* a call site is ``<turn>:<call_id>`` (the turn counted in the run's input: providers reuse
  ids such as ``call_0`` in a later turn), and it is also the order's idempotency key;
* ``running`` is written before the effect, ``done`` with the result after it;
* asked again for a site the ledger knows: ``done`` -> the result it gave (the model never
  saw it; nothing runs again); ``running`` (killed between) -> by the contract:
  ``send_email`` (surface_uncertain) says it may have been sent and never sends again;
  ``create_order`` (reconcile) looks its key up in the orders table: found -> that order,
  not found -> placed now under the same key (the table's UNIQUE key keeps it one).
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

from agents import Agent, function_tool
from agents.tool_context import ToolContext
from support_agent import INSTRUCTIONS, ORDERS_DB, OUTBOX

LEDGER_DB = "ledger.db"


def ledger() -> sqlite3.Connection:
    db = sqlite3.connect(LEDGER_DB, isolation_level=None)  # autocommit: each write durable
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE IF NOT EXISTS calls (site TEXT PRIMARY KEY, status TEXT, result TEXT)")
    return db


def recorded(db: sqlite3.Connection, site: str) -> tuple[str, str | None] | None:
    row = db.execute("SELECT status, result FROM calls WHERE site = ?", (site,)).fetchone()
    return None if row is None else (row[0], row[1])


def mark_running(db: sqlite3.Connection, site: str, call_id: str) -> None:
    db.execute("INSERT OR REPLACE INTO calls VALUES (?, 'running', NULL)", (site,))


def mark_done(db: sqlite3.Connection, site: str, result: str) -> str:
    db.execute("UPDATE calls SET status = 'done', result = ? WHERE site = ?", (result, site))
    return result


def site_of(ctx: ToolContext[Any]) -> str:
    turn = sum(1 for item in ctx.turn_input if isinstance(item, dict) and item.get("role") == "user")
    return f"{turn}:{ctx.tool_call_id}"


def append_outbox(line: dict[str, Any], call_id: str) -> None:
    with open(OUTBOX, "a", encoding="utf-8") as outbox:
        outbox.write(json.dumps(line) + "\n")
        outbox.flush()
        os.fsync(outbox.fileno())


def orders() -> sqlite3.Connection:
    db = sqlite3.connect(ORDERS_DB, isolation_level=None)
    db.execute("PRAGMA synchronous=FULL")
    db.execute(
        "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT, quantity INTEGER,"
        " idempotency_key TEXT UNIQUE)"
    )
    return db


def insert_order(db: sqlite3.Connection, item: str, quantity: int, key: str, call_id: str) -> int:
    cursor = db.execute(
        "INSERT INTO orders (item, quantity, idempotency_key) VALUES (?, ?, ?)",
        (item, quantity, key),
    )
    return int(cursor.lastrowid or 0)


@function_tool
def send_email(ctx: ToolContext[Any], to: str, subject: str, body: str) -> str:
    """Send an email.

    Args:
        to: The recipient's address.
        subject: The subject line.
        body: The text of the email.
    """
    calls, site = ledger(), site_of(ctx)
    seen = recorded(calls, site)
    if seen is not None and seen[0] == "done":
        return str(seen[1])
    if seen is not None:  # running: it may have gone out; an email is never sent twice
        uncertain = f"UNCERTAIN: the email to {to} may have been sent before an interruption."
        return mark_done(calls, site, uncertain)
    mark_running(calls, site, ctx.tool_call_id)
    append_outbox({"to": to, "subject": subject, "body": body, "key": site}, ctx.tool_call_id)
    return mark_done(calls, site, f"Email sent to {to}.")


@function_tool
def create_order(ctx: ToolContext[Any], item: str, quantity: int) -> str:
    """Place an order.

    Args:
        item: What to order.
        quantity: How many.
    """
    calls, site = ledger(), site_of(ctx)
    seen = recorded(calls, site)
    if seen is not None and seen[0] == "done":
        return str(seen[1])
    db = orders()
    if seen is not None:  # running: reconcile by the key before placing anything
        found = db.execute("SELECT id FROM orders WHERE idempotency_key = ?", (site,)).fetchone()
        if found is not None:
            return mark_done(calls, site, f"Order {found[0]} placed: {quantity} x {item} (reconciled).")
    else:
        mark_running(calls, site, ctx.tool_call_id)
    order = insert_order(db, item, quantity, site, ctx.tool_call_id)
    return mark_done(calls, site, f"Order {order} placed: {quantity} x {item}.")


agent = Agent(
    name="Support", instructions=INSTRUCTIONS, model="gpt-4o-mini", tools=[send_email, create_order]
)
