"""The agent's own side effects, counted: effect probes for agents that run their own tools.

A team's agent sends mail through its own code, writes orders to its own database, files to
its own folders. The adapter YAML says where those effects show (``effects:``): lines of a
JSONL file, rows of a SQLite query, files matching a glob. A probe reads those sources and
records every effect it has not seen before as a world event (kind ``effect``), so the same
invariants, world expectations, diffs and timelines work for the agent's own world as for
the mock tools'.

When an effect happened is known only between two probes: its event's ``session_bytes`` is
the session's size at the previous probe (at least), ``detail.seen_at_bytes`` the size when
it was found (at most). Probes run where the harness sees a moment -- at every boundary and
fsync of a kind-2 agent, at every loopback request of a kind-3 one, at the start of a life
and after it ended (in the harness's process, for a life that was killed) -- so a correct
agent's effect falls after its ``running`` line and a wrong agent's before it; where the
bounds cannot tell, the check says so instead of guessing.

Identities: a JSONL effect is its line (number and content), a SQLite effect its row's
first column, a file effect its path, content, inode and modification time: a file
written twice, even with the same content, is two effects.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from crashmatrix.harness.agents.readonly_db import connect_readonly
from crashmatrix.harness.errors import HarnessError

__all__ = ["EFFECT_KIND", "EXISTING_KIND", "EffectProbe", "EffectSpec", "Found", "count_effects", "scan"]

EFFECT_KIND = "effect"
# What a source already showed before the agent's first life (seeded files): not an effect.
EXISTING_KIND = "effect_existing"
# What of a found record an event keeps (the timeline and failure texts show it).
_RECORD_CHARS = 300


@dataclass(frozen=True, slots=True)
class EffectSpec:
    """One declared source of the agent's effects (an entry of ``effects:``)."""

    tool: str  # the suite's tool whose effect this is (send_email, create_order, ...)
    source: Literal["jsonl", "sqlite", "files"]
    path: str  # relative to the workspace: the JSONL file, the database, or a glob of files
    query: str = ""  # sqlite: a SELECT; its first column identifies a row
    where: Mapping[str, Any] = field(default_factory=dict)  # jsonl: field -> value to keep
    counts: str = ""  # the world key it counts toward (emails, orders, rows:<table>, ...)
    # Our identity field -> a dotted path in the record: tool_call_id, execution_id,
    # idempotency_key tie an effect to its call ("at most once" is judged per call).
    ids: Mapping[str, str] = field(default_factory=dict)
    where_declared: str = ""  # "adapter.yaml:12:5", for messages

    @property
    def label(self) -> str:
        return f"{self.source}:{self.path}"


