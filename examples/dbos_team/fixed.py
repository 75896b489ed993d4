"""support_agent.py made crash-safe the way DBOS's at-least-once steps ask for: the same workflow
and loop, each tool step carrying an idempotency key made of its workflow's id and its step's
id (``DBOS.workflow_id``, ``DBOS.step_id``: the same when DBOS re-runs the step on recovery),
and reconciling by lookup before it acts.

* ``send_email`` writes the key with the email; asked again under a key its outbox already
  holds (killed after the send, before DBOS committed the step's row), it sends nothing and
  says the email was sent: the outbox is the team's own, the lookup is exact.
* ``create_order`` inserts under the key (its table's UNIQUE column); asked again, it finds the
  order by the key and returns it.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

from dbos import DBOS
from openai import OpenAI
from support_loop import INSTRUCTIONS, TOOLS, run_turn

OUTBOX = "outbox.jsonl"
ORDERS_DB = "orders.db"


def step_key() -> str:
    """The running step's key: stable across DBOS's re-runs of the same step."""
    return f"{DBOS.workflow_id}:{DBOS.step_id}"


@DBOS.step()
def ask_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    reply = OpenAI().chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "system", "content": INSTRUCTIONS}, *messages], tools=TOOLS
    )
    message: dict[str, Any] = reply.choices[0].message.model_dump(exclude_none=True)
    return message


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
def send_email(to: str, subject: str, body: str) -> str:
    key = step_key()
    if sent(key):  # this step ran before the crash and its email is out: never send it again
        return f"Email sent to {to}."
    with open(OUTBOX, "a", encoding="utf-8") as outbox:
        outbox.write(json.dumps({"to": to, "subject": subject, "body": body, "key": key}) + "\n")
        outbox.flush()
        os.fsync(outbox.fileno())
    return f"Email sent to {to}."


@DBOS.step()
def create_order(item: str, quantity: int) -> str:
    key = step_key()
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


@DBOS.workflow()
def support_turn(messages: list[dict[str, Any]]) -> str:
    return run_turn(messages, ask_model, {"send_email": send_email, "create_order": create_order})
