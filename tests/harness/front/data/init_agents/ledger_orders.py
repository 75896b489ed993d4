"""ledger-orders: a REPL reading ``sys.stdin.readline`` after writing its own prompt, a
JSONL session holding its conversation and a ledger (``approved``, ``running`` before the call,
``succeeded`` after), orders placed over HTTP at a URL from the environment (a test agent
for ``crashmatrix init``, written as a team would).

Its recovery is naive: a call whose ledger says running and nothing after is posted again,
with no idempotency key, so an order placed before the crash is placed twice (red at
after_side_effect: the order service holds two)."""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path
from typing import Any

from openai import OpenAI

SESSION = Path(os.environ.get("LEDGER_ORDERS_SESSION", ".orders/session.jsonl"))
ORDERS_URL = os.environ.get("LEDGER_ORDERS_URL", "http://localhost:8001").rstrip("/")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "create_order",
            "description": "Order ITEM.",
            "parameters": {
                "type": "object",
                "properties": {"item": {"type": "string"}, "quantity": {"type": "integer"}},
            },
        },
    }
]


def append(record: dict[str, Any]) -> None:
    SESSION.parent.mkdir(parents=True, exist_ok=True)
    with SESSION.open("a", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")
        file.flush()
        os.fsync(file.fileno())


def records() -> list[dict[str, Any]]:
    if not SESSION.exists():
        return []
    return [json.loads(line) for line in SESSION.read_text(encoding="utf-8").split("\n")[:-1] if line]


def create_order(item: str, quantity: int) -> dict[str, Any]:
    body = json.dumps({"item": item, "quantity": quantity}).encode()
    request = urllib.request.Request(
        f"{ORDERS_URL}/orders", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return {"ok": True, "content": response.read().decode()}


def execute(call: dict[str, Any]) -> None:
    append({"type": "tool_execution", "tool_call_id": call["id"], "status": "approved"})  # no one asks
    append({"type": "tool_execution", "tool_call_id": call["id"], "status": "running"})
    result = create_order(**json.loads(call["function"]["arguments"]))
    append({"type": "tool_execution", "tool_call_id": call["id"], "status": "succeeded"})
    append(
        {
            "type": "message",
            "message": {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)},
        }
    )


def think(client: OpenAI) -> None:
    while True:
        history = [r["message"] for r in records() if r["type"] == "message"]
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=history, tools=TOOLS)  # type: ignore[arg-type]
        answer = reply.choices[0].message
        calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in answer.tool_calls or ()
        ]
        message: dict[str, Any] = {"role": "assistant", "content": answer.content or ""}
        if calls:
            message["tool_calls"] = calls
        append({"type": "message", "message": message})
        if not calls:
            print(answer.content)
            return
        for call in calls:
            execute(call)


def recover(client: OpenAI) -> None:
    answered = {r["message"].get("tool_call_id") for r in records() if r["type"] == "message"}
    pending = [
        c
        for r in records()
        if r["type"] == "message"
        for c in r["message"].get("tool_calls") or ()
        if c["id"] not in answered
    ]
    for call in pending:
        execute(call)  # naive: posted again, whatever the ledger says
    if pending:
        think(client)


def main() -> None:
    client = OpenAI(max_retries=0)
    recover(client)
    while True:
        sys.stdout.write("orders> ")
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            return
        if line.strip():
            append({"type": "message", "message": {"role": "user", "content": line.strip()}})
            think(client)


if __name__ == "__main__":
    main()
