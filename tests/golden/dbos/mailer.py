"""A team's DBOS-durable mailer: a workflow whose model call, a helper and its one tool are
``@DBOS.step``s, the model asked through the official ``openai`` client.

It is correct where DBOS is at-least-once: ``send_email`` keys each email by its workflow's and
step's ids (the same when DBOS re-runs the step after a crash) and looks the key up in its own
outbox before sending, so a step killed after the send and before its row committed sends
nothing the second time. Its ``greeting`` step (before every model call) and ``audit`` step
(between the reply and each tool's step) are no tool calls. Its twin (``MAILER_NO_KEY=1``:
``adapter_twin.yaml``) sends without the key, as DBOS's docs' examples do, and sends twice
after that crash.
"""

from __future__ import annotations

import json
import os
from typing import Any

from dbos import DBOS
from openai import OpenAI

OUTBOX = "outbox.jsonl"
SEND_EMAIL = {
    "type": "function",
    "function": {
        "name": "send_email",
        "description": "Send an email.",
        "parameters": {
            "type": "object",
            "properties": {name: {"type": "string"} for name in ("to", "subject", "body")},
            "required": ["to", "subject", "body"],
        },
    },
}


@DBOS.step()
def greeting() -> str:
    return "You are a mailer. Send what you are asked to."


@DBOS.step()
def audit(name: str) -> str:
    """A helper step between the model's reply and the tool's step: no tool call of its own."""
    return f"audited {name}"


@DBOS.step()
def ask(messages: list[dict[str, Any]]) -> dict[str, Any]:
    reply = OpenAI().chat.completions.create(model="m", messages=messages, tools=[SEND_EMAIL])
    message: dict[str, Any] = reply.choices[0].message.model_dump(exclude_none=True)
    return message


def _outbox_keys() -> set[str]:
    if not os.path.exists(OUTBOX):
        return set()
    keys = set()
    with open(OUTBOX, encoding="utf-8") as outbox:
        for line in outbox:
            try:
                keys.add(str(json.loads(line).get("key")))
            except ValueError:
                continue
    return keys


@DBOS.step()
def send_email(to: str, subject: str, body: str) -> str:
    key = f"{DBOS.workflow_id}:{DBOS.step_id}"
    if not os.environ.get("MAILER_NO_KEY") and key in _outbox_keys():
        return f"Already sent to {to}."
    with open(OUTBOX, "a", encoding="utf-8") as outbox:
        outbox.write(json.dumps({"to": to, "subject": subject, "body": body, "key": key}) + "\n")
        outbox.flush()
        os.fsync(outbox.fileno())
    return f"Sent to {to}."


@DBOS.workflow()
def mail_turn(messages: list[dict[str, Any]]) -> str:
    messages = list(messages)
    while True:
        system = {"role": "system", "content": greeting()}
        reply = ask([system, *messages])
        messages.append(reply)
        calls = reply.get("tool_calls") or []
        if not calls:
            return str(reply.get("content") or "")
        for call in calls:
            audit(call["function"]["name"])
            arguments = json.loads(call["function"]["arguments"])
            result = send_email(**arguments) if call["function"]["name"] == "send_email" else "no such tool"
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})


def build(ctx: Any) -> Any:
    DBOS(config={"name": "golden-mailer", "system_database_url": ctx.system_database_url})
    return mail_turn
