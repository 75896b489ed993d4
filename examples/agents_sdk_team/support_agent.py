"""A support agent written the way the OpenAI Agents SDK's docs show it: ``@function_tool``
functions writing the team's own world, an ``Agent`` on a model name (the SDK's default
client, ``AsyncOpenAI()`` from ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``), and a
``SQLiteSession`` the app continues a conversation from.

Its tools are the team's: ``send_email`` appends to its outbox (``outbox.jsonl``, fsynced)
and ``create_order`` inserts into its own orders table (``orders.db``). Nothing here knows
crashmatrix: ``crashmatrix_factory.py`` hands this agent and its session to the harness, and
``adapter.yaml`` says where its effects show. ``fixed.py`` is the same agent made crash-safe.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3

from agents import Agent, Runner, SQLiteSession, function_tool

OUTBOX = "outbox.jsonl"
ORDERS_DB = "orders.db"
INSTRUCTIONS = "You are a support assistant. Use the tools to do what the customer asks."


@function_tool
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email.

    Args:
        to: The recipient's address.
        subject: The subject line.
        body: The text of the email.
    """
    with open(OUTBOX, "a", encoding="utf-8") as outbox:
        outbox.write(json.dumps({"to": to, "subject": subject, "body": body}) + "\n")
        outbox.flush()
        os.fsync(outbox.fileno())
    return f"Email sent to {to}."


@function_tool
def create_order(item: str, quantity: int) -> str:
    """Place an order.

    Args:
        item: What to order.
        quantity: How many.
    """
    with sqlite3.connect(ORDERS_DB) as db:
        db.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT, quantity INTEGER)")
        order = db.execute("INSERT INTO orders (item, quantity) VALUES (?, ?)", (item, quantity)).lastrowid
    return f"Order {order} placed: {quantity} x {item}."


agent = Agent(
    name="Support", instructions=INSTRUCTIONS, model="gpt-4o-mini", tools=[send_email, create_order]
)


async def main() -> None:
    session = SQLiteSession("customer-42", "conversations.db")
    while True:
        result = await Runner.run(agent, input("> "), session=session)
        print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
