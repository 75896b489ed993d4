"""Power loss: what a crash of the machine, not of the process, leaves of the agent's files.

A SIGKILL keeps the page cache: every ``write()``, ``rename()`` and ``unlink()`` the agent
made reaches the disk, synced or not, so an agent that never calls ``fsync`` passes every
process-crash case. SQLite's crash VFS (``src/test6.c``) and ALICE make the test decide what
a power loss may leave behind; here the rule is what POSIX promises, file by file
(``docs/persistence.md`` has the model, its assumptions and what it leaves out):

* a regular file's bytes are durable as of its last ``fsync``/``fdatasync`` (by inode,
  whatever name or descriptor it was synced through);
* a directory's entries (creates, renames, unlinks, mkdirs in it) are durable as of its
  last ``fsync``: the listing at that moment is what the disk keeps of it;
* nothing earlier than the start of the life that crashed is in doubt: what the disk held
  when that life started (the harness's world, the previous life's durable state, faults
  the harness made between lives) is durable.

The durable state at the crash, the pessimistic one, follows: each tracked directory holds
its entries at its last fsync in this life, else at the life's start (a directory created
in the life whose parent was never fsynced after vanishes with its contents; an unlink never
made durable comes back); each file holds its inode's bytes at its last fsync in this life,
else at the life's start if the inode was there, else nothing (created, never synced: the
ext4 zero-length file). ``legal_outcomes`` enumerates the few other states the ordering
allows (each unsynced change persisted alone, then all of them: the plain SIGKILL's state).

Tracked: the case's world workspace (``world/workspace/``, which holds the reference
agent's session under ``.agent_state/``) and the directory of the power target (the
agent's own session file); that directory's own existence is taken as given, as the
workspace's is (the harness made one, the agent's home holds the other). Not tracked:
SQLite databases and their ``-journal``/``-wal``/``-shm`` (SQLite syncs from C, below
``os.fsync``; a committed transaction is taken as durable), the world's SQLite, and the
harness's own files in the case directory (trace, this recording, stderr).

Two halves, one on each side of the process boundary:

* ``record_tree`` (inside the agent's process, installed by ``record_for``) writes a start
  record (each tracked directory's listing, name -> inode and kind, and a copy of every
  regular file's bytes), then wraps ``os.fsync``/``os.fdatasync``: a synced regular file in
  a tracked root has its bytes copied (a new copy per sync, its log line written AFTER the
  copy so a SIGKILL mid-copy leaves the previous record valid), a synced directory has its
  listing logged. Nothing else is intercepted: the listing at a directory's last fsync IS
  what POSIX makes durable of it, and an inode's bytes are durable as of its last fsync.
  One ``write()`` per log line (``_append_line``) so a record survives the SIGKILL.
* ``cut_power`` (in the harness, after the life died) rebuilds the tracked trees to the
  chosen outcome (SQLite files left alone), keeps what was lost next to the case
  (``power-lost-<life>.bin`` the session's lost bytes, ``power-lost-<life>/`` every other
  file's content before the cut) and writes the ``fault`` event saying what it did. What
  the rollback changed in the agent's own effect sources (``effects:``) is recorded as the
  harness's (``harness.lives.between.harness_wrote``), and an effect it took back as erased.

Which file is the session, and whether a power loss can act at all, is the adapter's to say
(``power_target``; an adapter's ``power_session(case_dir)``):

* kind 1 (native): crashmatrix's session file (``session_path_of``), unless the adapter says
  otherwise;
* kind 2 with a JSONL session: the agent's own file. Its appends and ``fsync`` calls (of the
  file and of its directory) happen in the life's process, so they are recorded exactly like
  a native agent's, and the same rules apply to the files it creates;
* kind 2 with a SQLite session: not applicable. SQLite syncs from its C library, which never
  goes through ``os.fsync``, so the recorder cannot see what it made durable; a reader
  function's or an unreadable session: not applicable, the harness does not know which file
  is the session;
* kind 3 (a black box): not applicable. Its fsyncs happen in another process and are not
  visible to the harness, so its synced bytes cannot be told from the rest.

No silent green: after every crash the harness writes a ``fault`` event to the trace
(``{"event": "fault", "fault": "power_loss", "acted": ..., "detail": ...}``). It acted when
the fsyncs were visible: it rolled files back, or everything was synced at the crash (the
fault happened, with nothing to drop; ``changed`` false). Otherwise (no visibility, no
session file where the adapter said and nothing else changed, or no recording of the life)
it did not act, and a case that would have passed is not applicable with that reason
(``harness.front.cases`` hands the event to the verdict as a fault that did not act, as
``harness.lives.between`` does for its faults).

Wired through ``run_case(..., power_loss=True)`` / ``run_point(..., power_loss=True)``: the
life records (``LifeSpec.power_loss``, ``record_for``) and the injector cuts the power after
each crash (``cut_power``). ``crashmatrix run --crash power@P --power-outcome N`` picks
another legal outcome than the pessimistic one (``OUTCOME``).
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import json
import os
import shutil
import stat
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

__all__ = [
    "FAULT_EVENT",
    "MAX_SINGLE_OUTCOMES",
    "OUTCOME",
    "RECORD_DIR",
    "SYNC_LOG",
    "FileChange",
    "Node",
    "Outcome",
    "PowerLoss",
    "Recording",
    "Root",
    "chosen_outcome",
    "crashed_tree",
    "cut_power",
    "durable_tree",
    "legal_outcomes",
    "parse_recording",
    "power_outcomes",
    "power_target",
    "record_for",
    "record_tree",
    "roots_for",
]

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

    Sync = Callable[[FileDescriptorLike], None]

# The life's recording, inside the case directory (the harness's, never tracked).
RECORD_DIR = "power"
SYNC_LOG = f"{RECORD_DIR}/fsyncs.jsonl"
# The trace event a fault done by the harness after a life writes, with whether it acted.
FAULT_EVENT = "fault"
# Beyond the pessimistic state and the SIGKILL's: at most this many states with one
# unsynced change persisted alone (ALICE's "each pending operation alone"), so a case
# has at most MAX_SINGLE_OUTCOMES + 2 outcomes whatever the agent did.
MAX_SINGLE_OUTCOMES = 6
# Which legal outcome ``cut_power`` leaves when not told (0 = the pessimistic one). The
# command line sets it for one ``crashmatrix run --power-outcome N``.
OUTCOME: contextvars.ContextVar[int] = contextvars.ContextVar("crashmatrix_power_outcome", default=0)

_SQLITE_MAGIC = b"SQLite format 3\x00"
_SQLITE_COMPANIONS = ("-journal", "-wal", "-shm")

# Entry kinds in a listing: regular file, directory, symlink, SQLite (left alone), other.
FILE, DIR, LINK, SQLITE, OTHER = "f", "d", "l", "s", "o"


@contextlib.contextmanager
def chosen_outcome(outcome: int) -> Iterator[None]:
    """Within the block, ``cut_power`` leaves legal outcome ``outcome`` when not told."""
    token = OUTCOME.set(outcome)
    try:
        yield
    finally:
        OUTCOME.reset(token)


# ---------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class Root:
    """A tracked directory, relative to the case directory. ``only``: the names tracked in
    it (a power target's directory that is not inside the workspace: its session file
    only, never the harness's files next to it); None: every name, recursively."""

    path: str
    only: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Node:
    """One entry of a tree (paths relative to the case directory)."""

    kind: str  # FILE, DIR, LINK
    ino: str  # the inode's identity (``_identity``)
    link: str | None = None


@dataclass(frozen=True, slots=True)
class Recording:
    """What a life recorded: the tracked roots and, by inode, the listings and file copies
    at its start and at each directory's and file's last fsync."""

    roots: tuple[Root, ...]
    root_inodes: Mapping[str, str]
    start_dirs: Mapping[str, Mapping[str, tuple[str, str, str | None]]]
    start_files: Mapping[str, str]
    synced_dirs: Mapping[str, Mapping[str, tuple[str, str, str | None]]]
    synced_files: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One legal post-crash state: each tracked path's node, each file's bytes."""

    label: str
    tree: Mapping[str, Node]
    data: Mapping[str, bytes]


@dataclass(frozen=True, slots=True)
class FileChange:
    """What the power loss did to one path (relative to the case directory)."""

    path: str
    what: str  # vanished | emptied | truncated | rolled back | restored | created
    size_before: int
    size_after: int


@dataclass(frozen=True, slots=True)
class PowerLoss:
    """What a power loss did: to the session file (``path``) first, then to every file."""

    path: Path
    size_before: int
    size_after: int
    lost: bytes
    # The whole file went: created in this life, its directory never fsynced after.
    vanished: bool = False
    # Whether anything on disk differs from what the crash left (False: a power loss there
    # is the plain SIGKILL, and a case may reuse the crash's lives).
    changed: bool = False
    files: tuple[FileChange, ...] = ()
    outcome: int = 0
    outcomes: int = 1
    outcome_label: str = ""

    @property
    def dropped(self) -> int:
        return max(0, self.size_before - self.size_after)


# ---------------------------------------------------------------- pure core


def _records(data: bytes) -> list[dict[str, Any]]:
    """The records of a log. A final line without its newline is a record the SIGKILL cut
    short: that sync may not have completed either, so it is ignored (LevelDB's torn-tail
    rule)."""
    return [json.loads(line) for line in data.split(b"\n")[:-1] if line.strip()]


def _listing(raw: Mapping[str, Sequence[Any]]) -> dict[str, tuple[str, str, str | None]]:
    return {name: (str(e[0]), str(e[1]), e[2] if len(e) > 2 else None) for name, e in raw.items()}


def parse_recording(data: bytes) -> Recording | None:
    """The last life's recording in a log (records since its last ``start``), or None when
    recording never began."""
    records = _records(data)
    starts = [i for i, record in enumerate(records) if record.get("start")]
    if not starts:
        return None
    start = records[starts[-1]]
    synced_dirs: dict[str, dict[str, tuple[str, str, str | None]]] = {}
    synced_files: dict[str, str] = {}
    for record in records[starts[-1] + 1 :]:
        if "dir" in record:
            synced_dirs[str(record["dir"])] = _listing(record["entries"])
        elif "sync" in record:
            synced_files[str(record["sync"])] = str(record["copy"])
    return Recording(
        roots=tuple(
            Root(r["path"], tuple(r["only"]) if r.get("only") is not None else None) for r in start["roots"]
        ),
        root_inodes={r["path"]: str(r["ino"]) for r in start["roots"] if r.get("ino") is not None},
        start_dirs={str(ino): _listing(entries) for ino, entries in start["dirs"].items()},
        start_files={str(ino): str(name) for ino, name in start["files"].items()},
        synced_dirs=synced_dirs,
        synced_files=synced_files,
    )


def _join(parent: str, name: str) -> str:
    return f"{parent}/{name}" if parent else name


def _skipped(path: str, roots: Sequence[Root], own: Root) -> bool:
    """A path that belongs to a tracked root nested in ``own`` (tracked there, not here)."""
    return any(r is not own and r.path.startswith(own.path + "/") and _within(path, r.path) for r in roots)


def durable_tree(
    recording: Recording, current_root_inodes: Mapping[str, str]
) -> tuple[dict[str, Node], dict[str, str | None]]:
    """The pessimistic durable state: each tracked path's node, and for every file inode
    the copy holding its durable bytes (None: nothing survives, it was never synced).

    A root's own existence is given; its inode is the one the life started with, else the
    one on disk now (created in the life)."""
    tree: dict[str, Node] = {}

    def listing(ino: str) -> Mapping[str, tuple[str, str, str | None]]:
        if ino in recording.synced_dirs:
            return recording.synced_dirs[ino]
        return recording.start_dirs.get(ino, {})

    def walk(root: Root, path: str, ino: str, only: tuple[str, ...] | None) -> None:
        for name, (child, kind, link) in sorted(listing(ino).items()):
            if only is not None and name not in only:
                continue
            here = _join(path, name)
            if kind in (SQLITE, OTHER) or _skipped(here, recording.roots, root):
                continue
            tree[here] = Node(kind, child, link)
            if kind == DIR:
                walk(root, here, child, None)

    for root in recording.roots:
        ino = recording.root_inodes.get(root.path, current_root_inodes.get(root.path))
        if ino is not None:
            walk(root, root.path, ino, root.only)
    copies: dict[str, str | None] = {}
    for node in tree.values():
        if node.kind == FILE:
            copies[node.ino] = recording.synced_files.get(node.ino, recording.start_files.get(node.ino))
    return tree, copies


def _within(path: str, top: str) -> bool:
    return path == top or path.startswith(top + "/")


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def legal_outcomes(
    durable: Mapping[str, Node],
    crashed: Mapping[str, Node],
    durable_bytes: Mapping[str, bytes],
    crashed_bytes: Mapping[str, bytes],
    roots: Sequence[str] = (),
) -> tuple[Outcome, ...]:
    """The few distinct states a power loss may leave, most pessimistic first, the plain
    SIGKILL's (everything written reached the disk) last.

    The unsynced changes are units: a directory entry that differs between the durable tree
    and the crashed one (a subtree added or removed with its directory; a rename, the same
    inode leaving one name for another, is one unit: rename is atomic), and a file inode
    whose bytes differ from its durable bytes. Outcomes: none persisted, each unit alone
    (at most ``MAX_SINGLE_OUTCOMES``, by path), all of them. A file's bytes in an outcome
    are its durable bytes unless its content unit persisted (an entry may persist without
    its content: the zero-length file after a crash). Partial appends and reordered subsets
    of three or more units are legal too and not enumerated (bounded, like ALICE's
    default exploration)."""
    root_set = set(roots)

    def differs(path: str) -> bool:
        a, b = durable.get(path), crashed.get(path)
        return a != b

    changed = sorted(p for p in set(durable) | set(crashed) if differs(p) and p not in root_set)
    tops = [p for p in changed if not any(_within(p, q) and p != q for q in changed)]
    # Group renames: two top paths naming the same (non-directory) inode, one in the
    # durable tree and one in the crashed tree, are one rename: it persists whole or not.
    leader = list(range(len(tops)))

    def find(i: int) -> int:
        while leader[i] != i:
            i = leader[i]
        return i

    first: dict[str, int] = {}
    for index, top in enumerate(tops):
        for tree in (durable, crashed):
            node = tree.get(top)
            if node is not None and node.kind != DIR:
                other = first.setdefault(node.ino, index)
                leader[find(index)] = find(other)
    grouped: dict[int, set[str]] = {}
    for index, top in enumerate(tops):
        grouped.setdefault(find(index), set()).add(top)
    entry_units = [frozenset(group) for _, group in sorted(grouped.items())]
    content_units = sorted(
        {
            node.ino
            for node in crashed.values()
            if node.kind == FILE and crashed_bytes.get(node.ino, b"") != durable_bytes.get(node.ino, b"")
        },
        key=lambda ino: min(p for p, n in crashed.items() if n.ino == ino and n.kind == FILE),
    )

    def state(entries: Sequence[frozenset[str]], contents: set[str], label: str) -> Outcome:
        tree = dict(durable)
        for unit in entries:
            for top in unit:
                for path in [p for p in tree if _within(p, top)]:
                    del tree[path]
                tree.update({p: n for p, n in crashed.items() if _within(p, top)})
        # A path whose directory is not in this state is not reachable: gone with it.
        kept: dict[str, Node] = {}
        for path in sorted(tree, key=lambda p: p.count("/")):
            parent = _parent(path)
            if parent in root_set or (parent in kept and kept[parent].kind == DIR) or not parent:
                kept[path] = tree[path]
        data = {
            path: (crashed_bytes if node.ino in contents else durable_bytes).get(node.ino, b"")
            for path, node in kept.items()
            if node.kind == FILE
        }
        return Outcome(label, kept, data)

    pessimistic = state((), set(), "only what was synced (the pessimistic state)")
    everything = state(entry_units, set(content_units), "everything written (a plain SIGKILL's state)")
    singles: list[Outcome] = [
        *(state((unit,), set(), f"also the entry of {', '.join(sorted(unit))}") for unit in entry_units),
        *(state((), {ino}, f"also the unsynced bytes of {_name_of(crashed, ino)}") for ino in content_units),
    ]
    distinct: list[Outcome] = []
    # The SIGKILL's state goes last under its own name, even when one unit alone reaches it.
    for outcome in [
        pessimistic,
        *[o for o in singles if not _same(o, everything)][:MAX_SINGLE_OUTCOMES],
        everything,
    ]:
        if not any(_same(outcome, seen) for seen in distinct):
            distinct.append(outcome)
    return tuple(distinct)


def _same(a: Outcome, b: Outcome) -> bool:
    return (a.tree, a.data) == (b.tree, b.data)


def _name_of(tree: Mapping[str, Node], ino: str) -> str:
    return min(p for p, n in tree.items() if n.ino == ino and n.kind == FILE)


# ---------------------------------------------------------------- the agent's side


def _append_line(path: Path, record: dict[str, Any]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode("utf-8"))
    finally:
        os.close(fd)


# statx(2) through libc: Python 3.11's os.stat has no birth time. An inode number alone
# is not a file's identity: a file system reuses a freed number at once (atomic_write's
# rename frees the old target's, the next file created gets it), and a copy of the old
# file's bytes must never stand for the new one's.
_STATX_BTIME, _AT_EMPTY_PATH, _AT_SYMLINK_NOFOLLOW, _AT_FDCWD = 0x800, 0x1000, 0x100, -100
_STATX: Any = None
with contextlib.suppress(OSError, AttributeError):  # no libc statx: inode numbers alone
    _STATX = ctypes.CDLL(None, use_errno=True).statx


def _identity(path: Path | None = None, *, fd: int | None = None) -> str:
    """An inode's identity within a life: its number and, where the file system keeps one,
    its birth time (``"<ino>.<btime ns>"``), so a reused number is another file."""
    number = os.lstat(path).st_ino if path is not None else os.fstat(fd or 0).st_ino
    if _STATX is None:
        return str(number)
    buf = ctypes.create_string_buffer(256)
    if path is not None:
        status = _STATX(_AT_FDCWD, os.fsencode(path), _AT_SYMLINK_NOFOLLOW, _STATX_BTIME, buf)
    else:
        status = _STATX(fd, b"", _AT_EMPTY_PATH, _STATX_BTIME, buf)
    if status != 0 or not struct.unpack_from("I", buf, 0)[0] & _STATX_BTIME:
        return str(number)
    seconds, nanoseconds = struct.unpack_from("qI", buf, 80)  # struct statx: stx_btime
    return f"{number}.{seconds * 1_000_000_000 + nanoseconds}"


def _is_sqlite(path: Path) -> bool:
    if path.name.endswith(_SQLITE_COMPANIONS):
        return True
    try:
        with open(path, "rb") as handle:
            return handle.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def _entry(path: Path, entry: os.DirEntry[str]) -> list[Any]:
    mode = entry.stat(follow_symlinks=False).st_mode
    ident = _identity(path)
    if stat.S_ISLNK(mode):
        return [ident, LINK, os.readlink(path)]
    if stat.S_ISDIR(mode):
        return [ident, DIR]
    if stat.S_ISREG(mode):
        return [ident, SQLITE if _is_sqlite(path) else FILE]
    return [ident, OTHER]


def _list_dir(path: Path, only: tuple[str, ...] | None) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    with os.scandir(path) as entries:
        for entry in entries:
            if only is None or entry.name in only:
                out[entry.name] = _entry(path / entry.name, entry)
    return out


class _Recorder:
    """The life's side: the start record, then one record per sync of a tracked inode."""

    def __init__(self, case_dir: Path, roots: Sequence[Root]) -> None:
        self.case_dir = case_dir
        self.roots = tuple(roots)
        self.dir = case_dir / RECORD_DIR
        self.log = case_dir / SYNC_LOG
        self.copies = 0

    def _copy(self, data: bytes) -> str:
        self.copies += 1
        name = f"{os.getpid()}-{self.copies}"
        (self.dir / name).write_bytes(data)
        return name

    def start(self) -> None:
        # Only the last life counts: the previous life's recording was used by its cut.
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        dirs: dict[str, dict[str, list[Any]]] = {}
        files: dict[str, str] = {}
        roots: list[dict[str, Any]] = []
        for root in self.roots:
            top = self.case_dir / root.path
            ino = _identity(top) if top.is_dir() else None
            roots.append(
                {"path": root.path, "only": list(root.only) if root.only is not None else None, "ino": ino}
            )
            if ino is None:
                continue
            stack: list[tuple[Path, tuple[str, ...] | None]] = [(top, root.only)]
            while stack:
                here, only = stack.pop()
                listing = _list_dir(here, only)
                dirs[_identity(here)] = listing
                for name, (child, kind, *_) in listing.items():
                    path = here / name
                    relative = path.relative_to(self.case_dir).as_posix()
                    if _skipped(relative, self.roots, root):
                        continue
                    if kind == DIR:
                        stack.append((path, None))
                    elif kind == FILE and child not in files:
                        files[child] = self._copy(path.read_bytes())
        _append_line(self.log, {"start": True, "roots": roots, "dirs": dirs, "files": files})

    def _root_of(self, path: Path) -> Root | None:
        try:
            relative = path.relative_to(self.case_dir).as_posix()
        except ValueError:
            return None
        for root in self.roots:
            if root.only is None and _within(relative, root.path):
                return root
            if root.only is not None and (
                relative == root.path
                or (_parent(relative) == root.path and relative.rsplit("/", 1)[-1] in root.only)
            ):
                return root
        return None

    def synced(self, fd: int) -> None:
        """After a successful sync of ``fd``: record it if it is tracked."""
        # The path the descriptor names now (Linux): the agent may hold the file under any
        # name; a deleted inode (" (deleted)") has no name to come back under.
        name = os.readlink(f"/proc/self/fd/{fd}")
        if name.endswith(" (deleted)"):
            return
        path = Path(name)
        root = self._root_of(path)
        if root is None:
            return
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            is_root = path == self.case_dir / root.path
            entries = _list_dir(path, root.only if is_root else None)
            _append_line(self.log, {"dir": _identity(fd=fd), "entries": entries})
        elif stat.S_ISREG(st.st_mode) and not path.name.endswith(_SQLITE_COMPANIONS):
            data = path.read_bytes()
            if data.startswith(_SQLITE_MAGIC):
                return  # SQLite's own files: covered by what SQLite syncs, not tracked
            copy = self._copy(data)
            # Written after the copy: a kill mid-copy leaves the previous record valid.
            _append_line(self.log, {"sync": _identity(fd=fd), "copy": copy})


def record_tree(case_dir: Path, roots: Sequence[Root]) -> Callable[[], None]:
    """Inside the agent's process: record the tracked trees now, then every sync of a
    tracked file or directory. Returns a function that puts the original
    ``os.fsync``/``os.fdatasync`` back (tests need it; a life simply dies with the wrapper
    installed)."""
    recorder = _Recorder(case_dir, roots)
    recorder.start()
    originals: dict[str, Sync] = {"fsync": os.fsync, "fdatasync": os.fdatasync}

    def wrap(name: str) -> Sync:
        original = originals[name]

        def synced(fd: FileDescriptorLike) -> None:
            original(fd)
            # A descriptor /proc cannot name, a file gone since: nothing to record.
            with contextlib.suppress(OSError):
                recorder.synced(fd if isinstance(fd, int) else fd.fileno())

        return synced

    # setattr: the agent calls os.fsync through the module at call time, so replacing the
    # module attribute is what reaches every caller (SessionWriter, atomic_write included).
    for name in originals:
        setattr(os, name, wrap(name))

    def restore() -> None:
        for name, original in originals.items():
            setattr(os, name, original)

    return restore


# ---------------------------------------------------------------- which files


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


WORKSPACE = "world/workspace"


def roots_for(case_dir: Path, target: Path) -> tuple[Root, ...]:
    """The tracked roots: the workspace and the session's directory (its own root, so its
    existence is given; only the session file when it lies outside the workspace)."""
    try:
        session_dir = target.parent.relative_to(case_dir).as_posix()
    except ValueError:
        session_dir = None
    from crashmatrix.harness.lives.casedir import session_path_of

    roots = [Root(WORKSPACE)]
    native = session_path_of(case_dir)
    if target != native:
        # A foreign agent's session is its own file: crashmatrix's normalised copy of it (in
        # the native session's place) is the harness's, rebuilt from that file at every life
        # start; it is no file of the agent's to lose.
        roots.append(Root(native.parent.relative_to(case_dir).as_posix(), ()))
    if session_dir is None:
        return tuple(roots)  # a session outside the case: not the harness's to roll back
    if _within(session_dir, WORKSPACE):
        if session_dir != WORKSPACE:
            roots.append(Root(session_dir))
    else:
        roots.append(Root(session_dir, (target.name,)))
    return tuple(roots)


def record_for(agent: str, case_dir: Path) -> Callable[[], None] | None:
    """Inside the life: record the fsyncs of ``agent``'s files (None: the power loss cannot
    act on this agent; ``cut_power`` says so after the crash)."""
    target = power_target(agent, case_dir)
    if isinstance(target, str):
        return None
    return record_tree(case_dir, roots_for(case_dir, target))


# ---------------------------------------------------------------- the harness's side


def _walk_disk(case_dir: Path, roots: Sequence[Root]) -> Iterator[tuple[str, Path, list[Any]]]:
    for root in roots:
        top = case_dir / root.path
        if not top.is_dir():
            continue
        stack: list[tuple[Path, tuple[str, ...] | None]] = [(top, root.only)]
        while stack:
            here, only = stack.pop()
            for name, entry in _list_dir(here, only).items():
                path = here / name
                relative = path.relative_to(case_dir).as_posix()
                if _skipped(relative, roots, root):
                    continue
                yield relative, path, entry
                if entry[1] == DIR:
                    stack.append((path, None))


def crashed_tree(case_dir: Path, roots: Sequence[Root]) -> tuple[dict[str, Node], dict[str, bytes]]:
    """What the crash left on disk (the page cache's view), in the same shape as
    ``durable_tree``: SQLite and special files are not part of it."""
    tree: dict[str, Node] = {}
    data: dict[str, bytes] = {}
    for relative, path, (ino, kind, *rest) in _walk_disk(case_dir, roots):
        if kind in (SQLITE, OTHER):
            continue
        tree[relative] = Node(kind, ino, rest[0] if rest else None)
        if kind == FILE:
            data[ino] = path.read_bytes()
    return tree, data


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _apply(
    case_dir: Path,
    crashed: Mapping[str, Node],
    crashed_bytes: Mapping[str, bytes],
    outcome: Outcome,
    keep: Path,
) -> list[FileChange]:
    """Make the disk hold ``outcome``; what a file held before goes under ``keep``."""
    changes: list[FileChange] = []

    def before(path: str) -> bytes:
        node = crashed.get(path)
        return crashed_bytes.get(node.ino, b"") if node is not None and node.kind == FILE else b""

    def kept(path: str) -> None:
        data = before(path)
        if data:
            target = keep / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

    # Gone: deepest first, so a directory is empty of tracked entries when it goes.
    for path in sorted((p for p in crashed if p not in outcome.tree), key=lambda p: -p.count("/")):
        if any(_within(path, q) and q != path for q in crashed if q not in outcome.tree):
            kept(path)  # inside a directory that goes as a whole: kept, reported with it
            if crashed[path].kind == FILE:
                changes.append(FileChange(path, "vanished", len(before(path)), 0))
            continue
        kept(path)
        if crashed[path].kind == FILE:
            changes.append(FileChange(path, "vanished", len(before(path)), 0))
        elif crashed[path].kind == DIR:
            changes.append(FileChange(path + "/", "vanished", 0, 0))
        _remove(case_dir / path)
    for path in sorted(outcome.tree, key=lambda p: p.count("/")):
        node, now = outcome.tree[path], crashed.get(path)
        where = case_dir / path
        if node.kind == DIR:
            if now is None or now.kind != DIR:
                if now is not None:
                    kept(path)
                    _remove(where)
                where.mkdir()
                changes.append(FileChange(path + "/", "restored", 0, 0))
            continue
        if node.kind == LINK:
            if now != node:
                if now is not None:
                    _remove(where)
                os.symlink(node.link or "", where)
                changes.append(FileChange(path, "restored", 0, 0))
            continue
        data = outcome.data.get(path, b"")
        if now is not None and now.kind == FILE and crashed_bytes.get(now.ino, b"") == data:
            continue
        old = before(path)
        if now is None:
            what = "restored"
        elif not data:
            what = "emptied"
        elif old.startswith(data):
            what = "truncated"
        else:
            what = "rolled back"
        if now is not None:
            kept(path)
            if now.kind != FILE:
                _remove(where)
        where.write_bytes(data)
        changes.append(FileChange(path, what, len(old), len(data)))
    return changes


def _outcomes_of(
    case_dir: Path, recording: Recording
) -> tuple[tuple[Outcome, ...], dict[str, Node], dict[str, bytes]]:
    current_inodes = {
        root.path: _identity(case_dir / root.path)
        for root in recording.roots
        if (case_dir / root.path).is_dir()
    }
    durable, copies = durable_tree(recording, current_inodes)
    crashed, crashed_bytes = crashed_tree(case_dir, recording.roots)
    durable_bytes = {
        ino: (case_dir / RECORD_DIR / copy).read_bytes() if copy is not None else b""
        for ino, copy in copies.items()
    }
    # An inode the crash left that is not durable anywhere: its synced bytes, if any.
    for node in crashed.values():
        if node.kind == FILE and node.ino not in durable_bytes:
            copy = recording.synced_files.get(node.ino, recording.start_files.get(node.ino))
            durable_bytes[node.ino] = (case_dir / RECORD_DIR / copy).read_bytes() if copy else b""
    roots = [root.path for root in recording.roots]
    return legal_outcomes(durable, crashed, durable_bytes, crashed_bytes, roots), crashed, crashed_bytes


def power_outcomes(case_dir: Path) -> tuple[Outcome, ...]:
    """The legal outcomes of the last recorded life's crash, as ``cut_power`` would choose
    from them (nothing changed on disk). Empty when the life recorded nothing."""
    log = case_dir / SYNC_LOG
    recording = parse_recording(log.read_bytes()) if log.exists() else None
    return () if recording is None else _outcomes_of(case_dir, recording)[0]


def cut_power(
    case_dir: Path, agent: str, life: int, outcome: int | None = None, *, source: Path | None = None
) -> PowerLoss | None:
    """In the harness, after life ``life`` crashed: the power goes too. Leaves the tracked
    files in legal outcome ``outcome`` (default ``OUTCOME``'s, 0: only what was synced; the
    session's lost bytes kept as ``power-lost-<life>.bin``, other files' former content
    under ``power-lost-<life>/``) and writes to the trace whether the loss acted, and how
    (``FAULT_EVENT``). None when it could not act on this agent or found no session file
    and nothing else to change.

    ``source``: the directory the life ran in, when ``case_dir`` is a copy of it
    (``clone_case``). The recording names files by inode, and a copy has new inodes: the
    outcome is computed from ``source`` (read only) and applied to the copy by path
    (``harness.lives.first_crash.power_after`` cuts a shared first crash this way)."""
    from crashmatrix.harness.errors import HarnessError
    from crashmatrix.harness.lives.tracer import append_event

    chosen = OUTCOME.get() if outcome is None else outcome
    target = power_target(agent, case_dir)
    loss: PowerLoss | None = None
    extra: dict[str, Any] = {}
    log = case_dir / SYNC_LOG
    recording = parse_recording(log.read_bytes()) if log.exists() and not isinstance(target, str) else None
    if isinstance(target, str):
        acted, detail = False, target
    elif recording is None:
        acted, detail = False, "the life recorded no fsyncs (it ran without the power-loss recorder)"
    else:
        outcomes, crashed, crashed_bytes = _outcomes_of(source or case_dir, recording)
        if not 0 <= chosen < len(outcomes):
            raise HarnessError(
                f"power outcome {chosen} does not exist: this crash has {len(outcomes)} legal "
                f"outcome(s), 0..{len(outcomes) - 1} (0 = only what was synced)"
            )
        picked = outcomes[chosen]
        changes = _apply(case_dir, crashed, crashed_bytes, picked, case_dir / f"power-lost-{life}")
        if changes:
            # The rollback is the harness's write, and what it took of the agent's effects
            # never became durable: neither is an effect of the agent's next life.
            from crashmatrix.harness.lives.between import harness_wrote

            harness_wrote(case_dir, agent, "power_loss", erases=True)
        loss = _session_loss(
            case_dir, target, crashed, crashed_bytes, picked, changes, chosen, len(outcomes), life
        )
        acted, detail = _what_it_did(case_dir, target, loss)
        extra = {"changed": loss.changed if loss else False, "outcome": chosen, "outcomes": len(outcomes)}
        if loss is not None and (loss.dropped or loss.vanished):
            # The session lost lines: what was logged before the cut (model requests, world
            # events) speaks of a session that is gone. The judge reads these marks as it
            # reads a tampered session's (``Observation.requests_for_session``).
            from crashmatrix.harness.lives.between import logged_so_far

            extra.update({"session_lost": True, **logged_so_far(case_dir)})
    append_event(
        case_dir,
        {
            "life": life,
            "event": FAULT_EVENT,
            "fault": "power_loss",
            "acted": acted,
            "detail": detail,
            "dropped": loss.dropped if loss else 0,
            **extra,
        },
    )
    return loss


def _session_loss(
    case_dir: Path,
    target: Path,
    crashed: Mapping[str, Node],
    crashed_bytes: Mapping[str, bytes],
    picked: Outcome,
    changes: Sequence[FileChange],
    chosen: int,
    count: int,
    life: int,
) -> PowerLoss | None:
    relative = target.relative_to(case_dir).as_posix() if target.is_relative_to(case_dir) else str(target)
    node = crashed.get(relative)
    before = crashed_bytes.get(node.ino, b"") if node is not None and node.kind == FILE else None
    if before is None and not changes:
        return None  # no session file, and nothing else the loss could act on
    vanished = before is not None and relative not in picked.tree
    after = picked.data.get(relative, b"") if before is not None and not vanished else b""
    before = before or b""
    lost = before[len(after) :] if before.startswith(after) else before
    if lost:
        (case_dir / f"power-lost-{life}.bin").write_bytes(lost)
    others = tuple(c for c in changes if c.path != relative)
    return PowerLoss(
        target,
        len(before),
        len(after),
        lost,
        vanished=vanished,
        changed=bool(changes),
        files=others,
        outcome=chosen,
        outcomes=count,
        outcome_label=picked.label,
    )


_WHY = {
    "vanished": "its directory entry was never made durable",
    "emptied": "created or replaced and never fsynced",
    "truncated": "back to its last fsync",
    "rolled back": "to its content at its last fsync",
    "restored": "its removal or replacement was never made durable",
}


def _what_it_did(case_dir: Path, target: Path, loss: PowerLoss | None) -> tuple[bool, str]:
    if loss is None:
        # Every crash point comes after the agent saved something: no file means the
        # adapter names a file the agent does not write, and nothing was put to the test.
        return False, f"no session file {target.name} at the crash: nothing a power loss could drop"
    if loss.size_before == 0 and not loss.vanished and loss.size_after == 0 and not target.exists():
        session = f"no session file {target.name} at the crash"
    elif loss.vanished:
        session = (
            f"{target.name} was created in this life and its directory was never fsynced after:"
            f" the file vanished with its {loss.dropped} bytes"
        )
    elif loss.dropped:
        session = f"dropped the {loss.dropped} bytes of {target.name} written after its last fsync"
    elif loss.size_before != loss.size_after or loss.lost:
        session = f"{target.name} rolled back to its content at its last fsync ({loss.size_after} bytes)"
    else:
        session = f"{target.name} was fully synced at the crash ({loss.size_after} bytes): nothing to drop"
    parts = [session]
    if loss.files:
        described = ", ".join(
            f"{c.path} {c.what} ({c.size_before} -> {c.size_after} bytes: {_WHY[c.what]})"
            if not c.path.endswith("/")
            else f"{c.path} {c.what} ({_WHY[c.what]})"
            for c in loss.files
        )
        parts.append(f"other files: {described}")
    if loss.outcomes > 1 or loss.outcome:
        parts.append(f"outcome {loss.outcome} of {loss.outcomes}: {loss.outcome_label}")
    return True, "; ".join(parts)
