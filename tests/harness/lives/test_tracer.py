"""harness.lives.tracer: the planned crash happens where it is planned, and a torn write leaves
what a dying writer leaves (fast: the test process forks a child that the tracer kills; the
slow end-to-end torn-write cases are in tests/reference_agent/ and the golden agents)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from crashmatrix.harness.core.boundaries import TORN_WRITE, CrashPoint
from crashmatrix.harness.lives.tracer import Tracer, read_trace

LINE = (
    json.dumps(
        {
            "type": "tool_execution",
            "tool_call_id": "call_1",
            "execution_id": "exec_1",
            "status": "running",
            "arguments_sha256": "0" * 64,
        }
    )
    + "\n"
).encode("utf-8")


def _in_child(case: Path, crash: CrashPoint, appends: int) -> int:
    """Fork a child whose tracer plans ``crash`` and that appends LINE ``appends`` times
    (as an agent's session append would, after before_append); the child's wait status."""
    session = case / "session.jsonl"
    session.touch()
    pid = os.fork()
    if pid == 0:  # the child: its tracer may SIGKILL it; it never returns to pytest
        try:
            tracer = Tracer(case / "trace.jsonl", 1, crash)
            for _ in range(appends):
                tracer.before_append(session, LINE)
                with session.open("ab") as handle:
                    handle.write(LINE)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return status


def test_a_torn_write_leaves_the_first_half_of_the_line_synced_and_kills_the_writer(tmp_path: Path) -> None:
    status = _in_child(tmp_path, CrashPoint(TORN_WRITE, "call_1", 1, "running"), appends=1)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert (tmp_path / "session.jsonl").read_bytes() == LINE[: len(LINE) // 2]
    assert [e["point"] for e in read_trace(tmp_path) if e["event"] == "crash"] == [
        "torn_write[call_1:running]"
    ]


def test_a_second_occurrence_tears_the_second_append_only(tmp_path: Path) -> None:
    status = _in_child(tmp_path, CrashPoint(TORN_WRITE, "call_1", 2, "running"), appends=3)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert (tmp_path / "session.jsonl").read_bytes() == LINE + LINE[: len(LINE) // 2]


def test_an_append_at_no_planned_point_is_written_whole(tmp_path: Path) -> None:
    status = _in_child(tmp_path, CrashPoint(TORN_WRITE, "call_1", 1, "succeeded"), appends=2)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert (tmp_path / "session.jsonl").read_bytes() == LINE * 2
    assert [e["occurrence"] for e in read_trace(tmp_path) if e["event"] == "append"] == [1, 2]
