"""A team's PydanticAI mailer made durable with DBOS: ``DBOSAgent`` around an agent with one
function tool, ``send_email``, whose send is a ``@DBOS.step`` of its own -- DBOSAgent runs
function tools inline in the run's workflow, so the team made the effect a step. The step
carries a key (the turn's workflow id and the model's call id, both the same when DBOS
recovers the run) and looks it up in the outbox before it sends: a step DBOS runs again after
a crash past the send finds its email and sends nothing. Its conversation is a SQLite table,
each run's new messages one row; each turn one workflow, ``turn-N``.

``build_twin``: the same agent, its step without the lookup (the docs' step): DBOS runs it
again when the kill came after the send and before the step's row committed.
"""

from __future__ import annotations

import json
import os
import sqlite3
import warnings
from typing import Any

from dbos import DBOS
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.models.openai import OpenAIChatModel

with warnings.catch_warnings():  # deprecated in 2.68 for DBOSDurability
    warnings.filterwarnings("ignore", message=".*DBOSAgent. is deprecated")
    from pydantic_ai.durable_exec.dbos import DBOSAgent


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


def _sent(key: str) -> bool:
    try:
        with open("outbox.jsonl", encoding="utf-8") as outbox:
            return any(json.loads(line).get("key") == key for line in outbox if line.strip())
    except FileNotFoundError:
        return False


def _send(to: str, subject: str, body: str, key: str) -> None:
    with open("outbox.jsonl", "a", encoding="utf-8") as outbox:
        outbox.write(json.dumps({"to": to, "subject": subject, "body": body, "key": key}) + "\n")
        outbox.flush()
        os.fsync(outbox.fileno())


@DBOS.step()
def send_keyed(to: str, subject: str, body: str, key: str) -> str:
    if not _sent(key):
        _send(to, subject, body, key)
    return f"Sent to {to}."


@DBOS.step()
def send_blind(to: str, subject: str, body: str, key: str) -> str:
    _send(to, subject, body, key)
    return f"Sent to {to}."


def _agent(name: str, step: Any) -> Any:
    agent: Agent[None, str] = Agent(OpenAIChatModel("gpt-4o-mini"), name=name)

    @agent.tool
    def send_email(ctx: RunContext[None], to: str, subject: str, body: str) -> str:
        """Send an email."""
        return str(step(to, subject, body, f"{DBOS.workflow_id}:{ctx.tool_call_id}"))

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*DBOSAgent. is deprecated")
        return DBOSAgent(agent)


MAILER = _agent("mailer", send_keyed)
TWIN = _agent("mailer_twin", send_blind)


def _configure(ctx: Any) -> None:
    DBOS(config={"name": "golden-mailer", "system_database_url": ctx.system_database_url})


def build(ctx: Any) -> Any:
    _configure(ctx)
    return MAILER, Store("chat.db")


def build_twin(ctx: Any) -> Any:
    _configure(ctx)
    return TWIN, Store("chat.db")
