"""Where each torn write's bytes went: the fragment a dying writer left, followed to the final
session file (issue 32).

A torn write (``torn_write[call:label]``, a first crash; or a second crash while the agent
recovers, ``recovery_torn_writes``) lets the first half of one session line reach the file,
synced, and kills the writer. The life that tears it records the fragment in the trace (a
``torn`` event: the file, the byte offset where the line began, the bytes that landed); for a
foreign agent the supervisor that cuts its line after the death records the cut. After the
case, ``account`` follows each fragment into the final file and names its fate:

* ``dropped`` -- no line of the final file starts with it: the next writer cut it (LevelDB's
  log reader drops a torn tail: it was never acknowledged). Legitimate; the record it began
  was never durable, and the other invariants judge what the agent made of that (a lost
  ``running`` is a call that never started, never one that ran and may not be repeated);
* ``set_aside`` -- dropped, and kept in a file beside the session (the reference writer's
  ``<session>.torn-<offset>``): nothing lost, for a person to look at;
* ``torn_tail`` -- still the unterminated end of the file: no life wrote after it (a reader
  drops it, as the writer's next open would);
* ``kept_unreadable`` -- a line of its own (a newline put after it): an agent whose reader
  skips bad lines keeps it so. The session's reader judges that line (ours calls a bad line
  before the end corruption); the bytes are accounted for and stand for no record;
* ``glued`` -- the start of a longer line that is no record: the next record was appended
  onto the fragment, both are lost to any reader, and a reader that resynchronises at the
  next ``{`` would take whatever follows for a record. Corruption, always: the invariant
  ``torn_fragments_accounted`` (``harness.verdict.invariants``) fails it.

A line that starts with the fragment's bytes and parses as a whole JSON value is a record
written whole (the same record written again after the cut): the fragment is not in it.

Pure: bytes in, fates out. ``harness.observation.reading`` reads the files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from crashmatrix.harness.core.trace import TraceEvent

__all__ = [
    "FATES",
    "NOTE",
    "TORN_EVENT",
    "FragmentFate",
    "TornFragment",
    "account",
    "account_all",
    "torn_event",
    "torn_fragments",
]

# The trace event a life writes just before it lets a torn line's fragment land and dies.
TORN_EVENT = "torn"

# How each fate begins in a verdict's notes (every report shows them; a failure's text too).
NOTE = "torn fragment: "

# Every fate, the acceptable ones first; only ``glued`` breaks the invariant.
FATES = ("dropped", "set_aside", "torn_tail", "kept_unreadable", "glued")


@dataclass(frozen=True, slots=True)
class TornFragment:
    """The bytes of one torn write: which life tore which call's record, in which file (relative
    to the case directory), at which byte offset the line began."""

    life: int
    call: str
    label: str  # the record it began: a ledger status or ``tool_result``
    path: str
    offset: int
    data: bytes

    @property
    def point(self) -> str:
        return f"torn_write[{self.call}:{self.label}]"

    def name(self) -> str:
        return (
            f"life {self.life}'s {self.point} ({len(self.data)} bytes at byte {self.offset} of {self.path})"
        )


@dataclass(frozen=True, slots=True)
class FragmentFate:
    """What became of one fragment in the final session file: a fate of ``FATES`` and one line
    saying where its bytes went."""

    fragment: TornFragment
    fate: str
    where: str

    @property
    def acceptable(self) -> bool:
        return self.fate != "glued"

    def describe(self) -> str:
        return f"{NOTE}{self.fragment.name()}: {self.fate}: {self.where}"


def torn_event(life: int, call: str, label: str, path: str, offset: int, data: bytes) -> dict[str, object]:
    """The trace line of a torn write (bytes as hex: a cut may split a UTF-8 character)."""
    return {
        "life": life,
        "event": TORN_EVENT,
        "call": call,
        "label": label,
        "path": path,
        "offset": offset,
        "fragment": data.hex(),
    }


def torn_fragments(trace: Sequence[TraceEvent]) -> tuple[TornFragment, ...]:
    """Every torn write of a case's lives, in the order they happened: one per life, its last
    ``torn`` event (a supervisor cuts a foreign agent's own line after the life's death, and
    says so after the half line the life wrote to its scratch file: the cut is the tear)."""
    by_life: dict[int, TornFragment] = {}
    for event in trace:
        if event.get("event") != TORN_EVENT:
            continue
        life = int(event.get("life", 0))
        by_life.pop(life, None)  # re-inserted last: the order of the tears that count
        by_life[life] = TornFragment(
            life,
            str(event.get("call", "")),
            str(event.get("label", "")),
            str(event.get("path", "")),
            int(event.get("offset", 0)),
            bytes.fromhex(str(event.get("fragment", ""))),
        )
    return tuple(by_life.values())


def _whole(line: bytes) -> bool:
    """A line a reader takes for a record: one JSON value, all of it."""
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def account(
    fragment: TornFragment, final: bytes | None, beside: Mapping[str, bytes] | None = None
) -> FragmentFate:
    """The fate of ``fragment`` in the final bytes of its file (None: the file is gone), with
    ``beside`` the files next to it (name -> bytes) where a writer may have set it aside.

    Every line of the final file is looked at, not only the one at the fragment's offset: an
    agent may rewrite its file (a compaction) and move the bytes."""
    data = fragment.data
    if not data:
        return FragmentFate(fragment, "dropped", "no byte of the line landed")
    if final is None:
        return FragmentFate(fragment, "dropped", f"{fragment.path} is gone")
    start = 0
    number = 0
    kept: str = ""
    tail: str = ""
    while start < len(final):
        number += 1
        end = final.find(b"\n", start)
        line = final[start:] if end == -1 else final[start:end]
        if line.startswith(data):
            at = f"line {number} (byte {start})"
            if end == -1:
                tail = f"still the unterminated last line of {fragment.path}, {at}"
            elif line == data:
                kept = (
                    kept
                    or f"kept as {at} of {fragment.path}, a line of its own that no reader takes for a record"
                )
            elif not _whole(line):
                rest = line[len(data) : len(data) + 40].decode("utf-8", "backslashreplace")
                return FragmentFate(
                    fragment,
                    "glued",
                    f"{at} of {fragment.path} begins with it and runs on into other bytes ({rest!r}...): "
                    "a later record was appended onto the torn line, and neither is readable; a writer "
                    "must cut a torn tail (or end it with a newline) before it appends",
                )
        if end == -1:
            break
        start = end + 1
    if kept:
        return FragmentFate(fragment, "kept_unreadable", kept)
    if tail:
        return FragmentFate(fragment, "torn_tail", tail)
    aside = sorted(name for name, content in (beside or {}).items() if content == data)
    if aside:
        return FragmentFate(fragment, "set_aside", f"cut from {fragment.path} and kept in {aside[0]}")
    return FragmentFate(
        fragment,
        "dropped",
        f"cut from {fragment.path} (no line begins with it): the record it began was never durable",
    )


def account_all(
    fragments: Sequence[TornFragment],
    files: Mapping[str, bytes | None],
    beside: Mapping[str, Mapping[str, bytes]] | None = None,
) -> tuple[FragmentFate, ...]:
    """``account`` for each fragment: ``files`` each file's final bytes by path, ``beside``
    the files next to each (path -> name -> bytes)."""
    return tuple(account(f, files.get(f.path), (beside or {}).get(f.path)) for f in fragments)
