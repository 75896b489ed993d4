"""careful-mailer: repl_mailer.py (a REPL, its mail tool in a dispatch dict under its own
names, a JSONL conversation, an outbox JSONL file) with a recovery that looks in its outbox
before it sends again: the twin that must stay green where repl_mailer is red (a test agent
for ``crashmatrix init``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from openai import OpenAI

CONVERSATION = Path(os.environ.get("CAREFUL_MAILER_CONVERSATION", ".mailer/conversation.jsonl"))
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


def sent(call_id: str) -> bool:
    if not OUTBOX.exists():
        return False
    lines = OUTBOX.read_text(encoding="utf-8").split("\n")[:-1]
    return any(json.loads(line).get("call_id") == call_id for line in lines if line.strip())


def recover(client: OpenAI) -> None:
    """A saved call without a Tool Result whose mail is in the outbox went out (the line is
    the send): the model is told so, and it is never sent again. One not there is sent now."""
    messages = history()
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
    pending = [c for m in messages for c in m.get("tool_calls") or () if c["id"] not in answered]
    for call in pending:
        if sent(call["id"]):
            result = {"ok": True, "content": "sent before a restart (in the outbox); not sent again"}
        else:
            result = run_tool(call)
        save(CONVERSATION, {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
    messages = history()
    if messages and (messages[-1]["role"] != "assistant" or messages[-1].get("tool_calls")):
        think(client)  # the turn a crash cut short is finished before the next one is read


def drop_torn_tail() -> None:
    """A last line without its newline is one a killed process was writing: cut it off
    before anything is appended after it."""
    if not CONVERSATION.exists():
        return
    data = CONVERSATION.read_bytes()
    if data and not data.endswith(b"\n"):
        with open(CONVERSATION, "r+b") as file:
            file.truncate(data.rfind(b"\n") + 1)
            file.flush()
            os.fsync(file.fileno())


def main() -> None:
    client = OpenAI(max_retries=0)
    drop_torn_tail()
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
