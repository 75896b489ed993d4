"""mail-checker: sends an email, then reads its outbox to confirm it (a golden test agent).

It knows nothing about crashmatrix. It talks to its model with the openai package and keeps
one JSONL file, its conversation, each message written and fsynced before it goes on; no
ledger. Two tools of two idempotency classes: ``send_email`` appends one line to
``outbox.jsonl`` (a line is an email; it names the turn and the tool call it answers), and
``list_sent_emails`` reads that file and changes nothing.

Recovery, for a saved tool call with no Tool Result: a read runs again (it is read-only);
an email looks for its line in the outbox first -- found, it went out before the restart
and the model is told so, never sent again; not found, nothing went out and it is sent now.

Its twins (``MAIL_CHECKER_BUG``), each a bug of send_email's recovery only, so only
send_email's rows may go red: ``blind_resend`` sends again without looking (an email killed
after it went out goes out twice); ``forget_sent`` answers an email it finds sent with no
Tool Result at all and closes the turn (a call left unanswered: "the turn finished" breaks,
a question asked of every class).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from openai import OpenAI

BUG = os.environ.get("MAIL_CHECKER_BUG", "")
OUTBOX = Path("outbox.jsonl")
_TEXT = {"type": "string"}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_email",
            "description": "Send an email.",
            "parameters": {
                "type": "object",
                "required": ["to", "subject", "body"],
                "properties": {"to": _TEXT, "subject": _TEXT, "body": _TEXT},
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
    """One JSON line, durable before returning (a new file's directory entry too)."""
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
    """Complete lines only: a last piece without its newline was being written by a dead
    process."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n")[:-1] if line.strip()]


def drop_torn_tail(path: Path) -> None:
    """Cut a torn last line off before anything is appended after it."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as file:
            file.truncate(data.rfind(b"\n") + 1)
            file.flush()
            os.fsync(file.fileno())


def send_email(to: str, subject: str, body: str, call_id: str, turn: int) -> dict[str, Any]:
    append_line(OUTBOX, {"to": to, "subject": subject, "body": body, "call": call_id, "turn": turn})
    return {"ok": True, "content": f"sent to {to}"}


def list_sent_emails(call_id: str) -> dict[str, Any]:
    """The emails sent so far (``call_id``: which call reads, for its log line)."""
    sent = [{"to": line["to"], "subject": line["subject"]} for line in read_lines(OUTBOX)]
    return {"ok": True, "content": json.dumps(sent)}


class Agent:
    def __init__(self, conversation: Path, client: OpenAI, model: str) -> None:
        self.conversation = conversation
        self.client = client
        self.model = model

    def messages(self) -> list[dict[str, Any]]:
        return read_lines(self.conversation)

    def run(self, call: dict[str, Any], turn: int) -> dict[str, Any]:
        name = call["function"]["name"]
        arguments = json.loads(call["function"]["arguments"] or "{}")
        if name == "send_email":
            return send_email(arguments["to"], arguments["subject"], arguments["body"], call["id"], turn)
        if name == "list_sent_emails":
            return list_sent_emails(call["id"])
        return {"ok": False, "code": "UNKNOWN_TOOL", "content": f"no tool {name}"}

    def answer(self, call: dict[str, Any], result: dict[str, Any]) -> None:
        append_line(
            self.conversation, {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)}
        )

    def recover_call(self, call: dict[str, Any], turn: int) -> None:
        if call["function"]["name"] != "send_email" or BUG == "blind_resend":
            self.answer(call, self.run(call, turn))
            return
        line = next(
            (e for e in read_lines(OUTBOX) if e.get("call") == call["id"] and e.get("turn") == turn), None
        )
        if line is None:
            self.answer(call, self.run(call, turn))  # the line is the send: none went out
            return
        if BUG == "forget_sent":
            # The twin's second bug: an email found sent gets no Tool Result, and the turn is
            # closed with a final answer as if nothing were pending.
            append_line(self.conversation, {"role": "assistant", "content": "Sent."})
            return
        self.answer(call, {"ok": True, "content": f"sent to {line['to']} before a restart; not sent again"})

    def recover(self) -> None:
        """Each saved tool call without a Tool Result, then the rest of the turn."""
        messages = self.messages()
        turn = 0
        for index, message in enumerate(messages):
            turn += message["role"] == "user"
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
            append_line(self.conversation, message)
            if not calls:
                print(reply.content)
                return
            turn = sum(1 for m in self.messages() if m["role"] == "user")
            for call in calls:
                self.answer(call, self.run(call, turn))

    def turn(self, text: str) -> None:
        append_line(self.conversation, {"role": "user", "content": text})
        self.loop()


def main() -> None:
    conversation = Path(os.environ.get("MAIL_CHECKER_CONVERSATION", ".chat/conversation.jsonl"))
    agent = Agent(conversation, OpenAI(max_retries=0), os.environ.get("MAIL_CHECKER_MODEL", "gpt-4o-mini"))
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
