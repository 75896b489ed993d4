"""Reading a LangGraph checkpoint back (``checkpoint_messages``: each tool call of a life, the
end of every life, the harness's observation) is a read: no setup script on the file."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph

from crashmatrix.harness.agents.frameworks.langgraph import THREAD_ID, checkpoint_messages


def _saved_thread(path: Path) -> None:
    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("hello")]}

    graph = StateGraph(MessagesState)
    graph.add_node("reply", reply)
    graph.add_edge(START, "reply")
    graph.add_edge("reply", END)
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        compiled = graph.compile(checkpointer=SqliteSaver(conn))
        compiled.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": THREAD_ID}})
    finally:
        conn.close()


def test_a_checkpoint_is_read_without_running_the_savers_setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "checkpoints.sqlite"
    _saved_thread(path)

    original = SqliteSaver.setup

    def no_setup(self: SqliteSaver) -> None:
        # LangGraph calls setup() before every query; its script runs unless is_setup.
        if not self.is_setup:
            raise AssertionError("SqliteSaver's setup script ran on a read of the checkpoint")
        original(self)

    monkeypatch.setattr(SqliteSaver, "setup", no_setup)
    assert [m.content for m in checkpoint_messages(path)] == ["hi", "hello"]


def test_a_file_without_the_tables_reads_as_an_empty_conversation(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"
    sqlite3.connect(path).close()  # created by the agent's connect, nothing saved yet
    assert checkpoint_messages(path) == []
    assert checkpoint_messages(tmp_path / "missing.sqlite") == []