@dataclass(frozen=True, slots=True)
class Found:
    """One effect as a source shows it now."""

    spec: EffectSpec
    identity: str
    record: Mapping[str, Any]

    def id_field(self, ours: str) -> str | None:
        path = self.spec.ids.get(ours)
        if not path:
            return None
        value: Any = self.record
        for part in path.split("."):
            if isinstance(value, Mapping) and part in value:
                value = value[part]
            else:
                return None
        return None if value is None else str(value)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def _jsonl(spec: EffectSpec, workspace: Path) -> list[Found]:
    path = workspace / spec.path
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    found: list[Found] = []
    # The last piece has no newline: empty, or a line the agent is writing (or died writing).
    for number, line in enumerate(data.split(b"\n")[:-1], start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue  # not an effect this declaration describes; the agent's own business
        if not isinstance(record, dict):
            continue
        if any(record.get(key) != value for key, value in spec.where.items()):
            continue
        found.append(Found(spec, f"{spec.path}#{number}:{_digest(line)}", record))
    return found


def _sqlite(spec: EffectSpec, workspace: Path) -> list[Found]:
    path = workspace / spec.path
    if not path.exists():
        return []
    try:
        # Read-only, and never creating the file: the agent's database is the agent's.
        conn = connect_readonly(path)
    except sqlite3.Error as error:
        raise HarnessError(f"{spec.where_declared}: cannot open {spec.path} ({error})") from error
    try:
        conn.row_factory = sqlite3.Row
        try:
            rows = conn.execute(spec.query).fetchall()
        except sqlite3.OperationalError as error:
            if "no such table" in str(error):
                return []  # the agent has not created it yet: no effect so far
            raise HarnessError(
                f"{spec.where_declared}: the effects query on {spec.path} failed ({error}); fix the query"
            ) from error
    finally:
        conn.close()
    return [Found(spec, f"{spec.path}#{json.dumps(row[0], default=str)}", dict(row)) for row in rows]


_INODE = "|inode="  # a file effect's identity ends with its inode


def _files(spec: EffectSpec, workspace: Path) -> list[Found]:
    found: list[Found] = []
    for directory, dirnames, filenames in os.walk(workspace):
        # crashmatrix's own files (the normalised session copy) are never the agent's effects.
        dirnames[:] = sorted(d for d in dirnames if not (directory == str(workspace) and d == ".agent_state"))
        for name in sorted(filenames):
            path = Path(directory) / name
            relative = path.relative_to(workspace).as_posix()
            if not fnmatch.fnmatchcase(relative, spec.path):
                continue
            try:
                info = path.lstat()
                data = path.read_bytes()
            except OSError:
                continue  # removed between the listing and the read
            digest = _digest(data)
            # The inode tells a second atomic write of the same bytes from the first; it is
            # last because a copied case has new inodes (see EffectProbe._known).
            identity = f"{relative}:{digest}:{info.st_mtime_ns}{_INODE}{info.st_ino}"
            found.append(Found(spec, identity, {"path": relative, "sha256": digest, "bytes": len(data)}))
    return found


_SOURCES: Mapping[str, Callable[[EffectSpec, Path], list[Found]]] = {
    "jsonl": _jsonl,
    "sqlite": _sqlite,
    "files": _files,
}


def scan(spec: EffectSpec, workspace: Path) -> list[Found]:
    """Every effect ``spec``'s source shows now."""
    return _SOURCES[spec.source](spec, workspace)


def count_effects(specs: Iterable[EffectSpec], workspace: Path) -> dict[str, int]:
    """The world counts the agent's own world adds, by world key (``emails``, ...): what the
    sources show after the last life."""
    counts: dict[str, int] = {}
    for spec in specs:
        if spec.counts:
            counts[spec.counts] = counts.get(spec.counts, 0) + len(scan(spec, workspace))
    return counts


class EffectProbe:
    """Finds the effects that appeared since the last probe and records them as world events.

    ``session_size`` gives the agent's session size now, in the coordinates the verdict
    reads it in (the normalised session). ``recorded`` is called with the size at each probe
    (the life's trace keeps it, so a probe after the life died knows the last one)."""

    def __init__(
        self,
        specs: Sequence[EffectSpec],
        workspace: Path,
        world: Any,  # mock_tools.world.World (not imported: this module is also used at load time)
        session_size: Callable[[], int],
        *,
        last_bytes: int = -1,
        recorded: Callable[[int], None] = lambda size: None,
    ) -> None:
        self.specs = tuple(specs)
        self.workspace = workspace
        self.world = world
        self.session_size = session_size
        self.last_bytes = last_bytes
        self.recorded = recorded
        self._seen: set[str] | None = None
        self._busy = False  # a probe's own reads must not probe again (fsync wrapper)

    def _here(self) -> str:
        """This workspace as a directory on disk: a case copied from a shared first crash
        (``shutil.copytree``) is another directory, whose files have other inodes."""
        try:
            info = self.workspace.stat()
        except OSError:
            return ""
        return f"{info.st_dev}:{info.st_ino}"

    def _known(self) -> set[str]:
        """The identities already recorded. One recorded in another directory (the first life
        of a copied case) is known without its inode part: same path, bytes and mtime."""
        if self._seen is None:
            here = self._here()
            self._seen = set()
            for kind in (EFFECT_KIND, EXISTING_KIND):
                for event in self.world.events(kind):
                    if not isinstance(event.detail, Mapping):
                        continue
                    identity = str(event.detail.get("identity"))
                    self._seen.add(identity)
                    copied = event.detail.get("workspace", here) != here
                    if copied and str(event.detail.get("source", "")).startswith("files:"):
                        self._seen.add(identity.partition(_INODE)[0])
        return self._seen

    def _is_known(self, found: Found, known: set[str]) -> bool:
        if found.identity in known:
            return True
        return found.spec.source == "files" and found.identity.partition(_INODE)[0] in known

    def probe(self, where: str, *, pid: int | None = None, baseline: bool = False) -> None:
        """Record, as world events, the effects not seen before. ``baseline``: what the
        sources show is the world before the agent's first life (files the scenario seeded),
        recorded as such, never as the agent's effects."""
        if not self.specs or self._busy:
            return
        self._busy = True
        try:
            known = self._known()
            fresh = [
                f for spec in self.specs for f in scan(spec, self.workspace) if not self._is_known(f, known)
            ]
            here = self._here()
            now = self.session_size()
            if fresh:
                with self.world.transaction() as conn:
                    for found in fresh:
                        self.world.record_event(
                            conn,
                            EXISTING_KIND if baseline else EFFECT_KIND,
                            found.spec.tool,
                            tool_call_id=found.id_field("tool_call_id"),
                            execution_id=found.id_field("execution_id"),
                            idempotency_key=found.id_field("idempotency_key"),
                            detail={
                                "identity": found.identity,
                                "workspace": here,
                                "source": found.spec.label,
                                "counts": found.spec.counts,
                                "seen_at": where,
                                "seen_at_bytes": now,
                                "record": json.dumps(found.record, default=str, ensure_ascii=False)[
                                    :_RECORD_CHARS
                                ],
                            },
                            session_bytes=self.last_bytes,
                            pid=pid,
                        )
                        known.add(found.identity)
            self.last_bytes = now
            self.recorded(now)
        finally:
            self._busy = False
