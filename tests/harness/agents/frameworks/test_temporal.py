"""A Temporal workflow's event history read in crashmatrix's vocabulary (``framework: temporal``):
the workflow's input is the turn's conversation, a model activity's result the assistant's reply,
a tool activity's result the Tool Result of the call it answers, an activity that failed for good
a failed call; an activity scheduled or killed while running has no completion, so its call has
no result, and the next activity of that name is found to run it. Fast and pure: the events are
built as Temporal's protobuf messages, the server's SQLite rows by hand."""

from __future__ import annotations

import json
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio")

from temporalio.api.history.v1 import History, HistoryEvent
from temporalio.converter import default

from crashmatrix.harness.agents.frameworks import temporal as t
from crashmatrix.harness.agents.frameworks.durable_steps import chat_records, running_call
from crashmatrix.harness.agents.session_records import CannotPlant
from crashmatrix.harness.errors import InputError

USER = [{"role": "user", "content": "Email alice"}]


def _reply(*calls: tuple[str, str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None if calls else "Done.",
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}
            for call_id, name in calls
        ],
    }


class _History:
    """Events numbered as the server numbers them."""

    def __init__(self) -> None:
        self.events: list[HistoryEvent] = []

    def _next(self) -> HistoryEvent:
        event = HistoryEvent(event_id=len(self.events) + 1)
        self.events.append(event)
        return event

    def started(self, messages: list[dict[str, Any]]) -> None:
        attributes = self._next().workflow_execution_started_event_attributes
        attributes.input.payloads.extend(default().payload_converter.to_payloads([messages]))

    def scheduled(self, name: str) -> int:
        event = self._next()
        attributes = event.activity_task_scheduled_event_attributes
        attributes.activity_type.name = name
        attributes.activity_id = str(event.event_id)
        return event.event_id

    def completed(self, scheduled: int, result: Any) -> None:
        attributes = self._next().activity_task_completed_event_attributes
        attributes.scheduled_event_id = scheduled
        attributes.result.payloads.extend(default().payload_converter.to_payloads([result]))

    def failed(self, scheduled: int, message: str) -> None:
        attributes = self._next().activity_task_failed_event_attributes
        attributes.scheduled_event_id = scheduled
        attributes.failure.message = message

    def finished(self) -> None:
        self._next().workflow_execution_completed_event_attributes.SetInParent()


def _messages(history: _History) -> list[dict[str, Any]]:
    return [dict(record["message"]) for record in chat_records([t.turn_of(1, history.events)])]


def test_a_tool_activitys_result_is_its_calls_result_and_a_failure_a_failed_call() -> None:
    h = _History()
    h.started(USER)
    h.completed(h.scheduled("ask_model"), _reply(("call_a", "send_email"), ("call_b", "create_order")))
    h.completed(h.scheduled("send_email"), "Email sent to alice.")
    h.failed(h.scheduled("create_order"), "no stock")
    h.completed(h.scheduled("ask_model"), _reply())
    h.finished()
    messages = _messages(h)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["call_a", "call_b"]
    assert messages[2] == {"role": "tool", "tool_call_id": "call_a", "content": "Email sent to alice."}
    assert messages[3] == {
        "role": "tool",
        "tool_call_id": "call_b",
        "content": f"{t.ACTIVITY_ERROR}: no stock",
    }
    assert messages[4] == {"role": "assistant", "content": "Done."}
    assert t.turn_of(1, h.events).status == "COMPLETED"


def test_an_activity_killed_before_its_completion_has_no_result_and_its_retry_runs_its_call() -> None:
    h = _History()
    h.started(USER)
    h.completed(h.scheduled("ask_model"), _reply(("call_a", "send_email"), ("call_b", "send_email")))
    first = h.scheduled("send_email")  # running when the worker died: no completion
    turn = t.turn_of(1, h.events)
    assert turn.status == "RUNNING"
    assert [m["role"] for m in _messages(h)] == ["user", "assistant"]
    # The retried attempt is the same scheduled activity: it runs call_a, not call_b.
    name, steps = t.steps_before(h.events, str(first))
    assert (name, running_call(steps, name)) == ("send_email", "call_a")
    h.completed(first, "sent")
    second = h.scheduled("send_email")
    name, steps = t.steps_before(h.events, str(second))
    assert running_call(steps, name) == "call_b"


def test_the_model_activity_is_no_tool_call_and_an_unknown_activity_id_is_none() -> None:
    h = _History()
    h.started(USER)
    model = h.scheduled("ask_model")
    name, steps = t.steps_before(h.events, str(model))
    assert running_call(steps, name) is None
    assert t.steps_before(h.events, "99") == ("", [])


def _database(path: Path, rows: list[tuple[str, bytes, int, int, bytes]]) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE current_executions (workflow_id TEXT, run_id BLOB)")
        db.execute("CREATE TABLE history_node (tree_id BLOB, node_id INT, txn_id INT, data BLOB)")
        for workflow_id, run_id, node_id, txn_id, data in rows:
            db.execute("INSERT OR IGNORE INTO current_executions VALUES (?, ?)", (workflow_id, run_id))
            db.execute("INSERT INTO history_node VALUES (?, ?, ?, ?)", (run_id, node_id, txn_id, data))


