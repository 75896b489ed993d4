"""inline-mailer: a REPL whose dispatch dict is written where it is used
(``{"send_mail": deliver}[name](**arguments)``) and whose mail tool answers in sentences:
"mail to ... queued", "no recipient given; nothing was sent" after a check, "mail not
queued: ..." from an except handler; a bad address raises (no Tool Result: the exception
propagates). A test agent for ``crashmatrix init``, written knowing nothing of crashmatrix.

Its recovery is naive: a saved tool call without a Tool Result runs again, then the turn goes
on (red at after_side_effect, two mails in its outbox)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from openai import OpenAI

CONVERSATION = Path(".inline/conversation.jsonl")
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


def deliver(recipient: str, title: str, text: str) -> str:
    if not recipient.strip():
        return "no recipient given; nothing was sent"
    if "@" not in recipient:
        raise ValueError(f"not an address: {recipient}")
    try:
        save(OUTBOX, {"to": recipient, "subject": title, "body": text})
    except OSError as error:
        return f"mail not queued: {error}"
    return f"mail to {recipient} queued"


def run_tool(call: dict[str, Any]) -> None:
    arguments = json.loads(call["function"]["arguments"])
    result = {"send_mail": deliver}[call["function"]["name"]](**arguments)
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
            text = input("> ")
        except EOFError:
            return
        save(CONVERSATION, {"role": "user", "content": text})
        think(client)


if __name__ == "__main__":
    main()
