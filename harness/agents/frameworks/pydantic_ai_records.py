"""A PydanticAI agent's message store as the records ``crashmatrix doctor`` plants into.

The adapter reads the store's rows (each a run's ``new_messages_json()``, or one message)
through PydanticAI's type adapter and turns each message into chat records
(``message_records``, here: a response is one record, a request one per part the model is
told), so record n is found again the same way: its row, its message, its part. A fault is
planted in that place: the message (or the request part) as JSON, changed, and its row written
back. A second Tool Result is the return part written again right after itself. A write cut
short cannot be planted: a run's messages are one row, which SQLite commits whole, so no final
answer is ever saved without the rest of its run (not applicable, saying so).
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crashmatrix.harness.agents.session_records import CannotPlant

__all__ = ["StoreMessages", "message_records"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(part for part in content if isinstance(part, str))
    return "" if content is None else str(content)


def message_records(item: Any) -> list[tuple[int | None, Mapping[str, Any]]]:
    """One message's records, each with the index of the request part it is (None: a
    response, one record for the whole message): where ``crashmatrix doctor`` writes it."""
    from pydantic_ai.messages import (
        ModelResponse,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )

    def record(body: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"type": "message", "message": dict(body)}

    if isinstance(item, ModelResponse):
        text = "".join(p.content for p in item.parts if isinstance(p, TextPart))
        calls = [
            {
                "id": p.tool_call_id,
                "type": "function",
                "function": {"name": p.tool_name, "arguments": p.args_as_json_str()},
            }
            for p in item.parts
            if isinstance(p, ToolCallPart)
        ]
        body: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            body["tool_calls"] = calls
        return [(None, record(body))] if text or calls else []
    out: list[tuple[int | None, Mapping[str, Any]]] = []
    for index, part in enumerate(item.parts):  # a request: what the model is sent
        if isinstance(part, SystemPromptPart):
            out.append((index, record({"role": "system", "content": part.content})))
        elif isinstance(part, UserPromptPart):
            out.append((index, record({"role": "user", "content": _text(part.content)})))
        elif isinstance(part, ToolReturnPart):
            told = part.model_response_str()
            out.append((index, record({"role": "tool", "tool_call_id": part.tool_call_id, "content": told})))
        elif isinstance(part, RetryPromptPart) and part.tool_name is not None:
            # A tool that raised ModelRetry or got bad arguments: the model is told to retry.
            told = part.model_response()
            out.append((index, record({"role": "tool", "tool_call_id": part.tool_call_id, "content": told})))
    return out


@dataclass(frozen=True)
class StoreMessages:
    path: Path  # the store's SQLite file
    table: str
    column: str

    def name(self) -> str:
        return f"{self.path.name} (table {self.table}, column {self.column})"

    def _rows(self, conn: sqlite3.Connection) -> list[tuple[int, list[Any], bool]]:
        """(rowid, the row's messages as JSON, whether the row held a list)."""
        query = f'SELECT rowid, "{self.column}" FROM "{self.table}" ORDER BY rowid'
        rows = []
        for rowid, text in conn.execute(query).fetchall():
            value = json.loads(text)
            rows.append((int(rowid), value if isinstance(value, list) else [value], isinstance(value, list)))
        return rows

    def _find(self, conn: sqlite3.Connection, number: int) -> tuple[int, list[Any], bool, int, int | None]:
        """Record ``number`` (1-based): its row, the row's messages, the message, the part."""
        from pydantic_ai.messages import ModelMessagesTypeAdapter

        seen = 0
        for rowid, messages, listed in self._rows(conn):
            for index, message in enumerate(ModelMessagesTypeAdapter.validate_json(json.dumps(messages))):
                for part, _ in message_records(message):
                    seen += 1
                    if seen == number:
                        return rowid, messages, listed, index, part
        raise CannotPlant(f"{self.name()} holds no record {number}")

    def _edit(self, number: int, change: Callable[[list[Any], int, int | None], str]) -> str:
        with contextlib.closing(sqlite3.connect(self.path)) as conn, conn:
            rowid, messages, listed, index, part = self._find(conn, number)
            said = change(messages, index, part)
            text = json.dumps(messages if listed else messages[0])
            conn.execute(f'UPDATE "{self.table}" SET "{self.column}" = ? WHERE rowid = ?', (text, rowid))
        return said

    def get(self, number: int) -> bytes:
        with contextlib.closing(sqlite3.connect(self.path)) as conn:
            _, messages, _, index, part = self._find(conn, number)
        found = messages[index] if part is None else messages[index]["parts"][part]
        return json.dumps(found).encode()

    def again(self, number: int) -> str:
        def twice(messages: list[Any], index: int, part: int | None) -> str:
            if part is None:
                messages.insert(index + 1, messages[index])
                return f"{self.name()}: message {index + 1} written again after itself"
            parts = messages[index]["parts"]
            parts.insert(part + 1, dict(parts[part]))
            return f"{self.name()}: part {part + 1} of message {index + 1} written again after itself"

        return self._edit(number, twice)

    def replace(self, number: int, text: bytes) -> None:
        """``text`` is ``get(number)`` edited: that message (or request part), from that JSON."""

        def swap(messages: list[Any], index: int, part: int | None) -> str:
            if part is None:
                messages[index] = json.loads(text)
            else:
                messages[index]["parts"][part] = json.loads(text)
            return ""

        self._edit(number, swap)

    def tear(self, number: int) -> str:
        raise CannotPlant(
            f"{self.name()}: a run's messages are one row, which SQLite commits whole: no final answer "
            "is saved without the rest of its run",
            not_applicable=True,
        )
