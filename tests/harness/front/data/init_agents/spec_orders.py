"""spec-orders: a REPL whose OpenAI tool schemas are built by a comprehension over a list of
(name, description, properties) tuples, and whose dispatch is an ``if``/``elif`` on the
tool's name calling its functions. Its orders are rows of its own SQLite table; its tools
answer in sentences ("placed order 3", "order failed: ..." from an except handler). A test
agent for ``crashmatrix init``, written knowing nothing of crashmatrix.

Its recovery is naive: a saved tool call without a Tool Result runs again, then the turn goes
on (red at after_side_effect, two orders in its table)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from openai import OpenAI

CONVERSATION = Path(".spec/conversation.jsonl")
ORDERS = Path("orders.db")
SPECS = [
    (
        "order_supplies",
        "Order office supplies.",
        {"product": {"type": "string"}, "count": {"type": "integer"}},
    ),
    ("stock", "How many of a product are left.", {"product": {"type": "string"}}),
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(properties)},
        },
    }
    for name, description, properties in SPECS
]


def save(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")
        file.flush()
        os.fsync(file.fileno())


def place(product: str, count: int) -> str:
    try:
        with sqlite3.connect(ORDERS) as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, product TEXT, count INTEGER)"
            )
            number = db.execute(
                "INSERT INTO orders (product, count) VALUES (?, ?)", (product, count)
            ).lastrowid
    except sqlite3.Error as error:
        return f"order failed: {error}"
    return f"placed order {number}: {count} x {product}"


def count_left(product: str) -> str:
    return f"{product}: 12 left"


def run_tool(call: dict[str, Any]) -> None:
    name = call["function"]["name"]
    arguments = json.loads(call["function"]["arguments"])
    if name == "order_supplies":
        result = place(arguments["product"], arguments["count"])
    elif name == "stock":
        result = count_left(arguments["product"])
    else:
        result = f"unknown tool {name}"
    save(CONVERSATION, {"role": "tool", "tool_call_id": call["id"], "content": result})


def history() -> list[dict[str, Any]]:
    if not CONVERSATION.exists():
        return []
    return [json.loads(line) for line in CONVERSATION.read_text(encoding="utf-8").splitlines() if line]


def think(client: OpenAI) -> None:
    while True:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=history(), tools=TOOLS)  # type: ignore[arg-type]
        message = reply.choices[0].message
        calls = [c.model_dump(include={"id", "type", "function"}) for c in message.tool_calls or ()]
        save(
            CONVERSATION,
            {"role": "assistant", "content": message.content, **({"tool_calls": calls} if calls else {})},
        )
        if not calls:
            print(message.content)
            return
        for call in calls:
            run_tool(call)


def recover(client: OpenAI) -> None:
    """Naive: every saved call without a Tool Result runs again, then the turn goes on."""
    answered = {m["tool_call_id"] for m in history() if m["role"] == "tool"}
    pending = [c for m in history() for c in m.get("tool_calls") or () if c["id"] not in answered]
    for call in pending:
        run_tool(call)
    if pending:
        think(client)


def main() -> None:
    client = OpenAI(max_retries=0)
    recover(client)
    while True:
        try:
            text = input("orders> ")
        except EOFError:
            return
        save(CONVERSATION, {"role": "user", "content": text})
        think(client)


if __name__ == "__main__":
    main()
