"""order-desk: a one-shot ordering assistant, one user message per process (a test agent).

It knows nothing about crashmatrix. Each start takes ONE user message, from where its
``ORDER_DESK_INPUT`` says (the shapes real command-line agents have):

* ``argv``: its first argument (``order-desk "Order 2 desks"``);
* ``env``: the variable ``ORDER_DESK_MESSAGE``;
* ``stdin``: its whole standard input (``echo "Order 2 desks" | order-desk``).

An empty message means "nothing new": it recovers and exits. It talks to the model and to an
order service over plain HTTP (standard library), and keeps one JSONL file, its conversation,
one chat message a line, each written and fsynced before it goes on: no ledger.

At every start, before the new message, it recovers what a killed start left: a saved tool
call without its Tool Result is ordered again under the SAME Idempotency-Key (derived from the
call), so the service replays an order that was placed and places one that was not; then the
unfinished turn is taken to its final answer. Only then is the new message appended.

``ORDER_DESK_BUG=blind_resend`` (the twin the tests run): recovery orders again with a fresh
key, so an order placed just before the kill is placed twice.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import desk_session

BUG = os.environ.get("ORDER_DESK_BUG", "")
ASK = os.environ.get("ORDER_DESK_ASK", "") == "1"  # ask before each order (on stdin)
# ``ORDER_DESK_STRICT=1``: an empty message is a usage error, as many command lines have it.
STRICT = os.environ.get("ORDER_DESK_STRICT", "") == "1"
CONVERSATION = Path(os.environ.get("ORDER_DESK_CONVERSATION", ".desk/conversation.jsonl"))
MODEL_URL = os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:1/v1").rstrip("/")
ORDERS_URL = os.environ.get("ORDER_DESK_ORDERS_URL", "http://127.0.0.1:1").rstrip("/")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "create_order",
            "description": "Place an order.",
            "parameters": {
                "type": "object",
                "required": ["item", "quantity"],
                "properties": {"item": {"type": "string"}, "quantity": {"type": "integer"}},
            },
        },
    }
]


def message() -> str:
    """The one user message of this start ("" for none)."""
    source = os.environ.get("ORDER_DESK_INPUT", "argv")
    if source == "argv":
        return sys.argv[1] if len(sys.argv) > 1 else ""
    if source == "env":
        return os.environ.get("ORDER_DESK_MESSAGE", "")
    return sys.stdin.read()


# ``ORDER_DESK_CONFIG``: a file it must find in its working directory (its own folder's
# desk.json, where it runs); its key prefix is the namespace of its Idempotency-Keys.
CONFIG = os.environ.get("ORDER_DESK_CONFIG", "")
if CONFIG and not Path(CONFIG).is_file():
    sys.exit(f"order-desk: no {CONFIG} in {Path.cwd()}: run me where my files are")
PREFIX = json.loads(Path(CONFIG).read_text(encoding="utf-8"))["key_prefix"] if CONFIG else "desk"

# Read once, as the script starts (a start is one message: a fresh process, or for a
# Python agent a fresh import; a module that stayed imported would keep the last message).
MESSAGE = message().strip()


def append(record: dict[str, Any]) -> None:
    CONVERSATION.parent.mkdir(parents=True, exist_ok=True)
    with open(CONVERSATION, "a", encoding="utf-8") as file:
        file.write(json.dumps(record, separators=(",", ":")) + "\n")
        file.flush()
        os.fsync(file.fileno())


def messages() -> list[dict[str, Any]]:
    """The complete lines: a last piece without its newline is one a killed start was writing."""
    if not CONVERSATION.exists():
        return []
    lines = CONVERSATION.read_text(encoding="utf-8").split("\n")[:-1]
    return [json.loads(line) for line in lines if line.strip()]


def drop_torn_tail() -> None:
    try:
        data = CONVERSATION.read_bytes()
    except FileNotFoundError:
        return
    if data and not data.endswith(b"\n"):
        with open(CONVERSATION, "r+b") as file:
            file.truncate(data.rfind(b"\n") + 1)
            file.flush()
            os.fsync(file.fileno())


def chat() -> dict[str, Any]:
    body = {"model": "order-desk", "messages": messages(), "tools": TOOLS}
    request = urllib.request.Request(
        f"{MODEL_URL}/chat/completions",
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json", "Authorization": "Bearer none"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return dict(json.load(response)["choices"][0]["message"])


def create_order(call: dict[str, Any], key: str) -> dict[str, Any]:
    """POST /orders under ``key``: the service replays the first answer for a repeated key."""
    arguments = json.loads(call["function"]["arguments"] or "{}")
    parts = urllib.parse.urlsplit(ORDERS_URL)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    try:
        connection.request(
            "POST",
            f"{parts.path}/orders",
            body=json.dumps(arguments).encode("utf-8"),
            headers={
                "Content-Type": "application/json",
                "Idempotency-Key": key,
                "X-Tool-Call-Id": call["id"],
            },
        )
        response = connection.getresponse()
        body = json.loads(response.read() or b"null")
    finally:
        connection.close()
    if 200 <= response.status < 300:
        return {"ok": True, "content": json.dumps(body)}
    return {"ok": False, "code": f"HTTP_{response.status}", "content": json.dumps(body)[:300]}


def answer(call: dict[str, Any], result: dict[str, Any]) -> None:
    append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})


def key_of(call: dict[str, Any]) -> str:
    return f"{PREFIX}-{call['id']}"


def loop() -> None:
    """Ask the model until it answers without a tool call."""
    while True:
        reply = chat()
        calls = [
            {"id": c["id"], "type": "function", "function": c["function"]}
            for c in reply.get("tool_calls") or ()
        ]
        saved: dict[str, Any] = {"role": "assistant", "content": reply.get("content") or ""}
        if calls:
            saved["tool_calls"] = calls
        append(saved)
        if not calls:
            print(reply.get("content") or "")
            return
        for call in calls:
            if ASK and not approved(call):
                answer(call, {"ok": False, "code": "DENIED", "content": "the user said no"})
                continue
            answer(call, create_order(call, key_of(call)))


def approved(call: dict[str, Any]) -> bool:
    """Asked on stdin, which stays the user's for approvals when the message came another way."""
    print(f"Approve {call['function']['name']}? [y/n] ", end="", flush=True)
    return sys.stdin.readline().strip().lower() == "y"


def recover() -> None:
    """Every saved tool call without a Tool Result is ordered again (the same key: the service
    says whether it was placed), then the unfinished turn is finished."""
    history = messages()
    for index, saved in enumerate(history):
        for call in saved.get("tool_calls") or ():
            later = history[index + 1 :]
            if not any(m.get("role") == "tool" and m.get("tool_call_id") == call["id"] for m in later):
                key = f"desk-{uuid.uuid4().hex}" if BUG == "blind_resend" else key_of(call)
                answer(call, create_order(call, key))
    history = messages()
    if history and (history[-1]["role"] != "assistant" or history[-1].get("tool_calls")):
        loop()


def main() -> int:
    if STRICT and not MESSAGE:
        print("usage: order-desk MESSAGE", file=sys.stderr)
        return 2
    desk_session.open_once(MESSAGE or "(no new message)")
    drop_torn_tail()
    recover()
    if MESSAGE:
        append({"role": "user", "content": MESSAGE})
        loop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
