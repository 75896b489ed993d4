"""Power loss: what a crash of the machine, not of the process, leaves of the session file.

A SIGKILL keeps the page cache: every ``write()`` the agent made reaches the file, synced
or not, so an agent that never calls ``fsync`` passes every process-crash case. SQLite's
crash VFS (``src/test6.c``) makes the test decide what a power loss may leave behind; here
the rule is the strict one a journaling file system allows: the session file keeps exactly
the bytes it had at its last ``fsync`` and loses everything written after it.

The persistence model, per file (POSIX promises no more than this):

* a file's bytes are durable up to the size it had at its last ``fsync``/``fdatasync``;
* a file's directory entry is durable once its parent directory was fsynced after the file
  was created. A session file this life created, whose directory it never fsynced, vanishes
  whole at a power loss (``directory_entry_durable``), its bytes synced or not. A file that
  was there when the life started is taken as durable, whoever made it and however: the
  model looks no further back than the start of the life that crashed.

Two halves, one on each side of the process boundary:

* ``record_fsyncs`` (inside the agent's process) first logs whether the session file exists
  (``{"start": true, "existed": ...}``), then wraps ``os.fsync``/``os.fdatasync``: each sync
  of the session file appends the file's size at that moment to a sidecar log
  (``{"size": N}``), each sync of its parent directory while the file exists appends
  ``{"dir": true}``; one ``write()`` per line so the record survives the SIGKILL that may
  follow.
* ``lose_unsynced`` (in the parent, after the life died) removes a session file whose
  directory entry was never made durable, or else truncates it to the last recorded size,
  and keeps the lost bytes next to the case for the failure report.

The world (SQLite committed before a side effect returns, files replaced atomically and
fsynced) outlives the agent's death at every side effect (``mock_tools/world.py``), so only
the session loses bytes: exactly the asymmetry that makes a lost ``running`` line dangerous.

Which file, and whether a power loss can act at all, is the adapter's to say
(``power_target``; an adapter's ``power_session(case_dir)``):

* kind 1 (native): crashmatrix's session file (``session_path_of``), unless the adapter says
  otherwise;
* kind 2 with a JSONL session: the agent's own file. Its appends and ``fsync`` calls (of the
  file and of its directory) happen in the life's process, so they are recorded exactly like
  a native agent's, and the same directory-entry rule applies to the file it creates;
* kind 2 with a SQLite session: not applicable. SQLite syncs from its C library, which never
  goes through ``os.fsync``, so the recorder cannot see what it made durable (and a database
  is not cut back by length); a reader function's or an unreadable session: not applicable,
  the harness does not know which file to cut;
* kind 3 (a black box): not applicable. Its fsyncs happen in another process and are not
  visible to the harness, so its synced bytes cannot be told from the rest.

No silent green: after every crash the harness writes a ``fault`` event to the trace
(``{"event": "fault", "fault": "power_loss", "acted": ..., "detail": ...}``). It acted when
the fsyncs were visible: it dropped the unsynced bytes, or removed the whole file (the detail
says it vanished), or the session was fully synced at the crash (the fault happened, with
nothing to drop). Otherwise (no visibility, or no session file where the adapter said) it
did not act, and a case that would have passed is not applicable with that reason
(``harness.front.cases`` hands the event to the verdict as a fault that did not act, as
``harness.lives.between`` does for its faults).

Not modelled: renames (only syncs of the session file's own inode count, so an agent that
rewrites its session by ``write tmp; fsync tmp; rename`` syncs another inode and is treated
as unsynced, and the rename's directory entry is not tracked); the parent directory's own
entry (a session directory the agent created is taken as durable); any file but the session
(the world, torn-tail fragments, other files the agent keeps).

Wired through ``run_case(..., power_loss=True)`` / ``run_point(..., power_loss=True)``: the
life records its fsyncs (``LifeSpec.power_loss``, ``record_for``) and the injector cuts the
power after each crash (``cut_power``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

__all__ = [
    "FAULT_EVENT",
    "SYNC_LOG",
    "PowerLoss",
    "cut_power",
    "directory_entry_durable",
    "durable_length",
    "lose_unsynced",
    "parse_sync_log",
    "power_target",
    "record_for",
    "record_fsyncs",
]

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

    Sync = Callable[[FileDescriptorLike], None]

SYNC_LOG = "fsyncs.jsonl"
# The trace event a fault done by the harness after a life writes, with whether it acted.
FAULT_EVENT = "fault"


@dataclass(frozen=True, slots=True)
class PowerLoss:
    """What a power loss did to the session file."""

    path: Path
    size_before: int
    size_after: int
    lost: bytes
    # The whole file went: created in this life, its directory never fsynced after.
    vanished: bool = False

    @property
    def dropped(self) -> int:
        return self.size_before - self.size_after


# ---------------------------------------------------------------- pure core


def _records(data: bytes) -> list[dict[str, Any]]:
    """The records of a sync log. A final line without its newline is a record the SIGKILL
    cut short: that fsync may not have completed either, so it is ignored (LevelDB's
    torn-tail rule)."""
    return [json.loads(line) for line in data.split(b"\n")[:-1] if line.strip()]


def parse_sync_log(data: bytes) -> tuple[int, ...]:
    """The synced sizes recorded in a sync log, in order (directory and start records
    are not sizes)."""
    return tuple(int(record["size"]) for record in _records(data) if "size" in record)


def directory_entry_durable(data: bytes) -> bool:
    """Whether the session file's directory entry survives a power loss, given the sync log.

    Only the last life counts (records since its ``start``): a file it found there is
    durable; one it created is durable once its directory was fsynced after the creation
    (the recorder logs a directory sync only while the file exists). A log without a start
    record (recording never began) keeps the file, as before this was modelled."""
    records = _records(data)
    starts = [i for i, record in enumerate(records) if record.get("start")]
    if not starts:
        return True
    start = starts[-1]
    if records[start].get("existed", True):
        return True
    return any(record.get("dir") for record in records[start + 1 :])


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
    """Inside the agent's process: log whether the session file exists now, then its size
    at every sync of it and every sync of its directory while it exists.

    Returns a function that puts the original ``os.fsync``/``os.fdatasync`` back (tests
    need it; a life simply dies with the wrapper installed)."""
    originals: dict[str, Sync] = {"fsync": os.fsync, "fdatasync": os.fdatasync}
    _append_line(log_path, {"start": True, "existed": session_path.exists()})

    def wrap(name: str) -> Sync:
        original = originals[name]

        def synced(fd: FileDescriptorLike) -> None:
            original(fd)
            number = fd if isinstance(fd, int) else fd.fileno()
            stat = os.fstat(number)
            try:
                target = os.stat(session_path)
                parent = os.stat(session_path.parent)
            except FileNotFoundError:
                return  # a directory synced before the file exists does not hold its entry
            # By inode, not by name: the agent may hold the file under any path or fd.
            if (stat.st_dev, stat.st_ino) == (target.st_dev, target.st_ino):
                _append_line(log_path, {"size": stat.st_size})
            elif (stat.st_dev, stat.st_ino) == (parent.st_dev, parent.st_ino):
                _append_line(log_path, {"dir": True})

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
    """After the agent's process died: remove the session file if its directory entry was
    never made durable, else cut it back to its last synced size.

    The cut itself is logged as a sync (it is what the disk now holds), so a later life
    that never syncs loses back to here, not further. ``keep`` receives the lost bytes.
    Returns None when there is no session file (the agent never created one)."""
    try:
        data = session_path.read_bytes()
    except FileNotFoundError:
        return None
    log = log_path.read_bytes() if log_path.exists() else b""
    if not directory_entry_durable(log):
        if keep is not None and data:
            keep.write_bytes(data)
        session_path.unlink()
        _append_line(log_path, {"size": 0, "power_loss": True, "vanished": True})
        return PowerLoss(session_path, len(data), 0, data, vanished=True)
    cut = durable_length(parse_sync_log(log), len(data))
    if cut < len(data):
        if keep is not None:
            keep.write_bytes(data[cut:])
        os.truncate(session_path, cut)
    _append_line(log_path, {"size": cut, "power_loss": True})
    return PowerLoss(session_path, len(data), cut, data[cut:])


# ---------------------------------------------------------------- which file, and proof it acted


def power_target(agent: str, case_dir: Path) -> Path | str:
    """The session file a power loss acts on for ``agent``, or why it cannot act on this
    agent (a sentence). An adapter says so with ``power_session(case_dir) -> Path | str``;
    one that does not (kind 1) keeps crashmatrix's session file."""
    from crashmatrix.harness.agents.loading import adapter_for
    from crashmatrix.harness.lives.casedir import session_path_of

    method = getattr(adapter_for(agent), "power_session", None)
    if callable(method):
        target: Path | str = method(case_dir)
        return target
    return session_path_of(case_dir)


