"""The team's agent loop and its tools' schemas, shared by ``support_agent.py`` and ``fixed.py``
(plain Python: the DBOS steps and the workflow are each module's own)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

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


def run_turn(
    messages: list[dict[str, Any]],
    ask_model: Callable[[list[dict[str, Any]]], dict[str, Any]],
    tools: dict[str, Callable[..., str]],
) -> str:
    """The agent loop, run inside each module's workflow: ask the model, run the tools it asks for, again."""
    messages = list(messages)
    while True:
        reply = ask_model(messages)
        messages.append(reply)
        calls = reply.get("tool_calls") or []
        if not calls:
            return str(reply.get("content") or "")
        for call in calls:
            function = call["function"]
            try:
                result = tools[function["name"]](**json.loads(function["arguments"] or "{}"))
            except Exception as error:  # the model is told, as a Tool Result
                result = f"Error: {error}"
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
