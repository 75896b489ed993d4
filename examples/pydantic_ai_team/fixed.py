"""support_agent.py made crash-safe the way a careful team would, still PydanticAI's way: the
same ``Agent``, model and store, each tool keeping a small ledger of its own (``ledger.db``,
one row per call site, every write its own committed transaction) and recovering by its
tool's contract.

The app saves a run's messages only when ``agent.run`` returns, so a process killed while a
tool ran leaves no trace of the turn: the restarted app sends the turn again, and the model
asks for the same call again. The tool, not PydanticAI, can tell it ran before:

* a call site is ``<turn>:<tool_call_id>`` (the turn counted in the run's messages:
  providers reuse ids such as ``call_0`` in a later turn), and it is also the order's
  idempotency key;
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

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelRequest, UserPromptPart
from pydantic_ai.models.openai import OpenAIChatModel
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


def site_of(ctx: RunContext[None]) -> str:
    turn = sum(
        1
        for message in ctx.messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    )
    return f"{turn}:{ctx.tool_call_id}"


def append_outbox(line: dict[str, str], call_id: str) -> None:
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


agent = Agent(OpenAIChatModel("gpt-4o-mini"), instructions=INSTRUCTIONS)


@agent.tool
def send_email(ctx: RunContext[None], to: str, subject: str, body: str) -> str:
    """Send an email.

    Args:
        to: The recipient's address.
        subject: The subject line.
        body: The text of the email.
    """
    calls, site, call_id = ledger(), site_of(ctx), str(ctx.tool_call_id)
    seen = recorded(calls, site)
    if seen is not None and seen[0] == "done":
        return str(seen[1])
    if seen is not None:  # running: it may have gone out; an email is never sent twice
        uncertain = f"UNCERTAIN: the email to {to} may have been sent before an interruption."
        return mark_done(calls, site, uncertain)
    mark_running(calls, site, call_id)
    append_outbox({"to": to, "subject": subject, "body": body, "key": site}, call_id)
    return mark_done(calls, site, f"Email sent to {to}.")


@agent.tool
def create_order(ctx: RunContext[None], item: str, quantity: int) -> str:
    """Place an order.

    Args:
        item: What to order.
        quantity: How many.
    """
    calls, site, call_id = ledger(), site_of(ctx), str(ctx.tool_call_id)
    seen = recorded(calls, site)
    if seen is not None and seen[0] == "done":
        return str(seen[1])
    db = orders()
    if seen is not None:  # running: reconcile by the key before placing anything
        found = db.execute("SELECT id FROM orders WHERE idempotency_key = ?", (site,)).fetchone()
        if found is not None:
            return mark_done(calls, site, f"Order {found[0]} placed: {quantity} x {item} (reconciled).")
    else:
        mark_running(calls, site, call_id)
    order = insert_order(db, item, quantity, site, call_id)
    return mark_done(calls, site, f"Order {order} placed: {quantity} x {item}.")
