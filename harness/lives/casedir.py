"""A case directory: the world (copied from a per-scenario template), the session path inside it,
copies of a stopped case."""

from __future__ import annotations

import atexit
import errno
import itertools
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.trace import stderr_name
from crashmatrix.harness.lives import postgres

__all__ = [
    "clone_case",
    "disk_full",
    "fresh_case",
    "prepare_case",
    "remove_case",
    "remove_templates",
    "templates_under",
]

# Below this much free space, SQLite's "disk I/O error" is the disk being full: it says so
# when it cannot grow a shared-memory file or journal there.
_NEARLY_FULL = 1 << 20


def session_path_of(case_dir: Path) -> Path:
    return case_dir / "world" / "workspace" / ".agent_state" / "session-case.jsonl"


def stderr_path_of(case_dir: Path, life: int) -> Path:
    """Where life ``life`` of the case writes its stderr (``harness.lives.life``)."""
    return case_dir / stderr_name(life)


def _create_world(case_dir: Path, scenario: Scenario) -> None:
    from crashmatrix.mock_tools.faults import FaultSpec
    from crashmatrix.mock_tools.world import World

    case_dir.mkdir(parents=True)
    World.create(
        case_dir / "world",
        session_path=session_path_of(case_dir),
        files=scenario.files,
        faults=[
            FaultSpec(tool=f["tool"], kind=f["kind"], tool_call_id=f.get("call"), times=f.get("times", 1))
            for f in scenario.faults
        ],
    )


class _Templates:
    """A fresh case directory per scenario, made once per process and copied for each case
    (a copy costs about a quarter of creating the world again: ~0.8 ms against ~3 ms). A
    world depends only on the scenario's files and faults, so they are the key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # cases may run from several threads
        self._root: Path | None = None
        self._made: dict[str, Path] = {}
        self._names = itertools.count()
        self.base: Path | None = None  # None: $TMPDIR

    def get(self, scenario: Scenario) -> Path:
        key = json.dumps([dict(scenario.files), [dict(f) for f in scenario.faults]], sort_keys=True)
        with self._lock:
            template = self._made.get(key)
            if template is None or not template.exists():
                if self._root is None or not self._root.exists():
                    if self.base is not None:
                        self.base.mkdir(parents=True, exist_ok=True)
                    self._root = Path(tempfile.mkdtemp(prefix="crashmatrix-templates-", dir=self.base))
                    atexit.register(_remove_own, self._root, os.getpid())
                template = self._root / str(next(self._names))
                try:
                    _create_world(template, scenario)
                except BaseException:
                    shutil.rmtree(template, ignore_errors=True)  # never half a template left
                    raise
                self._made[key] = template
            return template

    def remove(self) -> None:
        with self._lock:
            if self._root is not None:
                _remove_own(self._root, os.getpid())
            self._root = None
            self._made.clear()


def _remove_own(root: Path, owner: int) -> None:
    # A process forked from the owner (a life, the fork server) inherits its atexit list;
    # only the process that made the templates may remove them, or a child's exit would
    # pull them from under the cases still copying them.
    if os.getpid() == owner:
        shutil.rmtree(root, ignore_errors=True)


_TEMPLATES = _Templates()


def remove_templates() -> None:
    """Remove this process's world templates now (they are made again if a case needs
    one). Exit removes them too; a process that may not reach its exit handlers (an xdist
    worker, which execnet can end with ``os._exit``) calls this at session finish."""
    _TEMPLATES.remove()


def templates_under(directory: Path) -> None:
    """Make this process's world templates under ``directory`` from now on (pytest's
    basetemp, a CLI run's scratch directory): a run SIGKILLed before its exit handlers
    leaves them where its case directories are, never loose in $TMPDIR."""
    _TEMPLATES.base = directory


def prepare_case(case_dir: Path, scenario: Scenario) -> None:
    """A fresh case directory: the scenario's world (seeded files, faults), no session yet."""
    clone_case(_TEMPLATES.get(scenario), case_dir)


def fresh_case(case_dir: Path, scenario: Scenario) -> None:
    """A case directory made from nothing, no template kept: for a process that builds one
    case and may die without running its exit handlers (the fork server's warm-up life is
    SIGKILLed with the server), which would leave a template folder in $TMPDIR."""
    _create_world(case_dir, scenario)


def clone_case(source: Path, case_dir: Path) -> None:
    """Copy a stopped case (its world, session, trace and model log) to ``case_dir``.

    Nothing in a case directory names its own location (the world keeps its session path
    relative), so the copy is the same case: what a disk holds after the crash, twice.
    A case whose store is on a PostgreSQL server (``postgres.json``) gets its own copy of
    that database too (``harness.lives.postgres``)."""
    if case_dir.exists():
        remove_case(case_dir)
    shutil.copytree(source, case_dir, symlinks=True)
    if (source / postgres.RECORD).exists():
        postgres.copy_case_database(source, case_dir)


def remove_case(case_dir: Path) -> None:
    """Remove a case directory and, best effort, the server databases of the cases in it."""
    postgres.drop_case_databases(case_dir)  # nothing to do, and nothing read, without a server
    shutil.rmtree(case_dir)


def disk_full(error: BaseException, where: Path) -> bool:
    """Whether ``error``, or what caused it, is the disk holding ``where`` being full:
    ``ENOSPC`` / ``EDQUOT``, SQLite's "database or disk is full", a copy that failed so
    (``shutil.Error`` lists its failures as text), or SQLite's "disk I/O error" where that
    disk has (almost) no space left."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [error]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(current)
        if "database or disk is full" in text or os.strerror(errno.ENOSPC) in text:
            return True
        if "disk I/O error" in text and _free_bytes(where) < _NEARLY_FULL:
            return True
        stack += [current.__cause__, current.__context__]
    return False


def _free_bytes(where: Path) -> int:
    """Free bytes on the disk holding ``where`` (its nearest existing ancestor)."""
    path = where
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        stat = os.statvfs(path)
    except OSError:
        return _NEARLY_FULL  # unknown: not taken for full
    return stat.f_bavail * stat.f_frsize
