"""The session file on disk: durable appends (write + fsync, directory fsync on create, a
torn tail set aside before the next append) and reading it back as a ``SessionLog``."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.records import Entry
from crashmatrix.harness.core.session_log import (
    SessionLog,
    TornTail,
    _parse_lines,
    encode_line,
)

__all__ = ["SessionWriter", "fsync_directory", "read_session"]


def fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_session(path: Path | str) -> SessionLog:
    """Read a session file. A missing file is an empty session (nothing was ever saved)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return SessionLog(path, ())
    return _parse_lines(path, data)


AppendHook = Callable[[Path, bytes], None]


class SessionWriter:
    """Append-only, fsync-per-append writer of one session file.

    ``before_append`` is called with each encoded line before it is written; the crash
    injector uses it to tear a write. Agents never need it.
    """

    def __init__(self, path: Path | str, *, before_append: AppendHook | None = None) -> None:
        self.path = Path(path)
        self.before_append = before_append
        self.repaired: TornTail | None = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if created:
            os.fsync(self._fd)
            fsync_directory(self.path.parent)
        else:
            self._set_aside_torn_tail()

    def _set_aside_torn_tail(self) -> None:
        data = self.path.read_bytes()
        if not data or data.endswith(b"\n"):
            return
        cut = data.rfind(b"\n") + 1
        line = data.count(b"\n", 0, cut) + 1
        self.repaired = TornTail(self.path, line, cut, data[cut:])
        fd = self._open_fragment_file(cut)
        try:
            os.write(fd, data[cut:])
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_directory(self.path.parent)
        os.truncate(self.path, cut)
        os.fsync(self._fd)

    def _open_fragment_file(self, cut: int) -> int:
        """A new file for a torn fragment. O_EXCL, never O_TRUNC: a depth-2 crash can tear the
        recovering life's first append at the same offset as the previous life's, and the
        earlier fragment must not be overwritten (``.torn-N``, then ``.torn-N.2``, ...)."""
        base = f"{self.path.name}.torn-{cut}"
        for attempt in range(1, 10_000):
            name = base if attempt == 1 else f"{base}.{attempt}"
            try:
                return os.open(self.path.with_name(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
        raise FileExistsError(f"too many torn fragments named {base}.* next to {self.path}")

    def append(self, record: dict[str, Any]) -> None:
        """Write one record and return only once it is on stable storage."""
        line = encode_line(record)
        if self.before_append is not None:
            self.before_append(self.path, line)
        view = memoryview(line)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)

    def append_entry(self, entry: Entry) -> None:
        self.append(entry.to_json())

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
