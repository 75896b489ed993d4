"""double-mailer: a team's agent with a session file of its own, one chat message a line, that
sends email through the mail service over HTTP (a test agent for double resume, issue 32).

It knows nothing about crashmatrix: it reads $OPENAI_BASE_URL for its model, $MAILER_MAIL_URL
for mail (POST /emails, no key: every request is one more email) and $MAILER_SESSION for its
conversation. The assistant's tool call is saved (fsynced) before the email is sent, the Tool
Result after. Recovery: a saved call with no Tool Result was never sent (true where a double
resume starts: the call saved, or its request arrived and nothing ran), so it is sent now.

``MAILER_LEASE=1``: before it reads its session it takes an exclusive ``flock`` on
``<session>.lock``, held for its life; finding it held, it says so and exits 0 -- another
process is resuming this session. Without it (the bug), two processes started on one session
both send the pending email and both save its Tool Result.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import urllib.request
from pathlib import Path
from typing import Any

MODEL_URL = os.environ.get("OPENAI_BASE_URL", "").rstrip("/")
MAIL_URL = os.environ.get("MAILER_MAIL_URL", "").rstrip("/")
SESSION = Path(os.environ.get("MAILER_SESSION", ".mailer/conversation.jsonl"))
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
            },
        },
    }
]
_lease: list[int] = []  # the lock's descriptor, open for the life of the process


def append_line(record: dict[str, Any]) -> None:
    """One message, durable before returning."""
    SESSION.parent.mkdir(parents=True, exist_ok=True)
    with open(SESSION, "a", encoding="utf-8") as file:
        file.write(json.dumps(record, separators=(",", ":")) + "\n")
        file.flush()
        os.fsync(file.fileno())


def messages() -> list[dict[str, Any]]:
    if not SESSION.exists():
        return []
    return [json.loads(line) for line in SESSION.read_text(encoding="utf-8").split("\n")[:-1] if line]


def post(url: str, body: Any, headers: dict[str, str]) -> Any:
    data = json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **headers})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def send(call: dict[str, Any]) -> None:
    arguments = json.loads(call["function"]["arguments"] or "{}")
    headers = {"X-Tool-Call-Id": call["id"], "X-Tool-Name": "send_email"}
    post(f"{MAIL_URL}/emails", arguments, headers)
    append_line(
        {"role": "tool", "tool_call_id": call["id"], "content": json.dumps({"ok": True, "content": "sent"})}
    )


def loop() -> None:
    while True:
        body = {"model": "crashmatrix-scripted", "messages": messages(), "tools": TOOLS}
        reply = post(f"{MODEL_URL}/chat/completions", body, {"Authorization": "Bearer x"})
        message = reply["choices"][0]["message"]
        calls = message.get("tool_calls") or []
        saved: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if calls:
            saved["tool_calls"] = calls
        append_line(saved)
        if not calls:
            print(saved["content"])
            return
        for call in calls:
            send(call)


def recover() -> None:
    """Send every saved call that has no Tool Result, then go on if the turn is not over."""
    saved = messages()
    answered = {m.get("tool_call_id") for m in saved if m["role"] == "tool"}
    for message in saved:
        for call in message.get("tool_calls") or ():
            if call["id"] not in answered:
                send(call)
    saved = messages()
    if saved and (saved[-1]["role"] != "assistant" or saved[-1].get("tool_calls")):
        loop()


def take_lease() -> bool:
    SESSION.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(f"{SESSION}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    _lease.append(fd)
    return True


def main() -> int:
    if os.environ.get("MAILER_LEASE") == "1" and not take_lease():
        print(f"{SESSION}: another process is resuming this session; stopping", file=sys.stderr)
        return 0
    recover()
    while True:
        try:
            text = input("> ")
        except EOFError:
            return 0
        if text.strip():
            append_line({"role": "user", "content": text})
            loop()


if __name__ == "__main__":
    sys.exit(main())
