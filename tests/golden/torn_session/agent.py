"""torn-mailer: an assistant that sends emails and keeps a seed 000 ledger (a golden test agent).

It knows nothing about crashmatrix. It talks to its model with the openai package (its own
default client) and keeps one JSONL session: messages and tool-execution records, each line
written and fsynced before it goes on (``running`` before the send). Its tool is its own:
``send_email`` appends one line to ``outbox.jsonl`` (fsynced; the mail relay picks lines up
from there), naming the tool call it answers. It approves its own calls (nobody is asked).

Torn writes: a process killed in the middle of a line leaves that line without its newline.
On start it cuts such a tail off before appending anything (``drop_torn_tail``), so its next
line starts a line of its own and the file stays readable. Recovery, for a saved call
without a Tool Result, by its latest record: none -> run it; ``approved`` -> run the same
attempt; ``running`` -> the outbox decides (its line is there: sent, say so; not there:
``unknown``, then a new attempt); terminal -> publish the saved result.

``TORN_SESSION_BUG=glue`` (the twin crashmatrix's tests run): it never cuts a torn tail, so
its next line is glued to the torn half, and it reads its session skipping lines it cannot
parse (it carries on; the file is corrupt for anyone else).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

from openai import OpenAI

BUG = os.environ.get("TORN_SESSION_BUG", "")
OUTBOX = Path("outbox.jsonl")
TERMINAL = ("rejected", "succeeded", "failed", "unknown")
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
    }
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
    """The complete lines of ``path`` (a last piece without its newline is never read)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").split("\n")[:-1]:
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except ValueError:
            if BUG != "glue":
                raise  # a corrupt line in the middle: never guess around it
    return out


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


def send_email(to: str, subject: str, body: str, call_id: str) -> dict[str, Any]:
    append_line(OUTBOX, {"to": to, "subject": subject, "body": body, "call": call_id})
    return {"ok": True, "content": f"sent to {to}"}


def sent_for(call_id: str) -> dict[str, Any] | None:
    return next((line for line in read_lines(OUTBOX) if line.get("call") == call_id), None)


class Agent:
    def __init__(self, session: Path, client: OpenAI, model: str) -> None:
        self.session = session
        self.client = client
        self.model = model

    def entries(self) -> list[dict[str, Any]]:
        return read_lines(self.session)

    def messages(self) -> list[dict[str, Any]]:
        return [e["message"] for e in self.entries() if e.get("type") == "message"]

    def ledger(self, call: dict[str, Any], execution_id: str, status: str, result: Any = None) -> None:
        digest = hashlib.sha256(call["function"]["arguments"].encode("utf-8")).hexdigest()
        record: dict[str, Any] = {
            "type": "tool_execution",
            "execution_id": execution_id,
            "tool_call_id": call["id"],
            "status": status,
            "tool_name": call["function"]["name"],
            "arguments_sha256": digest,
        }
        if result is not None:
            record["result"] = result
        append_line(self.session, record)

    def publish(self, call: dict[str, Any], result: dict[str, Any]) -> None:
        message = {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)}
        append_line(self.session, {"type": "message", "message": message})

    def run_call(self, call: dict[str, Any], execution_id: str = "") -> None:
        execution_id = execution_id or f"exec_{uuid.uuid4().hex[:12]}"
        self.ledger(call, execution_id, "approved")
        self.ledger(call, execution_id, "running")
        arguments = json.loads(call["function"]["arguments"] or "{}")
        result = send_email(arguments["to"], arguments["subject"], arguments["body"], call["id"])
        self.ledger(call, execution_id, "succeeded", result)
        self.publish(call, result)

    def recover(self) -> None:
        """Every saved tool call without a Tool Result, by its latest record; then the turn."""
        entries = self.entries()
        answered = {e["message"].get("tool_call_id") for e in entries if e.get("type") == "message"}
        for entry in entries:
            for call in (entry.get("message") or {}).get("tool_calls") or ():
                if call["id"] in answered:
                    continue
                history = [
                    e
                    for e in entries
                    if e.get("type") == "tool_execution" and e["tool_call_id"] == call["id"]
                ]
                latest = history[-1] if history else None
                if latest is None:
                    self.run_call(call)
                elif latest["status"] == "approved":  # nothing started: the same attempt
                    self.run_call(call, latest["execution_id"])
                elif latest["status"] == "running":
                    line = sent_for(call["id"])
                    if line is not None:  # the outbox line is the send: it went out
                        result = {"ok": True, "content": f"sent to {line['to']} before a restart"}
                        self.ledger(call, latest["execution_id"], "succeeded", result)
                        self.publish(call, result)
                    else:
                        self.ledger(call, latest["execution_id"], "unknown")
                        self.run_call(call)
                elif latest["status"] in TERMINAL:
                    self.publish(call, latest.get("result") or {"ok": False, "code": "FAILED"})
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
            append_line(self.session, {"type": "message", "message": message})
            if not calls:
                print(reply.content)
                return
            for call in calls:
                self.run_call(call)

    def turn(self, text: str) -> None:
        append_line(self.session, {"type": "message", "message": {"role": "user", "content": text}})
        self.loop()


def main() -> None:
    session = Path(os.environ.get("TORN_MAILER_SESSION", ".mailer/session.jsonl"))
    agent = Agent(session, OpenAI(max_retries=0), os.environ.get("TORN_MAILER_MODEL", "gpt-4o-mini"))
    if BUG != "glue":
        drop_torn_tail(session)
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
