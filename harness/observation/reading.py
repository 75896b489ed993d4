"""Reading what a finished case left behind into an ``Observation`` (the edge of this stage).

One read per source, after the last life: the trace (already parsed by the lives stage), the
agent's session through the adapter's reader, the world (one SQLite snapshot and the events),
the model's request log, and what the harness did between lives.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.dialect import NATIVE, Dialect
from crashmatrix.harness.core.session_log import SessionLog
from crashmatrix.harness.core.torn_fragments import FragmentFate, account_all, torn_fragments
from crashmatrix.harness.core.trace import CaseRun
from crashmatrix.harness.errors import SessionCorruption
from crashmatrix.harness.lives.casedir import session_path_of
from crashmatrix.harness.observation.observation import (
    BetweenLives,
    Observation,
    WorldView,
    between_lives_from_json,
)
from crashmatrix.harness.session_file import read_session

__all__ = [
    "SessionSource",
    "native_session",
    "read_fragments",
    "read_observation",
    "read_requests",
    "read_world",
    "unreadable_session",
]

# How an adapter reads its agent's session as our records, from the case directory.
SessionSource = Callable[[Path], SessionLog]


def native_session(case_dir: Path) -> SessionLog:
    """Seed 000's JSONL where the harness told the agent to keep it (``LifeContext.session_path``)."""
    return read_session(session_path_of(case_dir))


def unreadable_session(error: SessionCorruption, case_dir: Path) -> str:
    """Where and why the agent's session cannot be read, in one line: its path in the case's
    workspace, the line (and byte) and what is wrong there. Not ``str(error)``: that tells a
    person to repair a file, and this file is one the agent wrote in a case directory the
    harness made -- what is wrong with it is a verdict on the agent, not an input to fix."""
    workspace = case_dir / "world" / "workspace"
    where = error.path.relative_to(workspace) if error.path.is_relative_to(workspace) else error.path
    if error.line <= 0:
        return f"{where}: {error.problem}"
    return f"{where}:{error.line} (byte {error.byte}): {error.problem}"


def read_world(case_dir: Path) -> WorldView:
    from crashmatrix.mock_tools.world import World

    if not (case_dir / "world" / "world.json").exists():
        return WorldView()
    with World(case_dir / "world") as world:
        snapshot = world.snapshot()
        events = world.events()
    files = {path: snapshot.file_text(path) for path in snapshot.files}
    return WorldView(dict(snapshot.counts), files, tuple(events))


def read_requests(case_dir: Path) -> tuple[dict[str, Any], ...]:
    path = case_dir / "model_requests.jsonl"
    if not path.exists():
        return ()
    return tuple(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def _between_lives(case_dir: Path) -> BetweenLives:
    path = case_dir / "between_lives.json"
    if not path.exists():
        return BetweenLives()
    return between_lives_from_json(json.loads(path.read_text(encoding="utf-8")))


def read_fragments(case_dir: Path, trace: tuple[Mapping[str, Any], ...]) -> tuple[FragmentFate, ...]:
    """Where the bytes of each torn write in ``trace`` went: each torn file's final bytes and
    the files beside it that begin with its name (a writer's ``<name>.torn-<offset>``), read
    once, judged by ``torn_fragments.account``."""
    fragments = torn_fragments(trace)
    finals: dict[str, bytes | None] = {}
    beside: dict[str, dict[str, bytes]] = {}
    for path in {f.path for f in fragments}:
        target = case_dir / path
        try:
            finals[path] = target.read_bytes()
        except FileNotFoundError:
            finals[path] = None
        siblings = target.parent.glob(f"{target.name}?*") if target.parent.is_dir() else ()
        beside[path] = {p.name: p.read_bytes() for p in siblings if p.is_file()}
    return account_all(fragments, finals, beside)


def read_observation(
    run: CaseRun,
    *,
    session: SessionSource = native_session,
    keeps_ledger: bool = True,
    session_unavailable: str = "",
    dialect: Dialect = NATIVE,
) -> Observation:
    """Everything ``run`` left, with the session read by ``session``. A session that cannot
    be read (corruption: a line the agent wrote after a torn one) is no session plus where
    and why (``unreadable_session``), never an exception: the verdict fails the case with it,
    and the rest of the evidence is still judged. ``session_unavailable``: the adapter cannot
    read this agent's session at all (why); none is read."""
    problem = ""
    log: SessionLog | None = None
    if not session_unavailable:
        try:
            log = session(run.case_dir)
        except SessionCorruption as error:
            problem = unreadable_session(error, run.case_dir)
    return Observation(
        case_dir=run.case_dir,
        lives=tuple(run.lives),
        trace=tuple(run.trace),
        session=log,
        world=read_world(run.case_dir),
        requests=read_requests(run.case_dir),
        between_lives=_between_lives(run.case_dir),
        keeps_ledger=keeps_ledger and not session_unavailable,
        session_problem=problem,
        session_unavailable=session_unavailable,
        dialect=dialect,
        torn_fragments=read_fragments(run.case_dir, tuple(run.trace)),
    )
