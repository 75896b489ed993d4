"""The session lease: one process at a time resumes a session.

A job runner with at-least-once delivery, or a pod restarted while the old one still runs,
can start a second process on a session that another is already recovering. Both would
find the same pending call and decide its fate, and a call the ledger says never started
would run twice. The ledger orders one process's steps; it cannot order two processes.

The lease is an ``flock`` on ``<session>.lease`` beside the session file, taken before the
session is read (opening the writer may already set a torn tail aside: a write) and held
for the life of the process. The kernel drops it when the holder dies, by SIGKILL too, so a
crashed holder never leaves a stale lease to expire. Nothing is written into the file: the
loser names the holder from the kernel's own table of locks (``/proc/locks``), so the
lease adds no byte a power loss could tear (the file is empty, its name made durable by
the directory fsync that makes the new session's name durable).

A second process finds the lease held and stops before it reads or writes anything:
``SessionLeased``, one line naming the holder's pid. The command line exits with
``EXIT_LEASED`` (75, ``EX_TEMPFAIL``: a job runner delivers the job again later, when the
holder has finished); in the harness the life ends normally, its stderr says why.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

__all__ = ["EXIT_LEASED", "SessionLease", "SessionLeased", "lease_path"]

# sysexits.h's EX_TEMPFAIL: the work is not done, try again later.
EXIT_LEASED = 75
_LOCKS = Path("/proc/locks")


class SessionLeased(RuntimeError):
    """Another living process holds this session's lease."""

    def __init__(self, session: Path, holder: int | None) -> None:
        who = f"pid {holder}" if holder else "another process"
        super().__init__(
            f"{session}: leased by {who}, which is resuming this session; exiting without "
            "reading or writing it (run again once that process has ended)"
        )
        self.session = session
        self.holder = holder


def lease_path(session: Path) -> Path:
    return session.with_name(session.name + ".lease")


class SessionLease:
    """The lease on ``session``, held from ``acquire`` until ``release`` or the process ends."""

    def __init__(self, session: Path, fd: int) -> None:
        self.session = session
        self._fd = fd

    @classmethod
    def acquire(cls, session: Path) -> SessionLease:
        """Take the lease without waiting, or raise ``SessionLeased`` naming its holder."""
        path = lease_path(session)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise SessionLeased(session, holder) from None
        except BaseException:
            os.close(fd)
            raise
        return cls(session, fd)

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # the only descriptor (not inherited: O_CLOEXEC): drops the flock
            self._fd = -1


def _holder(fd: int) -> int | None:
    """The pid holding an flock on ``fd``'s file, from ``/proc/locks`` (Linux); None elsewhere
    or when the holder let go meanwhile. A line: ``1: FLOCK ADVISORY WRITE 4242 08:01:1317 0 EOF``."""
    inode = os.fstat(fd).st_ino
    try:
        table = _LOCKS.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in table.splitlines():
        fields = line.split()
        if len(fields) < 6 or "FLOCK" not in fields or "->" in fields:
            continue  # not an flock, or a waiter ("-> FLOCK ...") rather than the holder
        where = fields.index("FLOCK")
        pid, file_id = fields[where + 3], fields[where + 4]
        if file_id.rsplit(":", 1)[-1] == str(inode) and pid.isdigit():
            return int(pid)
    return None
