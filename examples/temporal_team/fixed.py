"""support_agent.py made crash-safe the way Temporal's at-least-once activities ask for: the same
workflow and worker, each tool activity carrying an idempotency key made of its workflow's id and
its activity's id (``activity.info().workflow_id`` and ``.activity_id``: the same on every retry
of that activity), and reconciling by lookup before it acts.

* ``send_email`` writes the key with the email; retried under a key its outbox already holds
  (killed after the send, before the server recorded the completion), it sends nothing and says
  the email was sent: the outbox is the team's own, the lookup is exact.
* ``create_order`` inserts under the key (its table's UNIQUE column); retried, it finds the order
  by the key and returns it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

import support_agent
from support_agent import ORDERS_DB, OUTBOX, ask_model
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker


def activity_key() -> str:
    """The running activity's key: stable across Temporal's retries of the same activity."""
    info = activity.info()
    return f"{info.workflow_id}:{info.activity_id}"


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


@activity.defn(name="send_email")
async def send_email(args: dict[str, Any]) -> str:
    key = activity_key()
    if sent(key):  # this activity ran before the crash and its email is out: never send it again
        return f"Email sent to {args['to']}."
    with open(OUTBOX, "a", encoding="utf-8") as outbox:
        email = {"to": args["to"], "subject": args["subject"], "body": args["body"], "key": key}
        outbox.write(json.dumps(email) + "\n")
        outbox.flush()
        os.fsync(outbox.fileno())
    return f"Email sent to {args['to']}."


@activity.defn(name="create_order")
async def create_order(args: dict[str, Any]) -> str:
    key = activity_key()
    with sqlite3.connect(ORDERS_DB) as db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT, quantity INTEGER,"
            " idempotency_key TEXT UNIQUE)"
        )
        found = db.execute("SELECT id FROM orders WHERE idempotency_key = ?", (key,)).fetchone()
        if found is not None:  # placed before the crash: that order, not a second one
            return f"Order {found[0]} placed: {args['quantity']} x {args['item']}."
        order = db.execute(
            "INSERT INTO orders (item, quantity, idempotency_key) VALUES (?, ?, ?)",
            (args["item"], args["quantity"], key),
        ).lastrowid
    return f"Order {order} placed: {args['quantity']} x {args['item']}."


def worker(client: Client, task_queue: str = support_agent.TASK_QUEUE) -> Worker:
    return support_agent.worker(client, task_queue, [ask_model, send_email, create_order])
