"""Power loss: what a crash of the machine, not of the process, leaves of the session file.

A SIGKILL keeps the page cache: every ``write()`` the agent made reaches the file, synced
or not, so an agent that never calls ``fsync`` passes every process-crash case. SQLite's
crash VFS (``src/test6.c``) makes the test decide what a power loss may leave behind; here
the rule is the strict one a journaling file system allows: the session file keeps exactly
the bytes it had at its last ``fsync`` and loses everything written after it.

Two halves, one on each side of the process boundary:

* ``record_fsyncs`` (inside the agent's process) wraps ``os.fsync``/``os.fdatasync``: each
  sync of the session file appends the file's size at that moment to a sidecar log, one
  ``write()`` per line so the record survives the SIGKILL that may follow.
* ``lose_unsynced`` (in the parent, after the life died) truncates the session file to the
  last recorded size and keeps the lost bytes next to the case for the failure report.

The world (SQLite committed before a side effect returns, files replaced atomically and
fsynced) outlives the agent's death at every side effect (``mock_tools/world.py``), so only
the session loses bytes: exactly the asymmetry that makes a lost ``running`` line dangerous.

Known limit: only syncs of the session file's own inode count. An agent that rewrites its
session by ``write tmp; fsync tmp; rename`` syncs another inode and is treated as unsynced.

Wired through ``run_case(..., power_loss=True)`` / ``run_point(..., power_loss=True)``: the
life records its fsyncs (``LifeSpec.power_loss``) and the injector truncates after each crash.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

__all__ = [
    "SYNC_LOG",
    "PowerLoss",
    "durable_length",
    "lose_unsynced",
    "parse_sync_log",
    "record_fsyncs",
]

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

    Sync = Callable[[FileDescriptorLike], None]

SYNC_LOG = "fsyncs.jsonl"


@dataclass(frozen=True, slots=True)
class PowerLoss:
    """What a power loss did to the session file."""

    path: Path
    size_before: int
    size_after: int
    lost: bytes

    @property
    def dropped(self) -> int:
        return self.size_before - self.size_after


# ---------------------------------------------------------------- pure core


def parse_sync_log(data: bytes) -> tuple[int, ...]:
    """The synced sizes recorded in a sync log, in order.

    A final line without its newline is a record the SIGKILL cut short: that fsync may not
    have completed either, so it is ignored (LevelDB's torn-tail rule)."""
    sizes: list[int] = []
    for line in data.split(b"\n")[:-1]:
        if line.strip():
            sizes.append(int(json.loads(line)["size"]))
    return tuple(sizes)


def durable_length(sizes: Sequence[int], current_size: int) -> int:
    """How many bytes of a file of ``current_size`` survive a power loss, given the sizes
    recorded at each of its syncs (the last one counts). Never synced -> nothing survives."""
    last = sizes[-1] if sizes else 0
    # The file may have shrunk since (a torn tail set aside, then synced): never grow it.
    return min(last, current_size)


# ---------------------------------------------------------------- the agent's side


def _append_line(path: Path, record: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode("utf-8"))
    finally:
        os.close(fd)


def record_fsyncs(session_path: Path, log_path: Path) -> Callable[[], None]:
    """Inside the agent's process: log the session file's size at every sync of it.

    Returns a function that puts the original ``os.fsync``/``os.fdatasync`` back (tests
    need it; a life simply dies with the wrapper installed)."""
    originals: dict[str, Sync] = {"fsync": os.fsync, "fdatasync": os.fdatasync}

    def wrap(name: str) -> Sync:
        original = originals[name]

        def synced(fd: FileDescriptorLike) -> None:
            original(fd)
            number = fd if isinstance(fd, int) else fd.fileno()
            stat = os.fstat(number)
            try:
                target = os.stat(session_path)
            except FileNotFoundError:
                return
            # By inode, not by name: the agent may hold the file under any path or fd.
            if (stat.st_dev, stat.st_ino) == (target.st_dev, target.st_ino):
                _append_line(log_path, {"size": stat.st_size})

        return synced

    # setattr: the agent calls os.fsync through the module at call time, so replacing the
    # module attribute is what reaches every caller (SessionWriter included).
    for name in originals:
        setattr(os, name, wrap(name))

    def restore() -> None:
        for name, original in originals.items():
            setattr(os, name, original)

    return restore


# ---------------------------------------------------------------- the harness's side


def lose_unsynced(session_path: Path, log_path: Path, *, keep: Path | None = None) -> PowerLoss | None:
    """After the agent's process died: cut the session file back to its last synced size.

    The cut itself is logged as a sync (it is what the disk now holds), so a later life
    that never syncs loses back to here, not further. ``keep`` receives the lost bytes.
    Returns None when there is no session file (the agent never created one)."""
    try:
        data = session_path.read_bytes()
    except FileNotFoundError:
        return None
    log = log_path.read_bytes() if log_path.exists() else b""
    cut = durable_length(parse_sync_log(log), len(data))
    if cut < len(data):
        if keep is not None:
            keep.write_bytes(data[cut:])
        os.truncate(session_path, cut)
    _append_line(log_path, {"size": cut, "power_loss": True})
    return PowerLoss(session_path, len(data), cut, data[cut:])
