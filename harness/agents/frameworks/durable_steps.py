"""Durable steps read as a conversation: the one mapping DBOS's step table and Temporal's
event history share (``frameworks.dbos``, ``frameworks.temporal``).

Each framework reads its own store into ``Turn``s (a turn's workflow: its input messages and the
steps it committed, in order); from there everything is the same. A model step's output is the
assistant's reply, its calls answered in order by the steps named as the calls' tools, each such
step's output (or error) the Tool Result; a step of another name is a helper, not part of the
conversation. A step started and not committed has no row: no ledger of attempts. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "TURN",
    "Source",
    "Step",
    "Turn",
    "calls_of",
    "chat_records",
    "history",
    "plain",
    "running_call",
    "sourced",
    "sourced_record",
]

TURN = "turn-{}"  # one workflow per user turn


@dataclass(frozen=True)
class Step:
    """One ``operation_outputs`` row: a step DBOS committed."""

    function_id: int
    name: str
    output: Any = None
    error: str | None = None  # the error's text when the step raised


@dataclass(frozen=True)
class Turn:
    """One turn's workflow: its input (the messages it was called with) and its steps."""

    number: int
    status: str
    messages: tuple[Mapping[str, Any], ...]
    steps: tuple[Step, ...] = field(default_factory=tuple)


def plain(value: Any) -> Any:
    """A pydantic object (an openai ``ChatCompletionMessage`` a step returned) as a dict."""
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else value


def calls_of(output: Any) -> list[Mapping[str, Any]] | None:
    """The tool calls of a model step's output, or None when it is not the model's reply."""
    message = plain(output)
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return None
    return [c for c in (message.get("tool_calls") or []) if isinstance(c, Mapping)]


def _call_name(call: Mapping[str, Any]) -> str:
    return str((call.get("function") or {}).get("name", ""))


def _answering(steps: Sequence[Step]) -> Iterator[tuple[Step, Mapping[str, Any] | None]]:
    """Each step with the tool call it answers (None: not a tool's step). After a model step
    with calls, the steps named as its calls answer them in order; a step of another name (a
    helper the loop runs) answers none."""
    pending: list[Mapping[str, Any]] = []
    for step in steps:
        calls = calls_of(step.output) if step.error is None else None
        if calls is not None:
            pending = list(calls)
            yield step, None
        elif pending and step.name == _call_name(pending[0]):
            yield step, pending.pop(0)
        else:
            yield step, None


def running_call(steps: Sequence[Step], name: str) -> str | None:
    """The tool call a step named ``name`` starting after ``steps`` (its workflow's committed
    rows) runs, or None when it is no tool's step."""
    pending: list[Mapping[str, Any]] = []
    for step, answered in _answering(steps):
        calls = calls_of(step.output) if step.error is None else None
        if calls is not None:
            pending = list(calls)
        elif answered is not None:
            pending.pop(0)
    if pending and _call_name(pending[0]) == name:
        return str(pending[0].get("id", ""))
    return None


def _content(value: Any) -> str:
    value = plain(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def chat_records(turns: Sequence[Turn]) -> list[Mapping[str, Any]]:
    """The step table as chat records (the reader's shape): each turn's user message (the last
    of its input), each model step's reply, each tool step's output (or error) as the Tool
    Result of the call it answered."""
    return [record for record, _ in sourced(turns)]


# Where a chat record comes from: (the turn's workflow id, the step's function id), or None
# for the user's message (the workflow's input).
Source = tuple[str, int] | None


def sourced(turns: Sequence[Turn]) -> list[tuple[Mapping[str, Any], Source]]:
    out: list[tuple[Mapping[str, Any], Source]] = []
    for turn in sorted(turns, key=lambda t: t.number):
        workflow_id = TURN.format(turn.number)
        user = next((m for m in reversed(turn.messages) if m.get("role") == "user"), None)
        if user is not None:
            message = {"role": "user", "content": _content(user.get("content"))}
            out.append(({"type": "message", "message": message}, None))
        for step, call in _answering(turn.steps):
            source = (workflow_id, step.function_id)
            if call is not None:
                content = step.error if step.error is not None else _content(step.output)
                result = {"role": "tool", "tool_call_id": str(call.get("id", "")), "content": content}
                out.append(({"type": "message", "message": result}, source))
                continue
            reply = plain(step.output) if step.error is None else None
            if not isinstance(reply, Mapping) or calls_of(reply) is None:
                continue  # a helper step: not part of the conversation
            calls = [
                {
                    "id": str(c.get("id", "")),
                    "type": "function",
                    "function": {
                        "name": _call_name(c),
                        "arguments": str((c.get("function") or {}).get("arguments", "")),
                    },
                }
                for c in reply.get("tool_calls") or []
            ]
            reply_message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
            if calls:
                reply_message["tool_calls"] = calls
            out.append(({"type": "message", "message": reply_message}, source))
    return out


def history(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The chat messages of ``records``, as the next turn's workflow is called with them."""
    return [dict(record["message"]) for record in records]


def sourced_record(turns: Sequence[Turn], number: int, row: str) -> tuple[Mapping[str, Any], tuple[str, int]]:
    """Chat record ``number`` (from 1) with its source, for the doctor planting into the
    framework's store (``harness.agents.session_records``); ``row`` names what holds a record
    there. A user's message has no row of its own: it is the workflow's input."""
    from crashmatrix.harness.agents.session_records import CannotPlant

    record, source = sourced(turns)[number - 1]
    if source is None:
        raise CannotPlant(f"a user's message is the workflow's input, not {row}")
    return record, source
