"""A case directory: the world (copied from a per-scenario template), the session path inside it,
copies of a stopped case."""

from __future__ import annotations

import atexit
import itertools
import json
import shutil
import tempfile
import threading
from pathlib import Path

from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.trace import stderr_name

__all__ = ["clone_case"]


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

    def get(self, scenario: Scenario) -> Path:
        key = json.dumps([dict(scenario.files), [dict(f) for f in scenario.faults]], sort_keys=True)
        with self._lock:
            template = self._made.get(key)
            if template is None or not template.exists():
                if self._root is None or not self._root.exists():
                    self._root = Path(tempfile.mkdtemp(prefix="crashmatrix-templates-"))
                    atexit.register(shutil.rmtree, self._root, True)
                template = self._root / str(next(self._names))
                _create_world(template, scenario)
                self._made[key] = template
            return template


_TEMPLATES = _Templates()


def prepare_case(case_dir: Path, scenario: Scenario) -> None:
    """A fresh case directory: the scenario's world (seeded files, faults), no session yet."""
    clone_case(_TEMPLATES.get(scenario), case_dir)


def clone_case(source: Path, case_dir: Path) -> None:
    """Copy a stopped case (its world, session, trace and model log) to ``case_dir``.

    Nothing in a case directory names its own location (the world keeps its session path
    relative), so the copy is the same case: what a disk holds after the crash, twice."""
    if case_dir.exists():
        shutil.rmtree(case_dir)
    shutil.copytree(source, case_dir, symlinks=True)
