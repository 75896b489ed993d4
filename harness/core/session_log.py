"""The session file on disk: durable appends and a reader that knows torn from corrupt.

Writing: every append is one ``write()`` of a whole line followed by ``fsync()`` before the
call returns; a file this writer creates also fsyncs its directory, so the new name itself
survives a power loss.

Reading (LevelDB's log-reader rule): a final line without its newline means the writer died
mid-append. It was never acknowledged, so it is dropped and reported as a ``TornTail``. A bad
line anywhere before the end is corruption: ``SessionCorruption`` names file, line and byte,
and nothing after it is trusted.

The reader never modifies a file. The writer, when it opens a file with a torn tail, first
copies the torn bytes to ``<name>.torn-<offset>`` (fsynced) and only then truncates them, so
nothing is lost and the next record does not get glued onto a fragment.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.records import Entry, MessageEntry, entry_from_json
from crashmatrix.harness.errors import SessionCorruption

__all__ = ["FORMAT_VERSION", "Line", "SessionLog", "TornTail", "encode_line", "prompt_view", "split_lines"]

# Records may carry "format_version"; a reader refuses a version newer than it knows
# instead of guessing at fields it has never seen.
FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class TornTail:
    """The partial final line a dead writer left: where it starts and what it held."""

    path: Path
    line: int
    offset: int
    fragment: bytes

    def describe(self) -> str:
        return (
            f"{self.path}:{self.line}: (byte {self.offset}) torn final line of "
            f"{len(self.fragment)} bytes dropped: the writer died mid-append"
        )


@dataclass(frozen=True, slots=True)
class SessionLog:
    path: Path
    entries: tuple[Entry, ...]
    torn_tail: TornTail | None = None
    size: int = 0  # bytes of complete lines
    # End byte offset (exclusive) of each entry's line: "was this record on disk when the
    # world saw the side effect?" compares these with a world event's session_bytes.
    offsets: tuple[int, ...] = ()


def encode_line(record: dict[str, Any]) -> bytes:
    """One record as one JSONL line; compact separators like seed 000's traces."""
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


@dataclass(frozen=True, slots=True)
class Line:
    number: int  # 1-based
    offset: int  # byte offset of its first byte
    end: int  # byte offset just past its newline
    data: bytes  # without the newline


def split_lines(path: Path, data: bytes) -> tuple[list[Line], TornTail | None]:
    """The complete lines of a JSONL file, and the torn final line if the writer died
    mid-append (the one place the torn-tail rule lives; every session reader uses it)."""
    lines: list[Line] = []
    offset = 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        if end == -1:
            return lines, TornTail(path, len(lines) + 1, offset, data[offset:])
        lines.append(Line(len(lines) + 1, offset, end + 1, data[offset:end]))
        offset = end + 1
    return lines, None


def _parse_lines(path: Path, data: bytes) -> SessionLog:
    entries: list[Entry] = []
    lines, torn = split_lines(path, data)
    for line in lines:
        line_no, offset = line.number, line.offset
        try:
            text = line.data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise SessionCorruption(path, line_no, offset + error.start, "line is not valid UTF-8") from error
        if not text.strip():
            raise SessionCorruption(path, line_no, offset, "empty line inside the session")
        try:
            raw = json.loads(text)
        except ValueError as error:
            raise SessionCorruption(path, line_no, offset, f"line is not JSON ({error})") from error
        version = raw.get("format_version", FORMAT_VERSION) if isinstance(raw, dict) else 1
        if isinstance(version, int) and version > FORMAT_VERSION:
            raise SessionCorruption(
                path,
                line_no,
                offset,
                f"record has format_version {version}, newer than {FORMAT_VERSION} which this "
                "crashmatrix reads; upgrade crashmatrix",
            )
        try:
            entries.append(entry_from_json(raw, line=line_no))
        except ValueError as error:
            raise SessionCorruption(path, line_no, offset, str(error)) from error
    size = torn.offset if torn else len(data)
    return SessionLog(path, tuple(entries), torn, size, tuple(line.end for line in lines))


def prompt_view(entries: Iterable[Entry]) -> list[dict[str, Any]]:
    """What the model is shown: message records only, never a ledger line (seed 000)."""
    return [entry.message.to_json() for entry in entries if isinstance(entry, MessageEntry)]
