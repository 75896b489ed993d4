"""How a team's agent takes its turns (``input:``): which messages a life starts an agent
that takes one message per process with, what its adapter may say about it, and the
``workspace:`` folder the case workspace starts as. The lives themselves: test_turns_lives.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.agents.adapter_file import load_foreign
from crashmatrix.harness.agents.conversation import per_process_messages
from crashmatrix.harness.agents.foreign import _seed_workspace
from crashmatrix.harness.core.records import Message, MessageEntry, ToolCall

TURNS = ("Order 2 desks", "Now order 3 chairs")
CALL = ToolCall("call_desks", "create_order", {"item": "desk", "quantity": 2})


def _session(*messages: Message) -> tuple[MessageEntry, ...]:
    return tuple(MessageEntry(message) for message in messages)


USER = Message("user", TURNS[0])
ASKED = Message("assistant", "", (CALL,))
RESULT = Message("tool", '{"ok": true}', tool_call_id="call_desks")
FINAL = Message("assistant", "Ordered.")


def test_a_first_life_starts_the_agent_once_per_turn() -> None:
    assert per_process_messages(TURNS, ()) == TURNS


def test_a_turn_the_session_shows_received_is_never_sent_again() -> None:
    # Killed in turn 1 after its message was saved: the start for turn 2 recovers turn 1.
    assert per_process_messages(TURNS[1:], _session(USER, ASKED)) == TURNS[1:]


@pytest.mark.parametrize(
    "left", [(USER,), (USER, ASKED), (USER, ASKED, RESULT)], ids=["message", "tool call", "tool result"]
)
def test_a_last_turn_left_unfinished_gets_one_start_with_an_empty_message(left: tuple[Message, ...]) -> None:
    assert per_process_messages((), _session(*left)) == ("",)


def test_a_finished_conversation_starts_nothing() -> None:
    assert per_process_messages((), _session(USER, ASKED, RESULT, FINAL)) == ()
    assert per_process_messages((), ()) == ()  # no turn ever received: nothing to finish


def _adapter(tmp_path: Path, text: str) -> Path:
    (tmp_path / "agent.py").write_text("def main():\n    pass\n", encoding="utf-8")
    path = tmp_path / "adapter.yaml"
    path.write_text("name: a\n" + text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "via", "name", "per_process"),
    [
        ("command: [agent]\n", "stdin", "", False),
        ("command: [agent]\ninput: {per_process: true}\n", "stdin", "", True),
        ('command: [agent, "{turn}"]\ninput: {via: argv}\n', "argv", "", True),
        ('python: {script: agent.py, argv: ["--ask={turn}"]}\ninput: {via: argv}\n', "argv", "", True),
        (
            "python: {script: agent.py}\ninput: {via: env, name: AGENT_MESSAGE}\n",
            "env",
            "AGENT_MESSAGE",
            True,
        ),
    ],
)
def test_the_adapter_says_where_each_message_goes(
    tmp_path: Path, text: str, via: str, name: str, per_process: bool
) -> None:
    spec = load_foreign(_adapter(tmp_path, text))
    assert (spec.input_via, spec.input_name, spec.per_process) == (via, name, per_process)


def test_the_workspace_folder_is_read_relative_to_the_adapter(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    spec = load_foreign(_adapter(tmp_path, "python: {script: agent.py}\nworkspace: home\n"))
    assert spec.workspace_from == (tmp_path / "home").resolve()
    assert load_foreign(_adapter(tmp_path, "python: {script: agent.py}\n")).workspace_from is None


def test_the_workspace_starts_as_a_copy_of_the_folder_and_the_scenarios_files_win(tmp_path: Path) -> None:
    folder, workspace = tmp_path / "home", tmp_path / "case" / "workspace"
    (folder / "data" / "__pycache__").mkdir(parents=True)
    (folder / "desk.json").write_text('{"from": "agent"}', encoding="utf-8")
    (folder / "data" / "orders.jsonl").write_text("", encoding="utf-8")
    (folder / "data" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (folder / "motd.txt").write_text("agent's", encoding="utf-8")
    (folder / "empty").mkdir()
    workspace.mkdir(parents=True)
    (workspace / "motd.txt").write_text("scenario's", encoding="utf-8")
    _seed_workspace(folder, workspace)
    files = sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*"))
    assert files == ["data", "data/orders.jsonl", "desk.json", "empty", "motd.txt"]
    assert (workspace / "desk.json").read_text(encoding="utf-8") == '{"from": "agent"}'
    assert (workspace / "motd.txt").read_text(encoding="utf-8") == "scenario's"
