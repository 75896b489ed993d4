"""Durable file primitives the world and the file tools share.

``atomic_write`` is the full-replace write seed 000 relies on for ``write_file``'s natural
idempotency: a reader (or a crash) sees the old content or the new content, never a mix.
Its ``step`` runs between its two steps (the temp file synced, the rename not done): a
crash there is the half state of a correct write, the target still old.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from crashmatrix.harness.session_file import fsync_directory

__all__ = ["append_durably", "atomic_write", "sha256_bytes", "sha256_of_file", "sha256_text"]


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    return sha256_bytes(text.encode("utf-8"))


def sha256_of_file(path: Path) -> str | None:
    """The content hash, or None when the file does not exist (seed 004's null base)."""
    try:
        return sha256_bytes(path.read_bytes())
    except FileNotFoundError:
        return None


def make_directories(directory: Path) -> None:
    """``mkdir -p`` made durable: each directory created is fsynced into its parent, so a
    file written below it does not vanish with it at a power loss (docs/persistence.md:
    an entry is durable only once its directory was fsynced)."""
    missing: list[Path] = []
    here = directory
    while not here.exists():
        missing.append(here)
        here = here.parent
    for created in reversed(missing):
        created.mkdir(exist_ok=True)
        fsync_directory(created.parent)


def atomic_write(path: Path, data: bytes, *, step: Callable[[], None] | None = None) -> None:
    """Replace ``path`` with ``data``: temp file in the same directory, fsync, rename, fsync dir.

    The temp file must live in the target's directory because ``os.replace`` is only atomic
    within one filesystem; the directory fsync makes the rename itself survive power loss.
    ``step`` (a tool's ``ToolContext.step``) is called once the temp file is synced and
    before the rename: a process killed there leaves the temp file and the old target.
    """
    make_directories(path.parent)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if step is not None:
            step()
        os.replace(tmp_name, path)
    except BaseException:
        # Leave no temp file behind: a stray file would show up in the world snapshot.
        Path(tmp_name).unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def append_durably(path: Path, data: bytes) -> None:
    """Append with O_APPEND and fsync: what ``echo x >> file`` does, made durable."""
    make_directories(path.parent)
    created = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_directory(path.parent)
