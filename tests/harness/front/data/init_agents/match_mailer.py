"""match-mailer: a REPL whose OpenAI tool schemas a helper builds over a list of
(name, description, parameter names) tuples (``[schema(*spec) for spec in SPECS]``) and whose
dispatch is a ``match`` on the tool's name returning what its function returns, sentences:
"mail to ... queued", "mail not queued: ..." from an except handler. A test agent for
``crashmatrix init``, written knowing nothing of crashmatrix.

Its recovery is naive: a saved tool call without a Tool Result runs again, then the turn goes
on (red at after_side_effect, two mails in its outbox)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from openai import OpenAI

CONVERSATION = Path(".match/conversation.jsonl")
OUTBOX = Path("outbox.jsonl")
SPECS = [
    ("send_mail", "Send an email.", ["recipient", "title", "text"]),
    ("list_mail", "List the mails sent.", []),
]


def schema(name: str, description: str, parameters: list[str]) -> dict[str, Any]:
    properties = {p: {"type": "string"} for p in parameters}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": parameters},
        },
    }


TOOLS = [schema(*spec) for spec in SPECS]


def save(path: Path, record: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")
        file.flush()
        os.fsync(file.fileno())


def deliver(recipient: str, title: str, text: str) -> str:
    try:
        save(OUTBOX, {"to": recipient, "subject": title, "body": text})
    except OSError as error:
        return f"mail not queued: {error}"
    return f"mail to {recipient} queued"


def listing() -> str:
    sent = OUTBOX.read_text(encoding="utf-8").splitlines() if OUTBOX.exists() else []
    return f"{len(sent)} mails sent: " + "; ".join(sent)


def execute(name: str, arguments: dict[str, Any]) -> str:
    match name:
        case "send_mail":
            return deliver(**arguments)
        case "list_mail":
            return listing()
        case _:
            return f"no tool {name}"


def run_tool(call: dict[str, Any]) -> None:
    result = execute(call["function"]["name"], json.loads(call["function"]["arguments"]))
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
