"""dispatch-mailer: chat-mailer (``../no_ledger/agent.py``) whose tools are looked up in a
dispatch dict built at import (a golden test agent for adapter rules that never fire).

``HANDLERS`` holds the tool functions themselves, as many agents do. A kind-2 adapter that
wraps ``send_email`` by its module attribute never sees a call: the agent calls the function
the dict holds, not the module's attribute. ``adapter.yaml`` does exactly that (the boundary
never fires, and crashmatrix must say so with the rule's line and the dict's name);
``adapter-fixed.yaml`` wraps ``dispatch``, which the agent calls by name.

The rest is chat-mailer as it was:

It knows nothing about crashmatrix. It talks to its model with the openai package (its own
default client) and keeps one JSONL file: its conversation, one chat message a line, each
written and fsynced before it goes on. No execution records, no statuses, no idempotency
keys: the assistant's tool call is saved before the tool runs, the Tool Result after.

Its tools are its own: ``send_email`` appends one line to ``outbox.jsonl`` (fsynced; the mail
relay picks lines up from there, two lines are two emails), each line naming the turn and
the tool call it answers; ``list_sent_emails`` reads that file.

Recovery, for a saved tool call with no Tool Result: it looks for the call's line in its
outbox. Found: the email went out before the restart, and the model is told so; it is never
sent again. Not found: nothing went out (the line is the send), so it is sent now. That is
the whole of its crash safety: the effect itself is the record.

``DISPATCH_AGENT_BUG=blind_resend`` (the twin crashmatrix's tests run): recovery runs the
call again without looking, and an email killed after it went out goes out twice.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from openai import OpenAI

BUG = os.environ.get("DISPATCH_AGENT_BUG", "")
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
    {
        "type": "function",
        "function": {
            "name": "list_sent_emails",
            "description": "The emails sent so far.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]


def append_line(path: Path, record: dict[str, Any]) -> None:
    """One JSON line, durable before returning (a new file's name too)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        file.flush()
        os.fsync(file.fileno())
    if created:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The complete lines of ``path``: a last piece without its newline is a line a dead
    process was writing, never read."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n")[:-1] if line.strip()]


def drop_torn_tail(path: Path) -> None:
    """Cut a torn last line off before anything is appended to the file."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as file:
            file.truncate(data.rfind(b"\n") + 1)
            file.flush()
            os.fsync(file.fileno())


# -- the agent's own tools -------------------------------------------------------------------


def send_email(to: str, subject: str, body: str, call_id: str, turn: int) -> dict[str, Any]:
    append_line(OUTBOX, {"to": to, "subject": subject, "body": body, "call": call_id, "turn": turn})
    return {"ok": True, "content": f"sent to {to}"}


def list_sent_emails() -> dict[str, Any]:
    sent = [{"to": line["to"], "subject": line["subject"]} for line in read_lines(OUTBOX)]
    return {"ok": True, "content": json.dumps(sent)}


def sent_for(call_id: str, turn: int) -> dict[str, Any] | None:
    """The outbox line a call of this turn wrote, if any."""
    return next((e for e in read_lines(OUTBOX) if e.get("call") == call_id and e.get("turn") == turn), None)


# The tools by name, built once at import: the dict holds the function objects themselves,
# so a later change of the module's attribute ``send_email`` is never seen through it.
HANDLERS = {
    "send_email": send_email,
    "list_sent_emails": list_sent_emails,
}


def dispatch(name: str, arguments: dict[str, Any], call_id: str, turn: int) -> dict[str, Any]:
    """The tool ``name`` of the model's call, from the dispatch dict."""
    handler = HANDLERS.get(name)
    if handler is None:
        return {"ok": False, "code": "UNKNOWN_TOOL", "content": f"no tool {name}"}
    if name == "send_email":
        return handler(arguments["to"], arguments["subject"], arguments["body"], call_id, turn)
    return handler()


# -- the loop ------------------------------------------------------------------------------------


class Agent:
    def __init__(self, conversation: Path, client: OpenAI, model: str) -> None:
        self.conversation = conversation
        self.client = client
        self.model = model

    def messages(self) -> list[dict[str, Any]]:
        return read_lines(self.conversation)

    def save(self, message: dict[str, Any]) -> None:
        append_line(self.conversation, message)

    def run(self, call: dict[str, Any], turn: int) -> dict[str, Any]:
        arguments = json.loads(call["function"]["arguments"] or "{}")
        return dispatch(call["function"]["name"], arguments, call["id"], turn)

    def answer(self, call: dict[str, Any], result: dict[str, Any]) -> None:
        self.save({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})

    def recover_call(self, call: dict[str, Any], turn: int) -> None:
        if BUG == "blind_resend" or call["function"]["name"] != "send_email":
            self.answer(call, self.run(call, turn))  # a read runs again; the bug sends again
            return
        line = sent_for(call["id"], turn)
        if line is None:
            self.answer(call, self.run(call, turn))  # the line is the send: none went out
            return
        self.answer(
            call,
            {"ok": True, "content": f"sent to {line['to']} before a restart (in the outbox); not sent again"},
        )

    def recover(self) -> None:
        """Every saved tool call without a Tool Result, then the turn. A call owns what follows
        its assistant message up to the next user message or the next reuse of its id."""
        messages = self.messages()
        turn = 0
        for index, message in enumerate(messages):
            if message["role"] == "user":
                turn += 1
            for call in message.get("tool_calls") or ():
                answered = False
                for later in messages[index + 1 :]:
                    if later["role"] == "user" or call["id"] in [
                        c["id"] for c in later.get("tool_calls") or ()
                    ]:
                        break
                    answered = answered or (
                        later["role"] == "tool" and later.get("tool_call_id") == call["id"]
                    )
                if not answered:
                    self.recover_call(call, turn)
        messages = self.messages()
        if messages and (messages[-1]["role"] != "assistant" or messages[-1].get("tool_calls")):
            self.loop()

    def loop(self) -> None:
        while True:
            reply = (
                self.client.chat.completions.create(
                    model=self.model,
                    messages=self.messages(),  # type: ignore[arg-type]
                    tools=TOOLS,  # type: ignore[arg-type]
                )
                .choices[0]
                .message
            )
            calls = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in reply.tool_calls or ()
            ]
            message: dict[str, Any] = {"role": "assistant", "content": reply.content or ""}
            if calls:
                message["tool_calls"] = calls
            self.save(message)
            if not calls:
                print(reply.content)
                return
            turn = sum(1 for m in self.messages() if m["role"] == "user")
            for call in calls:
                self.answer(call, self.run(call, turn))

    def turn(self, text: str) -> None:
        self.save({"role": "user", "content": text})
        self.loop()


def main() -> None:
    conversation = Path(os.environ.get("DISPATCH_MAILER_CONVERSATION", ".chat/conversation.jsonl"))
    agent = Agent(conversation, OpenAI(max_retries=0), os.environ.get("DISPATCH_MAILER_MODEL", "gpt-4o-mini"))
    drop_torn_tail(conversation)
    agent.recover()
    while True:
        try:
            text = input("> ")
        except EOFError:
            return
        if text.strip():
            agent.turn(text)


if __name__ == "__main__":
    main()