def record_for(agent: str, case_dir: Path) -> Callable[[], None] | None:
    """Inside the life: record the fsyncs of ``agent``'s session (None: the power loss cannot
    act on this agent; ``cut_power`` says so after the crash)."""
    target = power_target(agent, case_dir)
    if isinstance(target, str):
        return None
    return record_fsyncs(target, case_dir / SYNC_LOG)


def cut_power(case_dir: Path, agent: str, life: int) -> PowerLoss | None:
    """In the harness, after life ``life`` crashed: the power goes too. Drops what the
    agent's session never synced (the lost bytes kept as ``power-lost-<life>.bin``) and writes
    to the trace whether the loss acted, and how (``FAULT_EVENT``)."""
    from crashmatrix.harness.lives.tracer import append_event

    target = power_target(agent, case_dir)
    loss: PowerLoss | None = None
    if isinstance(target, str):
        acted, detail = False, target
    else:
        loss = lose_unsynced(target, case_dir / SYNC_LOG, keep=case_dir / f"power-lost-{life}.bin")
        acted, detail = _what_it_did(target, loss)
    append_event(
        case_dir,
        {
            "life": life,
            "event": FAULT_EVENT,
            "fault": "power_loss",
            "acted": acted,
            "detail": detail,
            "dropped": loss.dropped if loss else 0,
        },
    )
    return loss


def _what_it_did(target: Path, loss: PowerLoss | None) -> tuple[bool, str]:
    if loss is None:
        # Every crash point comes after the agent saved something: no file means the
        # adapter names a file the agent does not write, and nothing was put to the test.
        return False, f"no session file {target.name} at the crash: nothing a power loss could drop"
    if loss.vanished:
        return True, (
            f"{target.name} was created in this life and its directory was never fsynced after:"
            f" the file vanished with its {loss.dropped} bytes"
        )
    if loss.dropped:
        return True, f"dropped the {loss.dropped} bytes of {target.name} written after its last fsync"
    return True, f"{target.name} was fully synced at the crash ({loss.size_after} bytes): nothing to drop"
