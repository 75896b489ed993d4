"""repl-mailer: a REPL on stdin, its tools an OpenAI tool-schema list and a dispatch dict,
its conversation one JSONL file, its mail an outbox JSONL file (a test agent for
``crashmatrix init``: written as a team would, knowing nothing of crashmatrix).

Its mail tool has its own names: ``send_mail(recipient, title, text)``. Its recovery is
naive: a saved tool call without a Tool Result is run again, so a mail killed after it went
out goes out twice (the first true verdict init's adapter must give: red at
after_side_effect)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from openai import OpenAI

CONVERSATION = Path(os.environ.get("REPL_MAILER_CONVERSATION", ".mailer/conversation.jsonl"))
OUTBOX = Path("outbox.jsonl")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_mail",
            "description": "Send an email.",
            "parameters": {
                "type": "object",
                "required": ["recipient", "title", "text"],
                "properties": {
                    "recipient": {"type": "string"},
                    "title": {"type": "string"},
                    "text": {"type": "string"},
                },
            },
        },
    },
]


def save(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")
        file.flush()
        os.fsync(file.fileno())


def history() -> list[dict[str, Any]]:
    if not CONVERSATION.exists():
        return []
    lines = CONVERSATION.read_text(encoding="utf-8").split("\n")[:-1]
    return [json.loads(line) for line in lines if line.strip()]


def send_mail(recipient: str, title: str, text: str, call_id: str) -> dict[str, Any]:
    save(OUTBOX, {"to": recipient, "subject": title, "body": text, "call_id": call_id})
    return {"ok": True, "content": f"sent to {recipient}"}


HANDLERS = {"send_mail": send_mail}


def run_tool(call: dict[str, Any]) -> dict[str, Any]:
    handler = HANDLERS[call["function"]["name"]]
    return handler(**json.loads(call["function"]["arguments"]), call_id=call["id"])


def think(client: OpenAI) -> None:
    while True:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=history(), tools=TOOLS)  # type: ignore[arg-type]
        message = reply.choices[0].message
        calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in message.tool_calls or ()
        ]
        saved: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
        if calls:
            saved["tool_calls"] = calls
        save(CONVERSATION, saved)
        if not calls:
            print(message.content)
            return
        for call in calls:
            save(
                CONVERSATION,
                {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(run_tool(call))},
            )


def recover(client: OpenAI) -> None:
    """Naive: every saved call without a Tool Result runs again, whatever it already did."""
    messages = history()
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
    pending = [c for m in messages for c in m.get("tool_calls") or () if c["id"] not in answered]
    for call in pending:
        save(
            CONVERSATION, {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(run_tool(call))}
        )
    if pending:
        think(client)


def main() -> None:
    client = OpenAI(max_retries=0)
    recover(client)
    while True:
        try:
            text = input("> ")
        except EOFError:
            return
        if text.strip():
            save(CONVERSATION, {"role": "user", "content": text})
            think(client)


if __name__ == "__main__":
    main()
