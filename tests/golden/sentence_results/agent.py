"""sentence-mailer: a REPL whose mail tool answers in sentences, never JSON: "mail to ...
queued", "ALREADY SENT: ..." when its outbox already holds the call's mail, "mail not
queued: ..." from an except handler. Its recovery is careful: a saved call without a Tool
Result is run again, and the tool itself looks in the outbox first, so a mail killed after
it went out is never sent twice; then the turn a crash cut short is finished.

Read as ``results: auto`` its sentences were "error" (not JSON): every case red, "told error,
but it happened". ``SENTENCE_MAILER_BUG=resend`` plants the real bug: the outbox is not
looked at, the mail goes out again after a restart."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from openai import OpenAI

BUG = os.environ.get("SENTENCE_MAILER_BUG", "")
CONVERSATION = Path(".sentences/conversation.jsonl")
OUTBOX = Path("outbox.jsonl")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_email",
            "description": "Send an email.",
            "parameters": {
                "type": "object",
                "required": ["to", "subject", "body"],
                "properties": {
                    "to": {"type": "string"},
                    "subject": {"type": "string"},
                    "body": {"type": "string"},
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


def read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")[:-1]  # a torn last line is no record
    return [json.loads(line) for line in lines if line.strip()]


def send_email(to: str, subject: str, body: str, call_id: str) -> str:
    if BUG != "resend" and any(mail.get("call") == call_id for mail in read(OUTBOX)):
        return f"ALREADY SENT: the mail to {to} went out before a restart; not sent again"
    try:
        save(OUTBOX, {"to": to, "subject": subject, "body": body, "call": call_id})
    except OSError as error:
        return f"mail not queued: {error}"
    return f"mail to {to} queued"


def run_tool(call: dict[str, Any]) -> None:
    arguments = json.loads(call["function"]["arguments"])
    result = send_email(**arguments, call_id=call["id"])
    save(CONVERSATION, {"role": "tool", "tool_call_id": call["id"], "content": result})


def think(client: OpenAI) -> None:
    while True:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=read(CONVERSATION), tools=TOOLS)  # type: ignore[arg-type]
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
    """Every saved call without a Tool Result runs (its tool looks in the outbox first), and
    the turn a crash cut short is finished before the next one is read."""
    messages = read(CONVERSATION)
    answered = {m.get("tool_call_id") for m in messages if m["role"] == "tool"}
    for call in [c for m in messages for c in m.get("tool_calls") or () if c["id"] not in answered]:
        run_tool(call)
    messages = read(CONVERSATION)
    if messages and (messages[-1]["role"] != "assistant" or messages[-1].get("tool_calls")):
        think(client)


def drop_torn_tail() -> None:
    """A last line without its newline is one a killed process was writing: cut it off."""
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
