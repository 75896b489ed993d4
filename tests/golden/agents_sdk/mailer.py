"""golden: an OpenAI Agents SDK agent declared in an adapter YAML, correct in what the SDK
adapter once judged falsely red. It never asks for approval (no ``needs_approval``), has one
tool (``send_email``, into its own outbox), answers in its own words (no outcome / code), and
never sends an email twice: each line of its outbox carries the call's site (turn and call
id), and a call asked again after a crash finds it there (``build``).

``build_twin`` is the same agent without that look-up: the SDK asks the model again after a
crash past the send, and it sends a second email (the real defect, red)."""

from __future__ import annotations

import json
import os
from typing import Any

from agents import Agent, SQLiteSession, function_tool
from agents.tool_context import ToolContext

OUTBOX = "outbox.jsonl"


def _site(ctx: ToolContext[Any]) -> str:
    turn = sum(1 for item in ctx.turn_input if isinstance(item, dict) and item.get("role") == "user")
    return f"{turn}:{ctx.tool_call_id}"


def _sent(site: str) -> bool:
    if not os.path.exists(OUTBOX):
        return False
    with open(OUTBOX, encoding="utf-8") as outbox:
        return any(json.loads(line).get("site") == site for line in outbox if line.strip())


def _send(to: str, subject: str, body: str, site: str) -> None:
    with open(OUTBOX, "a", encoding="utf-8") as outbox:
        outbox.write(json.dumps({"to": to, "subject": subject, "body": body, "site": site}) + "\n")
        outbox.flush()
        os.fsync(outbox.fileno())


@function_tool
def send_email(ctx: ToolContext[Any], to: str, subject: str, body: str) -> str:
    """Send an email."""
    site = _site(ctx)
    if _sent(site):
        return f"Already sent to {to}."
    _send(to, subject, body, site)
    return f"Sent to {to}."


@function_tool(name_override="send_email")
def send_email_twice(ctx: ToolContext[Any], to: str, subject: str, body: str) -> str:
    """Send an email."""
    _send(to, subject, body, _site(ctx))
    return f"Sent to {to}."


def build(ctx: Any) -> tuple[Agent[Any], SQLiteSession]:
    return Agent(name="mailer", model="gpt-4o-mini", tools=[send_email]), SQLiteSession("u", "chat.db")


def build_twin(ctx: Any) -> tuple[Agent[Any], SQLiteSession]:
    return Agent(name="mailer", model="gpt-4o-mini", tools=[send_email_twice]), SQLiteSession("u", "chat.db")
