"""The world outlives processes, orders its events, and consumes faults exactly once."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sqlite3
from pathlib import Path

import httpx
import pytest

from crashmatrix.harness.core.tools import ToolContext
from crashmatrix.harness.errors import HarnessError, InputError
from crashmatrix.mock_tools import FaultSpec, MockToolbox, World, catalogue
from crashmatrix.mock_tools.fileops import sha256_text
from tests.tls import CONTEXT

SESSION_LINE = b'{"type":"message"}\n'  # what the world fixture (conftest.py) writes

FORK = multiprocessing.get_context("fork")


def _child_sends_email(root: str) -> None:
    world = World(Path(root))
    with httpx.Client(verify=CONTEXT) as http:  # send_email makes no HTTP request
        toolbox = MockToolbox(world, catalogue(), http)
        ctx = ToolContext("call_child", "exec_1", "key_1", "0" * 64)
        toolbox.execute("send_email", {"to": "a@b.test", "subject": "s", "body": "b"}, ctx)
    # Die without any cleanup, as a SIGKILLed agent would: only committed data may survive.
    os._exit(0)


def _child_takes_fault(root: str, queue: multiprocessing.Queue[str | None]) -> None:
    queue.put(World(Path(root)).take_fault("send_email", "call_1"))


def test_create_lays_out_config_database_and_seeded_workspace(world: World) -> None:
    assert (world.root / "world.sqlite").is_file()
    config = json.loads((world.root / "world.json").read_text())
    assert config["session_path"] == "workspace/.agent_state/session-demo.jsonl"
    assert world.session_path == world.root / config["session_path"]
    assert (world.workspace / "README.md").read_text() == "hello\n"
    assert (world.workspace / "src/app.js").is_file()


def test_a_copied_world_guards_its_own_session_not_the_original(world: World, tmp_path: Path) -> None:
    # Recovery cases copy a crashed case directory once per second crash (harness/cases.py).
    copy = World(Path(shutil.copytree(world.root, tmp_path / "copy")))
    assert copy.session_path == copy.workspace / ".agent_state" / "session-demo.jsonl"
    assert copy.session_path in copy.forbidden and world.session_path not in copy.forbidden
    assert copy.session_bytes() == len(SESSION_LINE)


def test_opening_a_directory_without_a_world_is_a_harness_error(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match=r"World\.create"):
        World(tmp_path)


def test_creating_a_world_twice_is_refused(world: World) -> None:
    with pytest.raises(HarnessError, match="already exists"):
        World.create(world.root)


def test_a_committed_side_effect_in_a_dead_child_is_counted_by_the_parent(world: World) -> None:
    child = FORK.Process(target=_child_sends_email, args=(str(world.root),))
    child.start()
    child.join()
    reopened = World(world.root)
    assert reopened.snapshot().counts["emails"] == 1
    [event] = reopened.events()
    assert event.tool_call_id == "call_child"
    assert event.pid == child.pid != os.getpid()


def test_events_are_returned_in_global_sequence_order(world: World) -> None:
    for n in range(5):
        world.log_event("file_write", "write_file", detail={"n": n})
    events = world.events()
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    assert [e.detail["n"] for e in events] == list(range(5))
    assert world.events("nothing") == []


def test_session_bytes_is_the_session_file_size_at_the_side_effect(world: World) -> None:
    assert world.session_path is not None
    world.log_event("file_write", "write_file")
    with world.session_path.open("ab") as handle:
        handle.write(SESSION_LINE)
    world.log_event("file_write", "write_file")
    first, second = world.events()
    assert (first.session_bytes, second.session_bytes) == (len(SESSION_LINE), 2 * len(SESSION_LINE))


def test_session_bytes_is_minus_one_without_a_session_file(tmp_path: Path) -> None:
    bare = World.create(tmp_path / "bare")
    bare.log_event("file_write", "write_file")
    missing = World.create(tmp_path / "missing", session_path=tmp_path / "nope.jsonl")
    missing.log_event("file_write", "write_file")
    assert bare.events()[0].session_bytes == missing.events()[0].session_bytes == -1


def test_a_fault_fires_once_across_process_lives_and_is_recorded(tmp_path: Path) -> None:
    world = World.create(tmp_path / "w", faults=[FaultSpec("send_email", "response_lost")])
    queue: multiprocessing.Queue[str | None] = FORK.Queue()
    child = FORK.Process(target=_child_takes_fault, args=(str(world.root), queue))
    child.start()
    child.join()
    assert queue.get() == "response_lost"
    assert world.take_fault("send_email", "call_1") is None
    [event] = world.events()
    assert (event.kind, event.tool, event.detail) == ("fault", "send_email", {"fault": "response_lost"})


def test_a_fault_bound_to_a_tool_call_only_fires_for_that_call(tmp_path: Path) -> None:
    spec = FaultSpec("send_email", "timeout_before", tool_call_id="call_2", times=2)
    world = World.create(tmp_path / "w", faults=[spec])
    assert world.take_fault("send_email", "call_1") is None
    assert world.take_fault("write_file", "call_2") is None
    assert world.take_fault("send_email", "call_2") == "timeout_before"
    assert world.take_fault("send_email", "call_2") == "timeout_before"
    assert world.take_fault("send_email", "call_2") is None


@pytest.mark.parametrize(("kind", "times"), [("explode", 1), ("timeout_before", 0)])
def test_a_malformed_fault_spec_is_an_input_error(kind: str, times: int) -> None:
    with pytest.raises(InputError, match="send_email"):
        FaultSpec("send_email", kind, times=times)


def test_snapshot_hashes_every_workspace_file_and_counts_audit_lines(world: World) -> None:
    world.external_append("audit.log", "one\ntwo\n")
    snapshot = world.snapshot()
    assert snapshot.files["README.md"] == sha256_text("hello\n")
    assert ".agent_state/session-demo.jsonl" in snapshot.files  # excluding nothing
    assert snapshot.counts["audit_lines"] == 2
    assert snapshot.file_text("README.md") == "hello\n"
    assert snapshot.file_text("absent.txt") is None
    assert set(snapshot.counts) >= {"orders", "emails", "releases", "audit_lines"}
    json.dumps(snapshot.to_json())


def test_external_write_changes_the_file_and_is_recorded_as_external(world: World) -> None:
    world.external_write("README.md", "edited by a person\n")
    assert (world.workspace / "README.md").read_text() == "edited by a person\n"
    [event] = world.events()
    assert (event.kind, event.tool) == ("external_write", "(external)")
    assert event.detail["base_sha256"] == sha256_text("hello\n")
    assert event.detail["after_sha256"] == sha256_text("edited by a person\n")


def test_a_failed_transaction_leaves_neither_effect_nor_event(world: World) -> None:
    with pytest.raises(RuntimeError), world.transaction() as conn:
        world.record_event(conn, "email", "send_email")
        raise RuntimeError("die mid-transaction")
    assert world.events() == []


def test_a_world_keeps_one_connection_per_thread_and_close_ends_them(world: World) -> None:
    import threading

    first = world.read()
    with world.transaction() as conn:
        assert conn is first  # reused, not reopened per operation
    other: list[object] = []
    thread = threading.Thread(target=lambda: other.append(world.read()))
    thread.start()
    thread.join()
    assert other and other[0] is not first  # threads never share a connection
    world.close()
    with pytest.raises(sqlite3.ProgrammingError):
        first.execute("SELECT 1")
    assert world.read() is not first and world.snapshot().counts["emails"] == 0  # reopens on use


def test_a_forked_child_never_uses_nor_closes_its_parents_connection(world: World) -> None:
    parent_conn = world.read()
    parent_conn.execute("BEGIN")  # the parent is mid-read when the child runs
    parent_conn.execute("SELECT COUNT(*) FROM outbox").fetchone()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            assert world.read() is not parent_conn
            with world.transaction() as conn:
                assert conn is not parent_conn
                conn.execute(
                    "INSERT INTO outbox (to_addr, subject, body, seq) VALUES ('c@d.test', 's', 'b', 0)"
                )
            world.close()  # closes the child's own connection only
            parent_conn.execute("SELECT 1")  # raises ProgrammingError had the child closed it
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    parent_conn.execute("COMMIT")
    assert world.read() is parent_conn  # still open, still ours
    assert world.snapshot().counts["emails"] == 1  # and it sees the child's commit
