"""The trace of a case's lives: boundaries, appends, model requests, crashes, one line each,
written so each line survives the SIGKILL that may follow; and reading it back."""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from crashmatrix.harness.core.boundaries import TORN_WRITE, CrashPoint
from crashmatrix.harness.core.torn_fragments import torn_event

__all__ = ["Tracer", "append_event", "append_label", "case_path", "last_point", "read_trace"]


class SnapshotTaker(Protocol):
    """What the tracer asks of a clean life's snapshots (``harness.lives.snapshots``, which
    imports the power recording, which imports this module: a protocol, not an import)."""

    def take(self, point: CrashPoint, tear: tuple[Path, bytes] | None = None) -> None: ...

    def model_request(self) -> None: ...


def append_label(line: bytes) -> tuple[str, str] | None:
    """(tool_call_id, label) for a session line that belongs to a tool call, else None.

    Labels: a ledger status (``approved``, ``running``, ...) or ``tool_result``."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if record.get("type") == "tool_execution":
        return str(record.get("tool_call_id")), str(record.get("status"))
    message = record.get("message") or {}
    if record.get("type") == "message" and message.get("role") == "tool":
        return str(message.get("tool_call_id")), "tool_result"
    return None


class Tracer:
    """Counts boundaries per life and kills the process at the planned point; or, in a
    clean life with ``snapshots``, leaves a first crash at every point it passes
    (``harness.lives.snapshots``)."""

    def __init__(
        self, trace_path: Path, life: int, crash: CrashPoint | None, snapshots: SnapshotTaker | None = None
    ) -> None:
        self.path = trace_path
        self.life = life
        self.crash = crash
        self.snapshots = snapshots
        self.seen: Counter[tuple[str, str, str]] = Counter()
        self._fd = -1  # opened on the first line, kept for the life (~17 lines a life)

    def write(self, record: dict[str, Any]) -> None:
        """One trace line, in one ``write()``: it survives a SIGKILL that follows."""
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:  # a tracer of a life run in-process (the warm-up, tests)
        self.close()

    def _die(self, point: CrashPoint) -> None:
        self.write({"life": self.life, "event": "crash", "point": point.id})
        os.kill(os.getpid(), signal.SIGKILL)

    def boundary(self, boundary: str, tool_call_id: str) -> None:
        self.seen[(boundary, tool_call_id, "")] += 1
        occurrence = self.seen[(boundary, tool_call_id, "")]
        self.write(
            {
                "life": self.life,
                "event": "boundary",
                "boundary": boundary,
                "call": tool_call_id,
                "occurrence": occurrence,
            }
        )
        point = CrashPoint(boundary, tool_call_id, occurrence)
        if self.crash == point:
            self._die(point)
        elif self.snapshots is not None:
            self.snapshots.take(point)

    def model_request(self) -> None:
        """The agent asked the model (not a crash point: where recovery ends, see
        ``harness.plan.enumeration.recovery_window``)."""
        self.write({"life": self.life, "event": "model_request"})
        if self.snapshots is not None:
            self.snapshots.model_request()  # a recovering life's window ends here

    def before_append(self, path: Path, line: bytes) -> None:
        labelled = append_label(line)
        if labelled is None:
            return
        call, label = labelled
        self.seen[(TORN_WRITE, call, label)] += 1
        occurrence = self.seen[(TORN_WRITE, call, label)]
        self.write(
            {"life": self.life, "event": "append", "call": call, "label": label, "occurrence": occurrence}
        )
        point = CrashPoint(TORN_WRITE, call, occurrence, label)
        if self.crash == point:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            fragment = line[: max(1, len(line) // 2)]
            # The fragment's bytes to the trace before the file (after the write nothing but the
            # kill may run): the verdict follows them into the final file (torn_fragments).
            where = case_path(path, self.path.parent)
            self.write(torn_event(self.life, call, label, where, os.fstat(fd).st_size, fragment))
            os.write(fd, fragment)
            os.fsync(fd)
            self._die(point)
        elif self.snapshots is not None:
            self.snapshots.take(point, (path, line))


def case_path(path: Path, case_dir: Path) -> str:
    """``path`` as the trace names a file: relative to the case directory (a case's directory
    is copied to resume from it, so an absolute name would point into another case)."""
    try:
        return str(Path(path).resolve().relative_to(case_dir.resolve()))
    except ValueError:
        return str(path)


def read_trace(case_dir: Path) -> list[dict[str, Any]]:
    path = case_dir / "trace.jsonl"
    if not path.exists():
        return []
    out: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line cut by the SIGKILL that followed it: the crash event says more
    return out


def append_event(case_dir: Path, record: dict[str, Any]) -> None:
    """One trace line written by the harness, after the life it is about has ended (nothing
    else writes the trace then)."""
    with open(case_dir / "trace.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(record, ensure_ascii=False) + "\n")


def last_point(trace: Sequence[Mapping[str, Any]], life: int) -> CrashPoint | None:
    """The last crash point ``life`` passed (a boundary, or an append that could be torn):
    where a life that died unplanned was, as near as the trace can tell."""
    last: CrashPoint | None = None
    for event in trace:
        if event.get("life") != life:
            continue
        if event.get("event") == "boundary":
            last = CrashPoint(event["boundary"], event["call"], event["occurrence"])
        elif event.get("event") == "append":
            last = CrashPoint(TORN_WRITE, event["call"], event["occurrence"], event["label"])
    return last
