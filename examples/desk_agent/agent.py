"""desk-agent: an office assistant that sends emails and places orders with its OWN tools.

It knows nothing about crashmatrix. It talks to its model with the openai package (its own
default client), keeps its session as one JSONL file in seed 000's format, and runs its two
tools itself, against its own world:

* send_email appends one line to ``outbox.jsonl`` (fsynced): the mail relay picks lines up
  from there. Nothing deduplicates: two lines are two emails.
* create_order inserts a row into its own SQLite database ``orders.db`` whose
  ``idempotency_key`` is UNIQUE: the same key never places a second order.

Recovery follows seed 000's table and seed 004's contracts. A call with a ledger line is
first compared with the arguments hash its execution recorded: a saved call someone changed
since is neither run nor replayed (ARGUMENTS_MISMATCH). A call left ``running`` is
marked ``unknown``; an order is placed again as a new execution under the SAME idempotency
key the runtime built (the database's UNIQUE key makes that safe: the first order is
returned if it exists); an email is never sent blindly again: the model is told
SIDE_EFFECT_UNCERTAIN.

``DESK_AGENT_BUG`` plants one bug (for crashmatrix's own tests; see its docs/adapters.md):
new_key_per_attempt, blind_retry_after_unknown, running_after_effect, retry_non_idempotent,
duplicate_tool_result.
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

BUG = os.environ.get("DESK_AGENT_BUG", "")
TERMINAL = ("rejected", "succeeded", "failed", "unknown")
REFUSED = {"ok": False, "code": "REJECTED", "content": "the user said no"}
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
            "name": "create_order",
            "description": "Place an order.",
            "parameters": {
                "type": "object",
                "required": ["item", "quantity"],
                "properties": {"item": {"type": "string"}, "quantity": {"type": "integer"}},
            },
        },
    },
]


def append_line(path: Path, record: dict[str, Any]) -> None:
    """One JSON line, durable before returning."""
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        file.flush()
        os.fsync(file.fileno())
    if created:  # a new file's name is durable only once its directory is synced
        sync_directory(path.parent)


def sync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def load_entries(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    # The last piece has no newline: empty, or a line a dead process was writing.
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n")[:-1] if line.strip()]


def drop_torn_tail(path: Path) -> None:
    """A last line without its newline is one a dead process was writing: cut it off before
    anything is appended, or the next line would be glued to it (and the file corrupt)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as file:
            file.truncate(data.rfind(b"\n") + 1)
            file.flush()
            os.fsync(file.fileno())


