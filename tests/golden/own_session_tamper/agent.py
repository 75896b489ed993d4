"""A small correct kind-2 agent that keeps its own JSONL session in its own shape: every line is
``{"kind": ...}``; a chat message is the line itself (``kind: chat``, ``role``, ``content``,
``tool_calls`` with their arguments as the JSON string the model sent), a ledger step is
``kind: step`` with seed 004's field names (``callId``, ``stepId``, ``toolName``,
``inputHash``, ``idempotencyKey``). Its adapter maps that shape (``session:``).

Recovering a call that has a ledger step, it first compares the saved call's arguments with
the hash its steps recorded (``inputHash``): if someone changed the saved call since, it runs
nothing and replays nothing: ARGUMENTS_MISMATCH (an approved step is closed ``rejected``, a
running one ``unknown``, a finished one keeps its status).

``OWN_TAMPER_BUG=replay`` is its twin: it never compares, so recovering a finished call it
replays the stored result for the changed arguments, and an approved or running one is run
again with them.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from openai import OpenAI

BUG = os.environ.get("OWN_TAMPER_BUG", "")
TERMINAL = ("rejected", "succeeded", "failed", "unknown")
REFUSED = {"ok": False, "code": "REJECTED", "content": "the user said no"}


def _tool(name: str, properties: dict[str, str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {
                "type": "object",
                "required": list(properties),
                "properties": {key: {"type": kind} for key, kind in properties.items()},
            },
        },
    }


TOOLS = [
    _tool("write_file", {"path": "string", "content": "string"}),
    _tool("create_order", {"item": "string", "quantity": "integer"}),
]


def sync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append_line(path: Path, record: dict[str, Any]) -> None:
    """One JSON line, durable before returning (a new file's name too)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        file.flush()
        os.fsync(file.fileno())
    if created:
        sync_directory(path.parent)


def load_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n")[:-1] if line.strip()]


def drop_torn_tail(path: Path) -> None:
    """A last line without its newline is one a dead process was writing: cut it off."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as file:
            file.truncate(data.rfind(b"\n") + 1)
            file.flush()
            os.fsync(file.fileno())


def input_hash(arguments: dict[str, Any]) -> str:
    """Seed 000's canonical hash (sorted keys, compact JSON), so the harness can compare it."""
    canonical = json.dumps(arguments, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def arguments_of(call: dict[str, Any]) -> dict[str, Any]:
    value = json.loads(call["function"]["arguments"] or "{}")
    return value if isinstance(value, dict) else {}


# -- the agent's own tools -------------------------------------------------------------------


def write_file(workspace: Path, path: str, content: str, call_id: str) -> dict[str, Any]:
    target = workspace / path
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    with open(temporary, "wb") as file:
        file.write(content.encode("utf-8"))
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, target)
    sync_directory(target.parent)
    return {"ok": True, "content": f"wrote {path}"}


def create_order(workspace: Path, item: str, quantity: int, key: str, call_id: str) -> dict[str, Any]:
    with sqlite3.connect(workspace / "orders.db") as db:
        db.execute(
            "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, idempotency_key TEXT UNIQUE,"
            " item TEXT, quantity INTEGER, call TEXT)"
        )
        db.execute(
            "INSERT OR IGNORE INTO orders (idempotency_key, item, quantity, call) VALUES (?, ?, ?, ?)",
            (key, item, quantity, call_id),
        )
        (order_id,) = db.execute("SELECT id FROM orders WHERE idempotency_key = ?", (key,)).fetchone()
    return {"ok": True, "content": f"order ord_{order_id}"}


# -- the loop and its ledger -----------------------------------------------------------------


class Agent:
    def __init__(self, session: Path, workspace: Path, client: OpenAI, model: str) -> None:
        self.session = session
        self.workspace = workspace
        self.client = client
        self.model = model

    def messages(self) -> list[dict[str, Any]]:
        return [
            {key: value for key, value in line.items() if key != "kind"}
            for line in load_lines(self.session)
            if line.get("kind") == "chat"
        ]

    def key_for(self, call: dict[str, Any]) -> str:
        return f"own:{call.get('turn', 0)}:{call['id']}:{input_hash(arguments_of(call))[:16]}"

    def step(self, call: dict[str, Any], step_id: str, status: str, **extra: Any) -> None:
        record: dict[str, Any] = {
            "kind": "step",
            "callId": call["id"],
            "stepId": step_id,
            "status": status,
            "toolName": call["function"]["name"],
            "inputHash": input_hash(arguments_of(call)),
            "idempotencyKey": self.key_for(call),
            **{key: value for key, value in extra.items() if value is not None},
        }
        append_line(self.session, record)

    def chat(self, message: dict[str, Any]) -> None:
        append_line(self.session, {"kind": "chat", **message})

    def publish(self, call: dict[str, Any], result: dict[str, Any]) -> None:
        self.chat({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})

    def approve(self, call: dict[str, Any], *, again: bool) -> bool:
        word = "again " if again else ""
        return (
            input(f"Approve {word}{call['function']['name']} ({call['id']})? [y/n] ").strip().lower() == "y"
        )

    def effect(self, call: dict[str, Any]) -> dict[str, Any]:
        arguments = arguments_of(call)
        if call["function"]["name"] == "write_file":
            return write_file(self.workspace, arguments["path"], arguments["content"], call["id"])
        return create_order(
            self.workspace, arguments["item"], int(arguments["quantity"]), self.key_for(call), call["id"]
        )

    def run_call(self, call: dict[str, Any], *, again: bool = False) -> None:
        step_id = f"step_{uuid.uuid4().hex[:12]}"
        if not self.approve(call, again=again):
            self.step(call, step_id, "rejected")
            self.publish(call, REFUSED)
            return
        self.step(call, step_id, "approved")
        self.step(call, step_id, "running")
        result = self.effect(call)
        if again:
            result["recovery"] = "reapproval"
        self.step(call, step_id, "succeeded", result=result)
        self.publish(call, result)

    def close(self, call: dict[str, Any], step_id: str, status: str, result: dict[str, Any]) -> None:
        self.step(call, step_id, status, result=result)
        self.publish(call, result)

    def recover_call(self, call: dict[str, Any], history: list[dict[str, Any]]) -> None:
        latest = history[-1] if history else None
        if latest is None:
            self.run_call(call)  # saved, never approved: the saved call is what runs
            return
        if BUG != "replay" and latest["inputHash"] != input_hash(arguments_of(call)):
            mismatch = {
                "ok": False,
                "code": "ARGUMENTS_MISMATCH",
                "recovery": "conflict",
                "content": f"the saved {call['function']['name']} call changed since it was approved",
            }
            if latest["status"] in TERMINAL:
                self.publish(call, mismatch)  # the step is closed; only the model is told
            else:
                status = "rejected" if latest["status"] == "approved" else "unknown"
                self.close(call, latest["stepId"], status, mismatch)
            return
        if latest["status"] == "approved":
            self.run_call(call, again=True)
            return
        if latest["status"] == "running":
            # An order is reconciled by its key; a file written again holds the same bytes.
            self.close(call, latest["stepId"], "succeeded", {**self.effect(call), "recovery": "reconciled"})
            return
        if latest["status"] == "rejected":
            self.publish(call, REFUSED)
            return
        result = dict(latest.get("result") or {"ok": False, "code": "SIDE_EFFECT_UNCERTAIN"})
        result["recovery"] = "result_replayed"
        self.publish(call, result)

    def recover(self) -> None:
        lines = load_lines(self.session)
        for index, line in enumerate(lines):
            if line.get("kind") != "chat":
                continue
            for call in line.get("tool_calls") or ():
                later = lines[index + 1 :]
                if any(other.get("tool_call_id") == call["id"] for other in later):
                    continue  # answered
                history = [o for o in later if o.get("kind") == "step" and o["callId"] == call["id"]]
                turn = sum(1 for o in lines[:index] if o.get("role") == "user")
                self.recover_call({**call, "turn": turn}, history)
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
            self.chat(message)
            if not calls:
                print(reply.content)
                return
            turn = sum(1 for m in self.messages() if m["role"] == "user")
            for call in calls:
                self.run_call({**call, "turn": turn})

    def turn(self, text: str) -> None:
        self.chat({"role": "user", "content": text})
        self.loop()


def main() -> None:
    workspace = Path.cwd()
    session = Path(os.environ.get("OWN_TAMPER_SESSION", ".own/session.jsonl"))
    agent = Agent(session, workspace, OpenAI(max_retries=0), "crashmatrix-scripted")
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
