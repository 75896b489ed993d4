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
written twice, even with the same content, is two effects. A file a probe saw that is gone
at the next one is an effect too (``change: deleted``), or, when its bytes reappear under a
new path, one rename (``change: renamed``): ``rm -rf`` and ``mv`` are seen like writes.

Each probe diffs against what the sources held at the last probe (``_Held``, replayed from
the world's events). The harness writes to the agent's world too -- the scenario's seeded
files (probed before the first life as what the world held), a colleague's edit between
lives, a power loss rolling files back, a torn write's cut of the session -- and each such
writer probes right after its write with ``by=`` naming itself (``harness_wrote``): what it
added or removed is recorded as the harness's (``HARNESS_KIND``, never an agent effect), so
the next probe diffs against the state the harness left. A power loss (or a tear) that takes
an effect the agent made says which (``detail.erases``): the world no longer holds it, and
the checks that count effects do not count it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from crashmatrix.harness.agents.readonly_db import connect_readonly
from crashmatrix.harness.core.globs import matches, matches_any
from crashmatrix.harness.core.world_events import HARNESS_EFFECT_KIND
from crashmatrix.harness.errors import HarnessError

__all__ = [
    "EFFECT_KIND",
    "EXISTING_KIND",
    "HARNESS_KIND",
    "EffectProbe",
    "EffectSpec",
    "Found",
    "count_effects",
    "harness_wrote",
    "scan",
    "watched_files",
]

EFFECT_KIND = "effect"
# What a source already showed before the agent's first life (seeded files): not an effect.
EXISTING_KIND = "effect_existing"
# What the harness itself added to or removed from a source (between lives, a power loss):
# shown in the timeline, never the agent's effect (harness.core.world_events).
HARNESS_KIND = HARNESS_EFFECT_KIND
# ``detail.change`` of a probe's event: a new record (the default), a file gone, a file moved.
ADDED, DELETED, RENAMED, REMOVED = "added", "deleted", "renamed", "removed"
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
    # files: globs of paths the glob in ``path`` names that are not effects (a mail's tmp/ copy)
    exclude: tuple[str, ...] = ()

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
            if not matches(relative, spec.path) or matches_any(relative, spec.exclude):
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


def watched_files(
    specs: Iterable[EffectSpec], also_watched: Iterable[str] = ()
) -> dict[str, tuple[str, ...]]:
    """The suite's tools whose effects show only as files (no JSONL line, row, service or
    interception of theirs; ``also_watched``: the tools a service or an interception shows)
    -> the globs their probes watch. Such a tool's call on a path outside them acts unseen,
    so "told success, nothing happened" cannot be judged for it."""
    specs = tuple(specs)
    other = set(also_watched) | {spec.tool for spec in specs if spec.source != "files"}
    out: dict[str, tuple[str, ...]] = {}
    for spec in specs:
        if spec.source == "files" and spec.tool not in other:
            out[spec.tool] = (*out.get(spec.tool, ()), spec.path)
    return out


def count_effects(specs: Iterable[EffectSpec], workspace: Path) -> dict[str, int]:
    """The world counts the agent's own world adds, by world key (``emails``, ...): what the
    sources show after the last life."""
    counts: dict[str, int] = {}
    for spec in specs:
        if spec.counts:
            counts[spec.counts] = counts.get(spec.counts, 0) + len(scan(spec, workspace))
    return counts


def _path_of(identity: str) -> str:
    """A file effect's path: its identity is ``path:sha:mtime|inode=N``."""
    return identity.partition(_INODE)[0].rsplit(":", 2)[0]


def _sha_of(identity: str) -> str:
    return identity.partition(_INODE)[0].rsplit(":", 2)[1]


@dataclass(frozen=True, slots=True)
class _Held:
    """One record a source showed at the last probe, as the world's events tell it."""

    source: str  # the spec's label (files:notes/*, jsonl:outbox.jsonl, ...)
    seq: int  # the event that recorded it
    kind: str  # EFFECT_KIND (the agent's), EXISTING_KIND or HARNESS_KIND
    copied: bool  # recorded in another directory (a copied case): matched without its inode

    @property
    def is_file(self) -> bool:
        return self.source.startswith("files:")


class EffectProbe:
    """Finds the effects that appeared (and the files that went) since the last probe and
    records them as world events.

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
        self._held: dict[str, _Held] | None = None
        self._busy = False  # a probe's own reads must not probe again (fsync wrapper)

    def _here(self) -> str:
        """This workspace as a directory on disk: a case copied from a shared first crash
        (``shutil.copytree``) is another directory, whose files have other inodes."""
        try:
            info = self.workspace.stat()
        except OSError:
            return ""
        return f"{info.st_dev}:{info.st_ino}"

    def _holding(self) -> dict[str, _Held]:
        """What the sources held at the last probe: the world's probe events replayed in
        order (added, deleted, renamed, removed by the harness). A file recorded in another
        directory (the first life of a copied case) is matched without its inode part: same
        path, bytes and mtime."""
        if self._held is None:
            here = self._here()
            self._held = {}
            for event in self.world.events():
                if event.kind in (EFFECT_KIND, EXISTING_KIND, HARNESS_KIND) and isinstance(
                    event.detail, Mapping
                ):
                    copied = event.detail.get("workspace", here) != here
                    self._apply(event.kind, event.seq, event.detail, copied=copied)
        return self._held

    def _apply(self, kind: str, seq: int, detail: Mapping[str, Any], *, copied: bool = False) -> None:
        """One probe event, applied to what the sources hold."""
        assert self._held is not None
        held = self._held
        identity = str(detail.get("identity"))
        source = str(detail.get("source", ""))
        change = detail.get("change", ADDED)
        if change in (DELETED, REMOVED):
            held.pop(identity, None)
            return
        if change == RENAMED:
            held.pop(str(detail.get("from_identity")), None)
        if source.startswith("files:"):
            # A file holds one content at a time: a new write of a path supersedes the last.
            path = _path_of(identity)
            for old in [i for i, h in held.items() if h.source == source and _path_of(i) == path]:
                del held[old]
        held[identity] = _Held(source, seq, kind, copied)

    def _matches(self, found: Found, held: Mapping[str, _Held], copied: set[str]) -> bool:
        if found.identity in held:
            return True
        return found.spec.source == "files" and found.identity.partition(_INODE)[0] in copied

    def probe(
        self,
        where: str,
        *,
        pid: int | None = None,
        baseline: bool = False,
        by: str = "",
        erases: bool = False,
    ) -> None:
        """Record, as world events, what changed in the sources since the last probe.

        ``baseline``: what the sources show is the world before the agent's first life
        (files the scenario seeded), recorded as such, never as the agent's effects. ``by``:
        the harness just wrote to the agent's world (``external_write``, ``power_loss``, ...):
        what it added or removed is recorded as the harness's, so the next probe of a life
        diffs against it; ``erases``: what it removed of the agent's effects was never made
        durable (a power loss) or never finished (a torn line): they are not in the world."""
        if not self.specs or self._busy:
            return
        self._busy = True
        try:
            held = self._holding()
            found = [f for spec in self.specs for f in scan(spec, self.workspace)]
            copied = {i.partition(_INODE)[0] for i, h in held.items() if h.copied and h.is_file}
            fresh = [f for f in found if not self._matches(f, held, copied)]
            labels = {spec.label for spec in self.specs}
            now_ids = {f.identity for f in found}
            now_stripped = {f.identity.partition(_INODE)[0] for f in found if f.spec.source == "files"}
            gone = {
                i: h
                for i, h in held.items()
                if h.source in labels
                and i not in now_ids
                and not (h.copied and i.partition(_INODE)[0] in now_stripped)
            }
            events = self._changes(found, fresh, gone, baseline=baseline, by=by, erases=erases)
            here = self._here()
            now = self.session_size()
            if events:
                # Files of one source gone by one probe went in one run (``rm -rf dist``): each
                # later one names the first (``part_of``), so they count as one effect.
                first_gone: dict[str, int] = {}
                with self.world.transaction() as conn:
                    for kind, spec, found_one, detail in events:
                        detail = {
                            **detail,
                            "workspace": here,
                            "source": spec.label,
                            "counts": spec.counts,
                            "seen_at": where,
                            "seen_at_bytes": now,
                        }
                        if by:
                            detail["by"] = by
                        gone_too = detail.get("change") == DELETED and spec.label in first_gone
                        if gone_too:
                            detail["part_of"] = first_gone[spec.label]
                        seq = self.world.record_event(
                            conn,
                            kind,
                            spec.tool,
                            tool_call_id=found_one.id_field("tool_call_id") if found_one else None,
                            execution_id=found_one.id_field("execution_id") if found_one else None,
                            idempotency_key=found_one.id_field("idempotency_key") if found_one else None,
                            detail=detail,
                            # The harness wrote while no life ran: the session's size now.
                            session_bytes=now if by else self.last_bytes,
                            pid=pid,
                        )
                        self._apply(kind, seq, detail)
                        if detail.get("change") == DELETED and not gone_too:
                            first_gone[spec.label] = seq
            self.last_bytes = now
            self.recorded(now)
        finally:
            self._busy = False

    def _changes(
        self,
        found: Sequence[Found],
        fresh: Sequence[Found],
        gone: Mapping[str, _Held],
        *,
        baseline: bool,
        by: str,
        erases: bool,
    ) -> list[tuple[str, EffectSpec, Found | None, dict[str, Any]]]:
        """(kind, spec, the record if there is one, detail) for each change found."""
        by_label = {spec.label: spec for spec in self.specs}
        out: list[tuple[str, EffectSpec, Found | None, dict[str, Any]]] = []
        if baseline or by:
            kind = HARNESS_KIND if by else EXISTING_KIND
            for identity, held in gone.items():
                detail: dict[str, Any] = {"identity": identity, "change": REMOVED}
                if erases and held.kind == EFFECT_KIND:
                    detail["erases"] = held.seq
                out.append((kind, by_label[held.source], None, detail))
            out += [
                (kind, f.spec, f, {"identity": f.identity, "change": ADDED, "record": _record(f)})
                for f in fresh
            ]
            return out
        # The agent's own probe. A JSONL line or a row that went is the agent's business (a
        # relay consumed it, a torn tail was cut): only files are effects when they go.
        present = {_path_of(f.identity) for f in found if f.spec.source == "files"}
        renamed: set[str] = set()
        for identity, held in gone.items():
            path = _path_of(identity) if held.is_file else ""
            if not held.is_file or path in present:
                continue  # not a file, or rewritten (the new write is the effect)
            spec = by_label[held.source]
            moved = next(
                (
                    f
                    for f in fresh
                    if f.spec.label == held.source
                    and f.identity not in renamed
                    and _sha_of(f.identity) == _sha_of(identity)
                ),
                None,
            )
            if moved is not None:
                renamed.add(moved.identity)
                detail = {
                    "identity": moved.identity,
                    "change": RENAMED,
                    "from_identity": identity,
                    "record": _record(moved, {"from": path}),
                }
                out.append((EFFECT_KIND, spec, moved, detail))
            else:
                record = json.dumps({"path": path, "deleted": True})
                out.append(
                    (EFFECT_KIND, spec, None, {"identity": identity, "change": DELETED, "record": record})
                )
        out += [
            (EFFECT_KIND, f.spec, f, {"identity": f.identity, "change": ADDED, "record": _record(f)})
            for f in fresh
            if f.identity not in renamed
        ]
        return out


def _record(found: Found, extra: Mapping[str, Any] | None = None) -> str:
    """What of a found record an event keeps (the timeline and failure texts show it)."""
    return json.dumps({**found.record, **(extra or {})}, default=str, ensure_ascii=False)[:_RECORD_CHARS]


def harness_wrote(
    specs: Sequence[EffectSpec],
    workspace: Path,
    world: Any,
    session_size: Callable[[], int],
    by: str,
    *,
    erases: bool = False,
) -> None:
    """After the harness wrote to the agent's world (``by``: ``external_write``,
    ``power_loss``): what changed in the sources is recorded as the harness's, so no probe of
    the agent's lives takes it for an effect of the agent."""
    EffectProbe(specs, workspace, world, session_size).probe(f"after {by}", by=by, erases=erases)
