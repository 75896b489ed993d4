"""A support agent made durable with DBOS, written the way DBOS's docs show it: the agent's loop
is a ``@DBOS.workflow``, the model call (the official ``openai`` client, from ``OPENAI_API_KEY`` /
``OPENAI_BASE_URL``) and each tool are ``@DBOS.step``s, so every step's output is checkpointed in
DBOS's system database and a restarted process resumes the workflow from its last completed step.

Its tools are the team's: ``send_email`` appends to its outbox (``outbox.jsonl``, fsynced) and
``create_order`` inserts into its own orders table (``orders.db``). No keys: a step killed
after its effect and before DBOS committed its row runs again on recovery (DBOS's steps are
at-least-once), so the email goes out twice. ``fixed.py`` is the same agent with keys.
Nothing here knows crashmatrix: ``crashmatrix_factory.py`` hands the workflow to the harness.
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


@DBOS.step()
def ask_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    reply = OpenAI().chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "system", "content": INSTRUCTIONS}, *messages], tools=TOOLS
    )
    message: dict[str, Any] = reply.choices[0].message.model_dump(exclude_none=True)
    return message


@DBOS.step()
def send_email(to: str, subject: str, body: str) -> str:
    with open(OUTBOX, "a", encoding="utf-8") as outbox:
        outbox.write(json.dumps({"to": to, "subject": subject, "body": body}) + "\n")
        outbox.flush()
        os.fsync(outbox.fileno())
    return f"Email sent to {to}."


@DBOS.step()
def create_order(item: str, quantity: int) -> str:
    with sqlite3.connect(ORDERS_DB) as db:
        db.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT, quantity INTEGER)")
        order = db.execute("INSERT INTO orders (item, quantity) VALUES (?, ?)", (item, quantity)).lastrowid
    return f"Order {order} placed: {quantity} x {item}."


@DBOS.workflow()
def support_turn(messages: list[dict[str, Any]]) -> str:
    return run_turn(messages, ask_model, {"send_email": send_email, "create_order": create_order})


def main() -> None:
    DBOS(config={"name": "support-agent", "system_database_url": "sqlite:///dbos.sqlite"})
    DBOS.launch()  # recovers the workflows a killed process left pending
    messages: list[dict[str, Any]] = []
    while True:
        messages.append({"role": "user", "content": input("> ")})
        print(support_turn(messages))


if __name__ == "__main__":
    main()