def arguments_sha256(arguments: dict[str, Any]) -> str:
    canonical = json.dumps(arguments, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# -- the agent's own tools -------------------------------------------------------------------


def send_email(workspace: Path, to: str, subject: str, body: str, call_id: str) -> dict[str, Any]:
    append_line(workspace / "outbox.jsonl", {"to": to, "subject": subject, "body": body, "call": call_id})
    return {"ok": True, "status": "succeeded", "sent_to": to}


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
    return {"ok": True, "status": "succeeded", "order": f"ord_{order_id}"}


def _scope_end(entries: list[dict[str, Any]], index: int, call_id: str) -> int:
    """Where the call made at ``index`` stops owning the session: the next user message, or
    the next assistant message that reuses its id."""
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

    def key_for(self, call: dict[str, Any], execution_id: str) -> str:
        """The runtime builds the key (seed 004): the business action is the tool call."""
        arguments = json.loads(call["function"]["arguments"] or "{}")
        # The turn is part of the action: providers reuse call ids (call_0) in every turn, and
        # the same request in a later turn is a new business action.
        parts = ["desk", str(call.get("turn", 0)), call["id"], arguments_sha256(arguments)[:16]]
        if BUG == "new_key_per_attempt":
            parts.append(execution_id)  # BUG: every attempt is a new business action
        return ":".join(parts)

    def ledger(self, call: dict[str, Any], execution_id: str, status: str, result: Any = None) -> None:
        arguments = json.loads(call["function"]["arguments"] or "{}")
        record: dict[str, Any] = {
            "type": "tool_execution",
            "execution_id": execution_id,
            "tool_call_id": call["id"],
            "status": status,
            "tool_name": call["function"]["name"],
            "idempotency_key": self.key_for(call, execution_id),
            "arguments_sha256": arguments_sha256(arguments),
        }
        if result is not None:
            record["result"] = result
        append_line(self.session, record)

    def publish(self, call: dict[str, Any], result: dict[str, Any]) -> None:
        message = {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)}
        append_line(self.session, {"type": "message", "message": message})

    def approve(self, call: dict[str, Any], *, again: bool) -> bool:
        word = "again " if again else ""
        return (
            input(f"Approve {word}{call['function']['name']} ({call['id']})? [y/n] ").strip().lower() == "y"
        )

    def effect(self, call: dict[str, Any], execution_id: str) -> dict[str, Any]:
        arguments = json.loads(call["function"]["arguments"] or "{}")
        if call["function"]["name"] == "send_email":
            return send_email(
                self.workspace, arguments["to"], arguments["subject"], arguments["body"], call["id"]
            )
        return create_order(
            self.workspace,
            arguments["item"],
            int(arguments["quantity"]),
            self.key_for(call, execution_id),
            call["id"],
        )

    def run_call(self, call: dict[str, Any], *, again: bool = False, acted: str = "") -> None:
        """Run a call as a new execution. ``acted``: an earlier execution that may have acted
        (closed unknown): if the user now refuses, the model is told that, not "rejected"."""
        execution_id = f"exec_{uuid.uuid4().hex[:12]}"
        if not self.approve(call, again=again):
            self.ledger(call, execution_id, "rejected")
            self.publish(call, self.uncertain(call, acted) if acted else REFUSED)
            return
        self.ledger(call, execution_id, "approved")
        if BUG == "running_after_effect":
            result = self.effect(call, execution_id)  # BUG: the effect before running is durable
            self.ledger(call, execution_id, "running")
        else:
            self.ledger(call, execution_id, "running")
            result = self.effect(call, execution_id)
        self.ledger(call, execution_id, "succeeded", result)
        self.publish(call, result)

    def uncertain(self, call: dict[str, Any], execution_id: str) -> dict[str, Any]:
        return {
            "ok": False,
            "code": "SIDE_EFFECT_UNCERTAIN",
            "execution_id": execution_id,
            "content": f"{call['function']['name']} may have happened; not retried: check first.",
            "metadata": {"retryable": False, "idempotency": "non_idempotent"},
        }

    def mismatch(self, call: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": False,
            "code": "ARGUMENTS_MISMATCH",
            "content": f"the saved {call['function']['name']} call changed after it was approved: not run",
            "metadata": {"retryable": False},
        }

    def refuse_changed(self, call: dict[str, Any], latest: dict[str, Any]) -> None:
        """The saved call is not what was approved (someone edited the session): run nothing,
        replay nothing. An open execution is closed under what it recorded (its hash and key,
        not the edited call's): approved never ran, so rejected; running may have acted, so
        unknown. A closed one keeps its status; only the model is told."""
        result = self.mismatch(call)
        if latest["status"] in ("approved", "running"):
            status = "rejected" if latest["status"] == "approved" else "unknown"
            closed = {k: latest[k] for k in ("type", "execution_id", "tool_call_id", "tool_name")}
            closed |= {k: latest[k] for k in ("idempotency_key", "arguments_sha256") if k in latest}
            append_line(self.session, {**closed, "status": status, "result": result})
        self.publish(call, result)

    def recover_call(self, call: dict[str, Any], history: list[dict[str, Any]]) -> None:
        latest = history[-1] if history else None
        name = call["function"]["name"]
        if latest is not None:
            arguments = json.loads(call["function"]["arguments"] or "{}")
            if latest.get("arguments_sha256") != arguments_sha256(arguments):
                self.refuse_changed(call, latest)
                return
        if latest is None or latest["status"] == "approved":
            self.run_call(call, again=latest is not None)  # nothing started: route it again
            return
        status, execution_id = latest["status"], latest["execution_id"]
        result = latest.get("result")
        if status == "running":
            # Seed 000: the attempt that may have acted is closed as unknown first, with what
            # the model will be told if nothing better can be found out.
            result = self.uncertain(call, execution_id)
            self.ledger(call, execution_id, "unknown", result)
            if BUG == "retry_non_idempotent":
                self.run_call(call, again=True)  # BUG: an email may go out twice
                return
        if status in ("running", "unknown"):
            if name == "create_order":
                # Keyed idempotency: a new attempt under the same key places at most one order.
                self.run_call(call, again=True, acted=execution_id)
                return
            if status == "unknown" and BUG == "blind_retry_after_unknown":
                self.run_call(call, again=True)  # BUG: unknown treated as "did not happen"
                return
        if status == "rejected":
            # Seed 000: a refusal's receipt is rebuilt from the ledger (it stores no result):
            # "uncertain" if an earlier attempt may have acted, else the plain refusal.
            acted = [e["execution_id"] for e in history if e["status"] == "unknown"]
            self.publish(call, self.uncertain(call, acted[-1]) if acted else REFUSED)
            return
        # A terminal status: its result is replayed from the ledger.
        self.publish(call, result or self.uncertain(call, execution_id))

    def recover(self) -> None:
        """Finish what a previous process left: every tool call without a result, then the turn.

        A call is a call SITE: the assistant message that made it, up to the next user message
        or the next assistant message reusing its id (providers reuse call_0 every turn)."""
        entries = load_entries(self.session)
        for index, entry in enumerate(entries):
            for call in (entry.get("message") or {}).get("tool_calls") or ():
                scope = entries[index + 1 : _scope_end(entries, index, call["id"])]
                answered = any((e.get("message") or {}).get("tool_call_id") == call["id"] for e in scope)
                history = [
                    e for e in scope if e.get("type") == "tool_execution" and e["tool_call_id"] == call["id"]
                ]
                if answered and BUG != "duplicate_tool_result":
                    continue
                if answered and not (history and history[-1]["status"] in TERMINAL):
                    continue
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
    session = Path(os.environ.get("DESK_AGENT_SESSION", ".desk/session.jsonl"))
    agent = Agent(
        session, workspace, OpenAI(max_retries=0), os.environ.get("DESK_AGENT_MODEL", "gpt-4o-mini")
    )
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
