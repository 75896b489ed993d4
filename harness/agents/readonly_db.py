"""Opening an agent's own SQLite database read-only, whatever its path holds.

The harness reads an agent's databases (its session, its effects) while the agent may be
writing them, so it opens them read-only through a ``file:`` URI. A URI gives ``#`` and
``?`` meaning, and case directories are named after crash points (``after_approved[call_0#2]``):
an unquoted path was cut at the ``#`` and read as a database that does not exist -- an
empty session, so every turn was sent again.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from pathlib import Path

__all__ = ["connect_readonly", "readonly_uri"]


def readonly_uri(path: Path) -> str:
    return f"file:{urllib.parse.quote(str(path))}?mode=ro"


def connect_readonly(path: Path, *, timeout: float = 5.0) -> sqlite3.Connection:
    return sqlite3.connect(readonly_uri(path), uri=True, timeout=timeout)
