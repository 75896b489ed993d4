"""The records of a session file, as frozen values.

One session JSONL holds two record lines (seed 000, section 2), told apart by ``type``:

* ``message``        -- what the model experienced: user, assistant (+tool calls), tool results.
* ``tool_execution`` -- the ledger: how far each real execution attempt got.
* ``compaction``     -- reserved; read and kept, never interpreted here.

The on-disk shape is exactly seed 000's. ``to_json()`` produces it and ``entry_from_json()``
reads it back; unknown extra fields on ledger lines are kept in ``extra`` so that nothing a
foreign agent wrote is lost when we read it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CompactionEntry",
    "Entry",
    "ExecutionRecord",
    "Message",
    "MessageEntry",
    "ToolCall",
    "content_text",
    "entry_from_json",
    "entry_to_json",
]

JSON = dict[str, Any]

# The kinds of a text part in a message's content list: Chat Completions' ``text``, the
# Responses API's ``input_text`` / ``output_text``.
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})


def content_text(content: Any) -> str | None:
    """A message's content as the text the model reads: a string as it is; a list of text
    parts (the chat API's array form: the Agents SDK passes an MCP tool's content blocks on
    as one) their texts joined; anything else (an image part, an object) as JSON."""
    if content is None or isinstance(content, str):
        return content
    if (
        isinstance(content, list)
        and content
        and all(
            isinstance(part, Mapping)
            and part.get("type") in _TEXT_PARTS
            and isinstance(part.get("text"), str)
            for part in content
        )
    ):
        return "".join(part["text"] for part in content)
    return json.dumps(content, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call inside an assistant message. ``arguments`` is the raw JSON string the
    model sent: it is what was saved, so it is what hashes and approvals must be about."""

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> JSON:
        """The arguments as a dict; a non-object or invalid JSON is an empty dict plus the
        caller's job to report (the model, not the user, wrote it)."""
        try:
            value = json.loads(self.arguments)
        except (ValueError, TypeError):
            return {}
        return value if isinstance(value, dict) else {}

    def to_json(self) -> JSON:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ToolCall:
        function = raw.get("function") or {}
        return cls(
            id=str(raw["id"]),
            name=str(function["name"]),
            arguments=str(function.get("arguments", "")),
        )


@dataclass(frozen=True, slots=True)
class Message:
    """A chat message in OpenAI's shape (role user / assistant / tool / system)."""

    role: str
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    def to_json(self) -> JSON:
        out: JSON = {"role": self.role}
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id
            out["content"] = self.content or ""
            return out
        out["content"] = self.content if self.content is not None else ""
        if self.tool_calls:
            out["tool_calls"] = [call.to_json() for call in self.tool_calls]
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Message:
        role = raw["role"]
        if not isinstance(role, str):
            raise TypeError("role must be a string")
        # Multi-part content (a list of parts) is flattened: only text reaches our tools.
        content = content_text(raw.get("content"))
        calls = tuple(ToolCall.from_json(c) for c in raw.get("tool_calls") or ())
        tool_call_id = raw.get("tool_call_id")
        return cls(
            role=role,
            content=content,
            tool_calls=calls,
            tool_call_id=str(tool_call_id) if tool_call_id is not None else None,
        )


@dataclass(frozen=True, slots=True)
class MessageEntry:
    message: Message
    line: int = 0  # 1-based line in the file it was read from; 0 when not read from a file

    def to_json(self) -> JSON:
        return {"type": "message", "message": self.message.to_json()}


@dataclass(frozen=True, slots=True)
class ExecutionRecord:
    """One ledger line: an execution attempt reached ``status``.

    ``result`` is the exact observation that becomes (or became) the Tool Result content,
    so a replay is byte-for-byte what the first publication would have been.
    """

    execution_id: str
    tool_call_id: str
    status: str
    tool_name: str
    idempotency_key: str
    arguments_sha256: str
    result: JSON | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    line: int = 0

    def to_json(self) -> JSON:
        out: JSON = {
            "type": "tool_execution",
            "execution_id": self.execution_id,
            "tool_call_id": self.tool_call_id,
            "status": self.status,
        }
        if self.result is not None:
            out["result"] = self.result
        out["tool_name"] = self.tool_name
        out["idempotency_key"] = self.idempotency_key
        out["arguments_sha256"] = self.arguments_sha256
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out


@dataclass(frozen=True, slots=True)
class CompactionEntry:
    raw: Mapping[str, Any]
    line: int = 0

    def to_json(self) -> JSON:
        return dict(self.raw)


Entry = MessageEntry | ExecutionRecord | CompactionEntry

_LEDGER_FIELDS = (
    "execution_id",
    "tool_call_id",
    "status",
    "tool_name",
    "idempotency_key",
    "arguments_sha256",
)


def entry_from_json(raw: Any, *, line: int = 0) -> Entry:
    """Build a record from one parsed JSON line.

    Raises ``ValueError`` (with a message fit to follow ``path:line:``) for anything that is
    not a record; the session reader turns that into ``SessionCorruption``.
    """
    if not isinstance(raw, dict):
        raise ValueError(f"a record must be a JSON object, got {type(raw).__name__}")
    kind = raw.get("type")
    if kind == "message":
        message = raw.get("message")
        if not isinstance(message, dict):
            raise ValueError("message record has no 'message' object")
        try:
            return MessageEntry(Message.from_json(message), line=line)
        except (KeyError, TypeError, AttributeError) as error:
            # AttributeError: a tool call that is not an object (``"tool_calls": ["c"]`` or a
            # string, iterated character by character) has no ``.get``.
            raise ValueError(f"message record is malformed: missing or bad {error}") from error
    if kind == "tool_execution":
        missing = [name for name in ("execution_id", "tool_call_id", "status") if name not in raw]
        if missing:
            raise ValueError(f"tool_execution record lacks {', '.join(missing)}")
        result = raw.get("result")
        if result is not None and not isinstance(result, dict):
            result = {"value": result}
        extra = {k: v for k, v in raw.items() if k not in (*_LEDGER_FIELDS, "type", "result")}
        return ExecutionRecord(
            execution_id=str(raw["execution_id"]),
            tool_call_id=str(raw["tool_call_id"]),
            status=str(raw["status"]),
            tool_name=str(raw.get("tool_name", "")),
            idempotency_key=str(raw.get("idempotency_key", "")),
            arguments_sha256=str(raw.get("arguments_sha256", "")),
            result=result,
            extra=extra,
            line=line,
        )
    if kind == "compaction":
        return CompactionEntry(raw, line=line)
    raise ValueError(f"unknown record type {kind!r} (expected message, tool_execution, compaction)")


def entry_to_json(entry: Entry) -> JSON:
    return entry.to_json()
