"""order-bot: a function-call entry point (``chat(message)``, no main), its tools marked with
a ``@tool`` decorator, its conversation rows of a SQLite table, its orders rows of another
(a test agent for ``crashmatrix init``, written as a team would).

Its recovery is naive: a saved tool call without a Tool Result is run again, and the order
it placed before the crash is placed twice (red at after_side_effect)."""

from __future__ import annotations

import inspect
import json
import os
import sqlite3
from collections.abc import Callable
from typing import Any

from openai import OpenAI

DATABASE = os.environ.get("ORDER_BOT_DB", ".bot/state.db")
REGISTRY: dict[str, Callable[..., dict[str, Any]]] = {}


def tool(function: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    REGISTRY[function.__name__] = function
    return function


def connect() -> sqlite3.Connection:
    os.makedirs(os.path.dirname(DATABASE), exist_ok=True)
    db = sqlite3.connect(DATABASE, isolation_level=None)
    db.execute("CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    return db


def remember(message: dict[str, Any]) -> None:
    with connect() as db:
        db.execute("INSERT INTO messages (body) VALUES (?)", (json.dumps(message),))


def conversation() -> list[dict[str, Any]]:
    with connect() as db:
        return [json.loads(body) for (body,) in db.execute("SELECT body FROM messages ORDER BY id")]


@tool
def place_order(product: str, count: int) -> dict[str, Any]:
    """Order COUNT of PRODUCT."""
    db = sqlite3.connect("orders.db", isolation_level=None)
    db.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, product TEXT, count INTEGER)")
    db.execute("INSERT INTO orders (product, count) VALUES (?, ?)", (product, count))
    db.close()
    return {"ok": True, "content": f"ordered {count} x {product}"}


def schemas() -> list[dict[str, Any]]:
    kinds = {int: "integer", str: "string"}
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": function.__doc__ or name,
                "parameters": {
                    "type": "object",
                    "properties": {
                        p.name: {"type": kinds[p.annotation if isinstance(p.annotation, type) else str]}
                        for p in inspect.signature(function).parameters.values()
                    },
                },
            },
        }
        for name, function in REGISTRY.items()
    ]


def execute(call: dict[str, Any]) -> None:
    result = REGISTRY[call["function"]["name"]](**json.loads(call["function"]["arguments"]))
    remember({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})


def recover() -> None:
    """Naive: every saved call without a Tool Result runs again, whatever it did before."""
    history = conversation()
    answered = {m.get("tool_call_id") for m in history if m["role"] == "tool"}
    pending = [c for m in history for c in m.get("tool_calls") or () if c["id"] not in answered]
    for call in pending:
        execute(call)
    if pending:
        think(OpenAI(max_retries=0))


def chat(message: str) -> str:
    recover()
    remember({"role": "user", "content": message})
    return think(OpenAI(max_retries=0))


def think(client: OpenAI) -> str:
    while True:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=conversation(), tools=schemas())  # type: ignore[arg-type]
        answer = reply.choices[0].message
        calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in answer.tool_calls or ()
        ]
        saved: dict[str, Any] = {"role": "assistant", "content": answer.content or ""}
        if calls:
            saved["tool_calls"] = calls
        remember(saved)
        if not calls:
            return answer.content or ""
        for call in calls:
            execute(call)
