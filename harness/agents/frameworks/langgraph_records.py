"""A LangGraph thread's latest checkpoint as the records ``crashmatrix doctor`` plants into.

The adapter reads the conversation from the ``messages`` channel of the thread's latest
checkpoint (``langgraph.conversation``: record n is the n-th message there), so a fault is
honestly planted in that same place: the checkpoint's row in the ``SqliteSaver``'s table,
decoded with the saver's own serializer, changed, encoded and written back. A second Tool
Result is the ``ToolMessage`` written again right after itself (a new message id, as a second
observation of one call would have). A write cut short is the final answer never saved (SQLite
commits a row whole: no half of it).
"""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crashmatrix.harness.agents.session_records import CannotPlant

__all__ = ["CheckpointMessages"]


@dataclass(frozen=True)
class CheckpointMessages:
    path: Path  # the SqliteSaver's database
    thread_id: str

    def name(self) -> str:
        return f"{self.path.name} (the latest checkpoint of thread {self.thread_id})"

    def _latest(self, conn: sqlite3.Connection) -> tuple[str, Any, dict[str, Any]]:
        from langgraph.checkpoint.sqlite import SqliteSaver

        saver = SqliteSaver(conn)
        row = conn.execute(
            "SELECT checkpoint_id, type, checkpoint FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = '' ORDER BY checkpoint_id DESC LIMIT 1",
            (self.thread_id,),
        ).fetchone()
        if row is None:
            raise CannotPlant(f"{self.path.name} holds no checkpoint of thread {self.thread_id}")
        checkpoint = saver.serde.loads_typed((row[1], row[2]))
        return str(row[0]), saver, checkpoint

    def _messages(self, checkpoint: dict[str, Any]) -> list[Any]:
        messages = checkpoint.get("channel_values", {}).get("messages")
        if not isinstance(messages, list):
            raise CannotPlant("the latest checkpoint has no messages channel")
        return messages

    def get(self, number: int) -> bytes:
        with contextlib.closing(sqlite3.connect(self.path)) as conn:
            _, _, checkpoint = self._latest(conn)
        message = self._messages(checkpoint)[number - 1]
        return str(message.model_dump_json()).encode()

    def _edit(self, change: Callable[[list[Any]], None]) -> None:
        """Change the latest checkpoint's messages in place and write the row back."""
        with contextlib.closing(sqlite3.connect(self.path)) as conn, conn:
            checkpoint_id, saver, checkpoint = self._latest(conn)
            change(self._messages(checkpoint))
            kind, blob = saver.serde.dumps_typed(checkpoint)
            conn.execute(
                "UPDATE checkpoints SET type = ?, checkpoint = ? WHERE thread_id = ? AND checkpoint_ns = '' "
                "AND checkpoint_id = ?",
                (kind, blob, self.thread_id, checkpoint_id),
            )

    def again(self, number: int) -> str:
        def twice(messages: list[Any]) -> None:
            messages.insert(number, messages[number - 1].model_copy(update={"id": str(uuid.uuid4())}))

        self._edit(twice)
        return f"{self.name()}: message {number} written again after itself"

    def replace(self, number: int, text: bytes) -> None:
        """``text`` is ``get(number)`` edited: the message of the same class, from that JSON."""

        def swap(messages: list[Any]) -> None:
            messages[number - 1] = type(messages[number - 1]).model_validate_json(text)

        self._edit(swap)

    def tear(self, number: int) -> str:
        """A checkpoint row is committed whole: the write of the final answer cut short is
        the answer never saved. Message ``number`` and every later one are removed."""

        def cut(messages: list[Any]) -> None:
            del messages[number - 1 :]

        self._edit(cut)
        return f"{self.name()}: message {number} (the final answer) never saved: removed with those after it"
