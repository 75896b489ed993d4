"""A small correct kind-2 agent with its own world: it writes files, sends mail through its
own outbox (JSONL) and places orders in its own SQLite database, and recovers from a crash
by checking that world before acting again.

* write_file writes the file atomically (temporary file, fsync, rename, fsync of the
  directory). Its ``running`` line carries the file's hash before the write (``base``) and
  the hash it will write (``after``). Recovering a write left ``running``: the file holds
  ``after`` -> already applied; it holds ``base`` -> written again; anything else -> someone
  else changed it: CONFLICT, the file is left alone.
* send_email appends one line to ``outbox.jsonl`` (fsynced); a send left ``running`` is
  SIDE_EFFECT_UNCERTAIN, never sent blindly again.
* create_order inserts a row keyed by an idempotency key (UNIQUE) in ``orders.db``; a retry
  under the same key places no second order.
* run_command runs ``rm -rf <path>`` only (anything else is refused): a deletion, which its
  adapter's file probe sees as the file going. Left ``running``, it is never run again:
  SIDE_EFFECT_UNCERTAIN.

``HARNESS_WRITES_BUG=blind_overwrite`` is its twin: recovering a write left ``running``, it
writes the file again whatever it holds now (a colleague's edit between lives is lost).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from openai import OpenAI

BUG = os.environ.get("HARNESS_WRITES_BUG", "")
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
    _tool("send_email", {"to": "string", "subject": "string", "body": "string"}),
    _tool("create_order", {"item": "string", "quantity": "integer"}),
    _tool("run_command", {"command": "string"}),
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


def load_entries(path: Path) -> list[dict[str, Any]]:
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


def sha256(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def file_sha(path: Path) -> str | None:
    try:
        return sha256(path.read_bytes())
    except FileNotFoundError:
        return None


def arguments_sha256(arguments: dict[str, Any]) -> str:
    canonical = json.dumps(arguments, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


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
    return {"ok": True, "status": "succeeded", "content": f"wrote {path}"}


def send_email(workspace: Path, to: str, subject: str, body: str, call_id: str) -> dict[str, Any]:
    append_line(workspace / "outbox.jsonl", {"to": to, "subject": subject, "body": body, "call": call_id})
    return {"ok": True, "status": "succeeded", "content": f"sent to {to}"}


def _orders(workspace: Path) -> sqlite3.Connection:
    db = sqlite3.connect(workspace / "orders.db")
    db.execute(
        "CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, idempotency_key TEXT UNIQUE,"
        " item TEXT, quantity INTEGER, call TEXT)"
    )
    return db


def create_order(workspace: Path, item: str, quantity: int, key: str, call_id: str) -> dict[str, Any]:
    with _orders(workspace) as db:
        db.execute(
            "INSERT OR IGNORE INTO orders (idempotency_key, item, quantity, call) VALUES (?, ?, ?, ?)",
            (key, item, quantity, call_id),
        )
        (order_id,) = db.execute("SELECT id FROM orders WHERE idempotency_key = ?", (key,)).fetchone()
    return {"ok": True, "status": "succeeded", "content": f"order ord_{order_id}"}


def run_command(workspace: Path, command: str, call_id: str) -> dict[str, Any]:
    words = shlex.split(command)
    if len(words) != 3 or words[:2] != ["rm", "-rf"] or words[2].startswith(("/", "..")):
        return {"ok": False, "code": "UNSUPPORTED", "content": f"it runs rm -rf only, not {command!r}"}
    target = workspace / words[2]
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.exists() or target.is_symlink():
        target.unlink()
    sync_directory(target.parent)  # the removal is durable once its directory is synced
    return {"ok": True, "status": "succeeded", "content": f"removed {words[2]}"}


def _scope_end(entries: list[dict[str, Any]], index: int, call_id: str) -> int:
    for j in range(index + 1, len(entries)):
        message = entries[j].get("message") or {}
        if message.get("role") == "user" or call_id in [c["id"] for c in message.get("tool_calls") or ()]:
            return j
    return len(entries)


# -- the loop and its ledger -----------------------------------------------------------------


class Agent:
    def __init__(self, session: Path, workspace: Path, client: OpenAI, model: str) -> None:
        self.session = session
        self.workspace = workspace
        self.client = client
        self.model = model

    def messages(self) -> list[dict[str, Any]]:
        return [e["message"] for e in load_entries(self.session) if e.get("type") == "message"]

    def key_for(self, call: dict[str, Any]) -> str:
        arguments = json.loads(call["function"]["arguments"] or "{}")
        return ":".join(["golden", str(call.get("turn", 0)), call["id"], arguments_sha256(arguments)[:16]])

    def ledger(self, call: dict[str, Any], execution_id: str, status: str, **extra: Any) -> None:
        arguments = json.loads(call["function"]["arguments"] or "{}")
        record: dict[str, Any] = {
            "type": "tool_execution",
            "execution_id": execution_id,
            "tool_call_id": call["id"],
            "status": status,
            "tool_name": call["function"]["name"],
            "idempotency_key": self.key_for(call),
            "arguments_sha256": arguments_sha256(arguments),
            **{key: value for key, value in extra.items() if value is not None},
        }
        append_line(self.session, record)

    def publish(self, call: dict[str, Any], result: dict[str, Any]) -> None:
        message = {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)}
        append_line(self.session, {"type": "message", "message": message})

    def approve(self, call: dict[str, Any], *, again: bool) -> bool:
        word = "again " if again else ""
        return (
            input(f"Approve {word}{call['function']['name']} ({call['id']})? [y/n] ").strip().lower() == "y"
        )

    def effect(self, call: dict[str, Any]) -> dict[str, Any]:
        arguments = json.loads(call["function"]["arguments"] or "{}")
        name = call["function"]["name"]
        if name == "write_file":
            return write_file(self.workspace, arguments["path"], arguments["content"], call["id"])
        if name == "send_email":
            return send_email(
                self.workspace, arguments["to"], arguments["subject"], arguments["body"], call["id"]
            )
        if name == "run_command":
            return run_command(self.workspace, arguments["command"], call["id"])
        return create_order(
            self.workspace, arguments["item"], int(arguments["quantity"]), self.key_for(call), call["id"]
        )

    def planned(self, call: dict[str, Any]) -> dict[str, Any]:
        """What a write's running line records: the file's hash now and the one it will write."""
        if call["function"]["name"] != "write_file":
            return {}
        arguments = json.loads(call["function"]["arguments"] or "{}")
        return {
            "base_sha256": file_sha(self.workspace / arguments["path"]),
            "after_sha256": sha256(arguments["content"].encode("utf-8")),
        }

    def run_call(self, call: dict[str, Any], *, again: bool = False) -> None:
        execution_id = f"exec_{uuid.uuid4().hex[:12]}"
        if not self.approve(call, again=again):
            self.ledger(call, execution_id, "rejected")
            self.publish(call, REFUSED)
            return
        self.ledger(call, execution_id, "approved")
        self.ledger(call, execution_id, "running", **self.planned(call))
        result = self.effect(call)
        if again:
            result["recovery"] = "reapproval"
        self.ledger(call, execution_id, "succeeded", result=result)
        self.publish(call, result)

    def close(self, call: dict[str, Any], execution_id: str, status: str, result: dict[str, Any]) -> None:
        self.ledger(call, execution_id, status, result=result)
        self.publish(call, result)

    def recover_running(self, call: dict[str, Any], latest: dict[str, Any]) -> None:
        """A call left running: find out from the world what happened, never act blindly."""
        name, execution_id = call["function"]["name"], latest["execution_id"]
        arguments = json.loads(call["function"]["arguments"] or "{}")
        if name == "write_file":
            now = file_sha(self.workspace / arguments["path"])
            if now == latest.get("after_sha256"):
                result = {"ok": True, "status": "succeeded", "recovery": "already_applied"}
                self.close(call, execution_id, "succeeded", result)
            elif now == latest.get("base_sha256") or BUG == "blind_overwrite":
                result = {**self.effect(call), "recovery": "reapplied"}
                self.close(call, execution_id, "succeeded", result)
            else:
                result = {
                    "ok": False,
                    "code": "CONFLICT",
                    "recovery": "conflict",
                    "content": f"{arguments['path']} changed since the write began; left as it is",
                }
                self.close(call, execution_id, "unknown", result)
            return
        if name == "run_command":
            result = {
                "ok": False,
                "code": "SIDE_EFFECT_UNCERTAIN",
                "recovery": "side_effect_uncertain",
                "content": "the command may have run; not run again",
            }
            self.close(call, execution_id, "unknown", result)
            return
        if name == "send_email":
            # Its line in the outbox says it went; but the suite's contract for an email
            # left running is to surface the uncertainty, never to resend or claim it.
            result = {
                "ok": False,
                "code": "SIDE_EFFECT_UNCERTAIN",
                "recovery": "side_effect_uncertain",
                "content": "the email may have gone out; not sent again",
            }
            self.close(call, execution_id, "unknown", result)
            return
        # An order is reconciled by its key: placing it again under the same key is safe.
        self.close(call, execution_id, "succeeded", {**self.effect(call), "recovery": "reconciled"})

    def recover_call(self, call: dict[str, Any], history: list[dict[str, Any]]) -> None:
        latest = history[-1] if history else None
        if latest is None or latest["status"] == "approved":
            self.run_call(call, again=latest is not None)
            return
        if latest["status"] == "running":
            self.recover_running(call, latest)
            return
        if latest["status"] == "rejected":
            self.publish(call, REFUSED)
            return
        result = dict(latest.get("result") or {"ok": False, "code": "SIDE_EFFECT_UNCERTAIN"})
        result["recovery"] = "result_replayed"
        self.publish(call, result)

    def recover(self) -> None:
        entries = load_entries(self.session)
        for index, entry in enumerate(entries):
            for call in (entry.get("message") or {}).get("tool_calls") or ():
                scope = entries[index + 1 : _scope_end(entries, index, call["id"])]
                answered = any((e.get("message") or {}).get("tool_call_id") == call["id"] for e in scope)
                if answered:
                    continue
                history = [
                    e for e in scope if e.get("type") == "tool_execution" and e["tool_call_id"] == call["id"]
                ]
                turn = sum(1 for e in entries[:index] if (e.get("message") or {}).get("role") == "user")
                self.recover_call({**call, "turn": turn}, history)
        messages = self.messages()
        if messages and (messages[-1]["role"] != "assistant" or messages[-1].get("tool_calls")):
            self.loop()

    def loop(self) -> None:
        while True:
            reply = (
                self.client.chat.completions.create(
                    model=self.model,
                    messages=self.messages(),
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
            turn = sum(1 for m in self.messages() if m["role"] == "user")
            for call in calls:
                self.run_call({**call, "turn": turn})

    def turn(self, text: str) -> None:
        append_line(self.session, {"type": "message", "message": {"role": "user", "content": text}})
        self.loop()


def main() -> None:
    workspace = Path.cwd()
    session = Path(os.environ.get("GOLDEN_SESSION", ".golden/session.jsonl"))
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
