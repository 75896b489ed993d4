"""oneshot-cli: one process per message, the message in ``sys.argv`` (``python oneshot_cli.py
"mail alice"``), its conversation one JSONL file it reads back on each start, mail sent by
appending to an outbox JSONL file (a test agent for ``crashmatrix init``).

Its recovery is naive: a saved call without a Tool Result runs again when the next process
starts, so a mail killed after it went out goes out twice."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from openai import OpenAI

LOG = Path(os.environ.get("ONESHOT_LOG", ".oneshot/log.jsonl"))
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_email",
            "parameters": {
                "type": "object",
                "properties": {
                    "to": {"type": "string"},
                    "subject": {"type": "string"},
                    "body": {"type": "string"},
                },
            },
        },
    }
]


def log(record: dict[str, Any]) -> None:
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with open(LOG, "a", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")


def send_email(to: str, subject: str, body: str, call_id: str) -> dict[str, Any]:
    with open("outbox.jsonl", "a", encoding="utf-8") as file:
        file.write(json.dumps({"to": to, "subject": subject, "body": body, "call_id": call_id}) + "\n")
    return {"ok": True, "content": "sent"}


def answer(call: dict[str, Any]) -> None:
    result = send_email(**json.loads(call["function"]["arguments"]), call_id=call["id"])
    log({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})


def main() -> int:
    client = OpenAI(max_retries=0)
    history = [json.loads(line) for line in LOG.read_text().splitlines()] if LOG.exists() else []
    done = {m.get("tool_call_id") for m in history}
    for call in [c for m in history for c in m.get("tool_calls") or () if c["id"] not in done]:
        answer(call)
    if len(sys.argv) > 1 and sys.argv[1].strip():  # started with no message: recovery only
        log({"role": "user", "content": sys.argv[1]})
    while True:
        messages = [json.loads(line) for line in LOG.read_text().splitlines()]
        reply = (
            client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
            .choices[0]
            .message
        )  # type: ignore[arg-type]
        calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.function.name, "arguments": c.function.arguments},
            }
            for c in reply.tool_calls or ()
        ]
        log({"role": "assistant", "content": reply.content or "", **({"tool_calls": calls} if calls else {})})
        if not calls:
            print(reply.content)
            return 0
        for call in calls:
            answer(call)


if __name__ == "__main__":
    raise SystemExit(main())
