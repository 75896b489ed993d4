"""dbos_agent.py made crash-safe the way DBOS's at-least-once steps ask for: the same
``DBOSAgent``, each tool's effect a ``@DBOS.step`` carrying an idempotency key -- the turn's
workflow id and the model's tool call id, both the same when DBOS recovers the run (the
model's reply is replayed from its step row) -- and reconciling by lookup before it acts.

* A step killed after its row committed is replayed from the row: the effect is not made again.
* A step killed after its effect and before its row committed runs again (at-least-once):
  ``send_email`` finds its key in the outbox and sends nothing; ``create_order`` finds the
  order by its key (the table's UNIQUE column) and returns it.

The key is the call's, not the step's id: DBOSAgent runs a reply's calls concurrently, so the
order in which their steps are numbered is not the model's.
"""

from __future__ import annotations

import json
import os
import sqlite3

from dbos import DBOS
from pydantic_ai import Agent, RunContext
from pydantic_ai.durable_exec.dbos import DBOSAgent
from pydantic_ai.models.openai import OpenAIChatModel
from support_agent import INSTRUCTIONS, ORDERS_DB, OUTBOX

agent = Agent(OpenAIChatModel("gpt-4o-mini"), instructions=INSTRUCTIONS, name="support_fixed")


def call_key(ctx: RunContext[None]) -> str:
    """The call's key: the turn's workflow and the model's call id (call ids repeat across turns)."""
    return f"{DBOS.workflow_id}:{ctx.tool_call_id}"


def sent(key: str) -> bool:
    try:
        with open(OUTBOX, encoding="utf-8") as outbox:
            lines = outbox.read().splitlines()
    except FileNotFoundError:
        return False
    for line in lines:
        try:
            if json.loads(line).get("key") == key:
                return True
        except ValueError:
            continue  # a line cut by a crash mid-write: not an email
    return False


@DBOS.step()
def email_step(to: str, subject: str, body: str, key: str) -> str:
    if sent(key):  # this step ran before the crash and its email is out: never send it again
        return f"Email sent to {to}."
    with open(OUTBOX, "a", encoding="utf-8") as outbox:
        outbox.write(json.dumps({"to": to, "subject": subject, "body": body, "key": key}) + "\n")
        outbox.flush()
        os.fsync(outbox.fileno())
    return f"Email sent to {to}."


@DBOS.step()
def order_step(item: str, quantity: int, key: str) -> str:
    with sqlite3.connect(ORDERS_DB) as db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT, quantity INTEGER,"
            " idempotency_key TEXT UNIQUE)"
        )
        found = db.execute("SELECT id FROM orders WHERE idempotency_key = ?", (key,)).fetchone()
        if found is not None:  # placed before the crash: that order, not a second one
            return f"Order {found[0]} placed: {quantity} x {item}."
        order = db.execute(
            "INSERT INTO orders (item, quantity, idempotency_key) VALUES (?, ?, ?)", (item, quantity, key)
        ).lastrowid
    return f"Order {order} placed: {quantity} x {item}."


@agent.tool
def send_email(ctx: RunContext[None], to: str, subject: str, body: str) -> str:
    """Send an email.

    Args:
        to: The recipient's address.
        subject: The subject line.
        body: The text of the email.
    """
    return email_step(to, subject, body, call_key(ctx))


@agent.tool
def create_order(ctx: RunContext[None], item: str, quantity: int) -> str:
    """Place an order.

    Args:
        item: What to order.
        quantity: How many.
    """
    return order_step(item, quantity, call_key(ctx))


durable = DBOSAgent(agent)
