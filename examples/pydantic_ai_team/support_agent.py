"""A support agent written the way PydanticAI's docs show it: an ``Agent`` on an
OpenAI-compatible chat model (``OpenAIChatModel`` with its default provider, which reads
``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``), tools registered with ``@agent.tool_plain`` writing
the team's own world, and the conversation kept the way PydanticAI's chat-app example keeps it:
each run's ``result.new_messages_json()`` one row of a SQLite table, read back through
``ModelMessagesTypeAdapter`` as the next run's ``message_history``.

Its tools are the team's: ``send_email`` appends to its outbox (``outbox.jsonl``, fsynced)
and ``create_order`` inserts into its own orders table (``orders.db``). Nothing here knows
crashmatrix: ``crashmatrix_factory.py`` hands this agent and its store to the harness, and
``adapter.yaml`` says where its effects show. ``fixed.py`` is the same agent made crash-safe.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.models.openai import OpenAIChatModel

OUTBOX = "outbox.jsonl"
ORDERS_DB = "orders.db"
INSTRUCTIONS = "You are a support assistant. Use the tools to do what the customer asks."


class MessageStore:
    """The conversation, PydanticAI's chat-app way: one row per run, its new messages' JSON."""

    def __init__(self, path: str) -> None:
        self.path = path
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, message_list TEXT)")

    def add_messages(self, messages: bytes) -> None:
        with sqlite3.connect(self.path) as db:
            db.execute("INSERT INTO messages (message_list) VALUES (?)", (messages.decode(),))

    def get_messages(self) -> list[ModelMessage]:
        with sqlite3.connect(self.path) as db:
            rows = db.execute("SELECT message_list FROM messages ORDER BY id").fetchall()
        return [message for row in rows for message in ModelMessagesTypeAdapter.validate_json(row[0])]


agent = Agent(OpenAIChatModel("gpt-4o-mini"), instructions=INSTRUCTIONS)


@agent.tool_plain
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


@agent.tool_plain
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


async def main() -> None:
    store = MessageStore("conversations.db")
    while True:
        result = await agent.run(input("> "), message_history=store.get_messages())
        store.add_messages(result.new_messages_json())
        print(result.output)


if __name__ == "__main__":
    asyncio.run(main())
