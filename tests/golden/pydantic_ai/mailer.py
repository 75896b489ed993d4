"""A team's PydanticAI mailer that asks a person before it sends: one tool, ``send_email``
with ``requires_approval=True`` (the agent's output may be ``DeferredToolRequests``),
appending to its own outbox, an ``OpenAIChatModel`` from the environment, its conversation in
a SQLite table (each run's new messages one row). Its tool keeps a ledger of its own: a row
``running`` written before the send, ``done`` with the result after; a call found ``running``
after a restart may or may not have gone out, and is never sent again. ``build_twin`` is the
same agent with the tool PydanticAI's docs show, no ledger: the call the restarted app asks
again runs again after a crash past the send.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests, RunContext
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.models.openai import OpenAIChatModel


class Store:
    def __init__(self, path: str) -> None:
        self.path = path
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, message_list TEXT)")

    def add_messages(self, messages: bytes) -> None:
        with sqlite3.connect(self.path) as db:
            db.execute("INSERT INTO messages (message_list) VALUES (?)", (messages.decode(),))

    def get_messages(self) -> list[ModelMessage]:
        with sqlite3.connect(self.path) as db:
            rows = db.execute("SELECT message_list FROM messages ORDER BY id").fetchall()
        return [m for row in rows for m in ModelMessagesTypeAdapter.validate_json(row[0])]


def _send(to: str, subject: str, body: str) -> None:
    with open("outbox.jsonl", "a", encoding="utf-8") as outbox:
        outbox.write(json.dumps({"to": to, "subject": subject, "body": body}) + "\n")
        outbox.flush()
        os.fsync(outbox.fileno())


def mark(db: sqlite3.Connection, site: str, tool_call_id: str, status: str, result: str = "") -> str:
    db.execute("INSERT OR REPLACE INTO calls VALUES (?, ?, ?)", (site, status, result))
    return result


def send_email(ctx: RunContext[Any], to: str, subject: str, body: str) -> str:
    """Send an email."""
    turn = sum(1 for m in ctx.messages for p in m.parts if p.part_kind == "user-prompt")
    site = f"{turn}/{ctx.tool_call_id}"  # a provider's call_0 comes back in later turns
    db = sqlite3.connect("ledger.db", isolation_level=None)
    db.execute("CREATE TABLE IF NOT EXISTS calls (site TEXT PRIMARY KEY, status TEXT, result TEXT)")
    row = db.execute("SELECT status, result FROM calls WHERE site = ?", (site,)).fetchone()
    if row and row[0] == "done":
        return str(row[1])
    if row:
        return mark(
            db, site, str(ctx.tool_call_id), "done", f"Uncertain: the email to {to} may have gone out."
        )
    mark(db, site, str(ctx.tool_call_id), "running")
    _send(to, subject, body)
    return mark(db, site, str(ctx.tool_call_id), "done", f"Sent to {to}.")


def send_email_twin(to: str, subject: str, body: str) -> str:
    """Send an email."""
    _send(to, subject, body)
    return f"Sent to {to}."


def _agent() -> Agent[None, str | DeferredToolRequests]:
    return Agent(OpenAIChatModel("gpt-4o-mini"), output_type=[str, DeferredToolRequests])


def build(ctx: Any) -> Any:
    agent = _agent()
    agent.tool(requires_approval=True)(send_email)
    return agent, Store("chat.db")


def build_twin(ctx: Any) -> Any:
    agent = _agent()
    agent.tool_plain(requires_approval=True, name="send_email")(send_email_twin)
    return agent, Store("chat.db")