@pytest.fixture
def history() -> Iterator[_History]:
    h = _History()
    h.started(USER)
    yield h


def test_the_servers_database_reads_as_turns_the_newest_write_of_a_node_winning(
    tmp_path: Path, history: _History
) -> None:
    h = history
    h.completed(h.scheduled("ask_model"), _reply(("call_a", "send_email")))
    first = History(events=h.events[:1]).SerializeToString()
    rest = History(events=h.events[1:]).SerializeToString()
    stale = History(events=[HistoryEvent(event_id=2)]).SerializeToString()
    run = b"\x01" * 16
    # Temporal stores transaction ids negated: -20 is newer than -10.
    _database(
        tmp_path / t.DB_NAME,
        [
            ("turn-1", run, 1, -5, first),
            ("turn-1", run, 2, -10, stale),
            ("turn-1", run, 2, -20, rest),
            ("temporal-sys-tq-scanner", b"\x02" * 16, 1, -1, first),
        ],
    )
    records = t.read_records(tmp_path)
    assert [r["message"]["role"] for r in records] == ["user", "assistant"]
    assert records[1]["message"]["tool_calls"][0]["id"] == "call_a"
    assert [turn.number for turn in t.read_turns(tmp_path / t.DB_NAME)] == [1]


def test_no_database_yet_is_no_record(tmp_path: Path) -> None:
    assert t.read_records(tmp_path) == []


def test_a_factory_that_returns_no_worker_is_one_line_naming_the_file() -> None:
    class Spec:
        path = Path("team/adapter.yaml")

    class Life:
        spec = Spec()

        @staticmethod
        def factory(context: Any) -> Any:
            return "not a worker"

    context = t.TeamContext(workspace=Path("."), life=1, client=None, task_queue=t.TASK_QUEUE)
    with pytest.raises(InputError, match=r"^team/adapter.yaml: factory: it returned str; return the team's"):
        t._built(Life(), context)  # type: ignore[arg-type]


def test_the_agent_value_form_says_in_one_line_to_write_an_adapter_yaml() -> None:
    from crashmatrix.harness.agents.loading import load_adapter

    with pytest.raises(InputError) as caught:
        load_adapter("temporal:team.agent:build")
    assert str(caught.value) == (
        "--agent='temporal:team.agent:build': a Temporal agent runs from an adapter YAML: write "
        "'framework: temporal' and 'factory: team.agent:build' in one, with its effects: "
        '(docs/frameworks.md "Temporal")'
    )


def test_the_doctor_rewrites_and_tears_an_activitys_completion_where_the_reader_reads_it(
    tmp_path: Path, history: _History
) -> None:
    h = history
    h.completed(h.scheduled("ask_model"), _reply(("call_a", "send_email")))
    h.completed(h.scheduled("send_email"), "Email sent to alice.")
    run = b"\x01" * 16
    _database(tmp_path / t.DB_NAME, [("turn-1", run, 1, -1, History(events=h.events).SerializeToString())])
    store = t.session_records(tmp_path)
    assert json.loads(store.get(3)) == {
        "role": "tool",
        "tool_call_id": "call_a",
        "content": "Email sent to alice.",
    }
    store.replace(3, json.dumps({"role": "tool", "tool_call_id": "call_a", "content": "planted"}).encode())
    assert t.read_records(tmp_path)[2]["message"]["content"] == "planted"
    assert "never recorded" in store.tear(3)
    assert [r["message"]["role"] for r in t.read_records(tmp_path)] == ["user", "assistant"]
    with pytest.raises(CannotPlant) as caught:
        store.again(3)
    assert caught.value.not_applicable


def test_a_stop_asked_while_another_is_under_way_returns_once_the_file_is_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The life's closed connection stops its server; its after_life asks again at once. The
    # second stop answered before the first had rolled back the killed server's journal, and
    # the harness read a hot journal ("attempt to write a readonly database").
    from crashmatrix.harness.agents.frameworks import temporal_server as ts

    events: list[str] = []
    killing = threading.Event()

    class Dying:
        def poll(self) -> None:
            return None

        def kill(self) -> None:
            events.append("killed")
            killing.set()

        def wait(self) -> None:
            time.sleep(0.2)  # the process going down: the other stop must not answer meanwhile
            events.append("reaped")

    monkeypatch.setattr(ts, "_recover", lambda db: events.append("recovered"))
    manager = ts._Manager("test")
    try:
        db = str(tmp_path / t.DB_NAME)
        manager.servers[db] = Dying()  # type: ignore[assignment]
        first = threading.Thread(target=manager.stop, args=(db,))
        first.start()
        assert killing.wait(30)
        manager.stop(db)
        events.append("second stop answered")
        first.join(30)
    finally:
        shutil.rmtree(manager.directory, ignore_errors=True)
    assert events == ["killed", "reaped", "recovered", "second stop answered"]
