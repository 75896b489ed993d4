"""A support agent made durable with Temporal, written the way Temporal's docs and samples show
an LLM agent: the loop is a workflow (``support_workflow.py``), the model call (the official
``openai`` client, from ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``) and each tool are activities,
and a worker process runs them. The server keeps the workflow's event history, so a restarted
worker resumes the workflow: completed activities are replayed from their results, an activity
the dead worker was running is retried once its start-to-close timeout passes.

Its tools are the team's: ``send_email`` appends to its outbox (``outbox.jsonl``, fsynced) and
``create_order`` inserts into its own orders table (``orders.db``). No keys: an activity killed
after its effect and before the server recorded its completion is retried (Temporal's
activities are at-least-once), so the email goes out twice. ``fixed.py`` is the same agent
with keys. Nothing here knows crashmatrix: ``crashmatrix_factory.py`` hands the worker over.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from datetime import timedelta
from typing import Any

from openai import AsyncOpenAI
from support_workflow import SupportWorkflow
from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

INSTRUCTIONS = "You are a support assistant. Use the tools to do what the customer asks."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_email",
            "description": "Send an email.",
            "parameters": {
                "type": "object",
                "properties": {
                    "to": {"type": "string"},
                    "subject": {"type": "string"},
                    "body": {"type": "string"},
                },
                "required": ["to", "subject", "body"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "create_order",
            "description": "Place an order.",
            "parameters": {
                "type": "object",
                "properties": {"item": {"type": "string"}, "quantity": {"type": "integer"}},
                "required": ["item", "quantity"],
            },
        },
    },
]
OUTBOX = "outbox.jsonl"
ORDERS_DB = "orders.db"
TASK_QUEUE = "support-agent"


@activity.defn
async def ask_model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    reply = await AsyncOpenAI().chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "system", "content": INSTRUCTIONS}, *messages], tools=TOOLS
    )
    message: dict[str, Any] = reply.choices[0].message.model_dump(exclude_none=True)
    return message


@activity.defn
async def send_email(args: dict[str, Any]) -> str:
    with open(OUTBOX, "a", encoding="utf-8") as outbox:
        outbox.write(json.dumps({"to": args["to"], "subject": args["subject"], "body": args["body"]}) + "\n")
        outbox.flush()
        os.fsync(outbox.fileno())
    return f"Email sent to {args['to']}."


@activity.defn
async def create_order(args: dict[str, Any]) -> str:
    with sqlite3.connect(ORDERS_DB) as db:
        db.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT, quantity INTEGER)")
        order = db.execute(
            "INSERT INTO orders (item, quantity) VALUES (?, ?)", (args["item"], args["quantity"])
        ).lastrowid
    return f"Order {order} placed: {args['quantity']} x {args['item']}."


def worker(client: Client, task_queue: str = TASK_QUEUE, activities: list[Any] | None = None) -> Worker:
    """The team's worker. A dead worker's workflow task waits on its sticky queue 1 s before any
    other worker may take it (Temporal's default 10 s)."""
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[SupportWorkflow],
        activities=activities or [ask_model, send_email, create_order],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
    )


async def main() -> None:
    client = await Client.connect("localhost:7233")
    async with worker(client):
        messages: list[dict[str, Any]] = []
        for number in range(1, 1000):
            messages.append({"role": "user", "content": input("> ")})
            print(
                await client.execute_workflow(
                    SupportWorkflow.run, messages, id=f"turn-{number}", task_queue=TASK_QUEUE
                )
            )


if __name__ == "__main__":
    asyncio.run(main())
