"""shop-agent: the agent of docs/five-minutes.md, written as a newcomer writes one, knowing
nothing of crashmatrix: the official openai client, the conversation in a JSONL file, two
tools writing their own world (an outbox file and an orders table), a REPL on stdin.

Its recovery is naive: at start, a saved tool call without a Tool Result is run again. Killed
after an email went out but before its result was saved, it sends that email twice -- the bug
the five minutes end with, red in the matrix, counted in ITS outbox."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from openai import OpenAI

CONVERSATION = Path("shop/conversation.jsonl")
OUTBOX = Path("shop/outbox.jsonl")
ORDERS = Path("shop/orders.db")
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


def append(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")
        file.flush()
        os.fsync(file.fileno())


def send_email(to: str, subject: str, body: str) -> str:
    append(OUTBOX, {"to": to, "subject": subject, "body": body})
    return f"sent to {to}"


def create_order(item: str, quantity: int) -> str:
    ORDERS.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(ORDERS) as db:
        db.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT, quantity INTEGER)")
        order = db.execute("INSERT INTO orders (item, quantity) VALUES (?, ?)", (item, quantity)).lastrowid
    return f"order {order} placed"


def run_tool(call: dict[str, Any]) -> None:
    arguments = json.loads(call["function"]["arguments"])
    tool = {"send_email": send_email, "create_order": create_order}[call["function"]["name"]]
    append(CONVERSATION, {"role": "tool", "tool_call_id": call["id"], "content": tool(**arguments)})


def history() -> list[dict[str, Any]]:
    if not CONVERSATION.exists():
        return []
    return [json.loads(line) for line in CONVERSATION.read_text(encoding="utf-8").splitlines() if line]


def recover() -> None:
    """Naive: every saved tool call without a result runs (again)."""
    answered = {m["tool_call_id"] for m in history() if m["role"] == "tool"}
    for message in history():
        for call in message.get("tool_calls") or ():
            if call["id"] not in answered:
                run_tool(call)


def answer(client: OpenAI) -> None:
    while True:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=history(), tools=TOOLS)  # type: ignore[arg-type]
        message = reply.choices[0].message
        calls = [c.model_dump(include={"id", "type", "function"}) for c in message.tool_calls or ()]
        append(
            CONVERSATION,
            {"role": "assistant", "content": message.content, **({"tool_calls": calls} if calls else {})},
        )
        if not calls:
            print(message.content)
            return
        for call in calls:
            run_tool(call)


def main() -> None:
    client = OpenAI()
    recover()
    while True:
        try:
            text = input("> ")
        except EOFError:
            return
        append(CONVERSATION, {"role": "user", "content": text})
        answer(client)


if __name__ == "__main__":
    main()
