"""The crash injector, parent side: start lives, let them die, restart, enforce deadlines.

Lives are forked from a warm process (``harness.forkserver``: the agent's modules imported,
one throwaway life run), so a life costs a fork instead of an interpreter start plus an
openai import. ``isolation="spawn"`` starts a fresh interpreter per life, for agents that
cannot be forked. Either way the agent runs in its own process and a crash is a real SIGKILL.

Every life has a deadline. A life still running at its deadline is killed and the case
ends as ``hung``; no child process outlives its case.
"""

from __future__ import annotations

import atexit
import itertools
import json
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .boundaries import TORN_WRITE, CrashPoint
from .errors import HarnessError
from .forkserver import ForkServer, run_spawned
from .life import LifeSpec, life_main, session_path_of
from .scenario import Scenario
from .session import split_lines

__all__ = [
    "CaseRun",
    "LifeLauncher",
    "LifeRecord",
    "apply_between_lives",
    "clone_case",
    "points_from_trace",
    "read_trace",
    "recovery_window",
    "run_case",
]

# Imported once in the fork server. openai loads its chat resources lazily on first use,
# which would otherwise cost every life ~170 ms. The caller's modules (the adapter's) go
# before the last entry.
PRELOAD = [
    "crashmatrix.harness.life",
    "crashmatrix.harness.invariants",
    "openai",
    "openai.resources.chat",
    "openai.types.chat",
    "respx",
    "httpx",
    "sqlite3",
    "crashmatrix.harness.warmup",  # last: one throwaway life, so every fork starts warm (warmup.py)
]


@dataclass(frozen=True, slots=True)
class LifeRecord:
    life: int
    crash: str | None  # the point this life was asked to die at
    status: str  # "exited" | "crashed" | "not_reached" | "error" | "hung" | "died"
    exitcode: int | None
    seconds: float
    error: str = ""


@dataclass(frozen=True)
class CaseRun:
    case_dir: Path
    lives: tuple[LifeRecord, ...]
    trace: list[dict[str, Any]] = field(default_factory=list)

    @property
    def status(self) -> str:
        """``ok`` when the last life ended normally; otherwise why not."""
        for life in self.lives:
            if life.status in ("hung", "error", "died"):
                return life.status
        if self.lives and self.lives[0].status == "not_reached":
            return "not_reached"
        return "ok" if self.lives and self.lives[-1].status == "exited" else "incomplete"


class LifeLauncher:
    """Starts agent lives in child processes: forked from a warm server, or spawned."""

    def __init__(self, isolation: str = "fork", preload: Sequence[str] = ()) -> None:
        if isolation not in ("fork", "spawn"):
            raise HarnessError(f"isolation must be 'fork' or 'spawn', not {isolation!r}")
        self.isolation = isolation
        # One warm server per preload list, shared by launchers that ask for the same one.
        self._server = (
            ForkServer.shared([*PRELOAD[:-1], *preload, PRELOAD[-1]]) if isolation == "fork" else None
        )

    @property
    def server(self) -> ForkServer | None:
        """The warm server lives fork from (None with spawn isolation)."""
        return self._server

    def run(self, spec: LifeSpec, *, deadline: float) -> LifeRecord:
        started = time.monotonic()
        if self._server is not None:
            ended = self._server.run(life_main, (spec,), deadline=deadline)
        else:
            ended = run_spawned(life_main, (spec,), deadline=deadline)
        seconds = time.monotonic() - started
        code = ended.code
        crash = spec.crash.id if spec.crash else None
        if ended.hung:
            return LifeRecord(spec.life, crash, "hung", code, seconds, f"no exit within {deadline:.0f}s")
        if code == -signal.SIGKILL:
            return LifeRecord(spec.life, crash, "crashed" if crash else "died", code, seconds)
        if code == 0:
            return LifeRecord(spec.life, crash, "not_reached" if crash else "exited", code, seconds)
        return LifeRecord(spec.life, crash, "error", code, seconds)


def read_trace(case_dir: Path) -> list[dict[str, Any]]:
    path = case_dir / "trace.jsonl"
    if not path.exists():
        return []
    out: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line cut by the SIGKILL that followed it: the crash event says more
    return out


def points_from_trace(trace: Sequence[dict[str, Any]], life: int = 1) -> list[CrashPoint]:
    """Every crash point a life passed, in the order it passed them (ALICE-style enumeration)."""
    points: list[CrashPoint] = []
    for event in trace:
        if event.get("life") != life:
            continue
        if event.get("event") == "boundary":
            points.append(CrashPoint(event["boundary"], event["call"], event["occurrence"]))
        elif event.get("event") == "append":
            points.append(CrashPoint(TORN_WRITE, event["call"], event["occurrence"], event["label"]))
    return points


def recovery_window(trace: Sequence[dict[str, Any]], life: int = 2) -> list[CrashPoint]:
    """The crash points a restarted life passed while recovering: its boundaries (no torn
    writes) before it first asked the model.

    An agent cannot ask the model before every pending call has its Tool Result (the API
    refuses a prompt with an unanswered tool call), so what comes after is the
    conversation going on: a crash there is a first crash in a later state, which the
    matrix has as its own items. A life that never asked the model, or asked before
    passing any boundary, is all window."""
    window: list[CrashPoint] = []
    everything: list[CrashPoint] = []
    asked = False
    for event in trace:
        if event.get("life") != life:
            continue
        if event.get("event") == "model_request":
            asked = True
        elif event.get("event") == "boundary":
            point = CrashPoint(event["boundary"], event["call"], event["occurrence"])
            everything.append(point)
            if not asked:
                window.append(point)
    return window or everything


def apply_between_lives(case_dir: Path, scenario: Scenario) -> None:
    """Faults that are not crashes, done after the crash and before the restart.

    What the judge needs to read the edited evidence is kept in ``between_lives.json``:
    how many model requests came before the edit (they cannot match the edited session)
    and, for each rewritten session line, where it starts and how many bytes it grew by,
    with the last world event seq before the edit (those events' ``session_bytes`` are in
    the file's old coordinates)."""
    if not scenario.between_lives:
        return
    from crashmatrix.mock_tools.world import World

    requests = case_dir / "model_requests.jsonl"
    with World(case_dir / "world") as world:
        mark: dict[str, Any] = {
            "requests_before": len(requests.read_bytes().splitlines()) if requests.exists() else 0,
            "events_before": max((event.seq for event in world.events()), default=0),
            "shifts": [],
        }
        for step in scenario.between_lives:
            if "external_write" in step:
                world.external_write(step["external_write"]["path"], step["external_write"]["content"])
            if "tamper_arguments" in step:
                tamper = step["tamper_arguments"]
                mark["shifts"] += _tamper(session_path_of(case_dir), tamper["call"], tamper["arguments"])
    (case_dir / "between_lives.json").write_text(json.dumps(mark))


def _tamper(session: Path, call_id: str, arguments: dict[str, Any]) -> list[tuple[int, int]]:
    """Someone edits the saved tool call's arguments (the harness, not the agent, does this).

    Only the LATEST assistant message with that id is edited: providers reuse ids across
    turns, and an earlier turn's call is finished history. Returns (offset where the edited
    line ended before the edit, bytes added), for the judge's offset translation."""
    data = session.read_bytes()
    lines, _ = split_lines(session, data)
    for line in reversed(lines):
        try:
            record = json.loads(line.data)
        except ValueError:
            continue
        calls = (record.get("message") or {}).get("tool_calls") or () if isinstance(record, dict) else ()
        matching = [call for call in calls if call.get("id") == call_id]
        if not matching:
            continue
        for call in matching:
            call["function"]["arguments"] = json.dumps(arguments, ensure_ascii=False)
        edited = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
        session.write_bytes(data[: line.offset] + edited + data[line.end - 1 :])
        return [(line.end, len(edited) - len(line.data))]
    return []


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


def run_case(
    case_dir: Path,
    scenario: Scenario,
    launcher: LifeLauncher,
    *,
    agent: str = "reference",
    point: CrashPoint | None = None,
    second: CrashPoint | None = None,
    deadline: float = 30.0,
    max_lives: int = 4,
    power_loss: bool = False,
    resume: CaseRun | None = None,
) -> CaseRun:
    """Run one case: crash at ``point`` (and at ``second`` while recovering), then restart
    until a life ends normally. With ``power_loss``, each crash also loses every session
    byte that was not fsynced (SQLite's crash-VFS idea: the test decides what survives).

    ``max_lives=1`` stops after the first life. ``resume`` is such a stopped case whose
    first life crashed at ``point``: this case starts from a copy of it instead of running
    that life again (depth-2 cases share one first crash; ``cases.run_recovery``)."""
    lives: list[LifeRecord] = []
    if resume is None:
        prepare_case(case_dir, scenario)
    else:
        if len(resume.lives) != 1 or resume.lives[0].status != "crashed" or point is None:
            raise HarnessError("resume= takes a case stopped after a first life that crashed at point=")
        if resume.lives[0].crash != point.id:
            raise HarnessError(f"resume= crashed at {resume.lives[0].crash}, not at {point.id}")
        clone_case(resume.case_dir, case_dir)
        lives.append(resume.lives[0])
    plan: list[CrashPoint | None] = [point, second] if second else [point]
    for index in range(len(lives) + 1, max_lives + 1):
        crash = plan[index - 1] if index <= len(plan) else None
        record = launcher.run(
            LifeSpec(str(case_dir), scenario, agent, index, crash, power_loss), deadline=deadline
        )
        if index > 1 and record.status == "not_reached":
            # The recovering life never passed the second point: it simply finished.
            record = LifeRecord(
                record.life, record.crash, "exited", record.exitcode, record.seconds, "not reached"
            )
        lives.append(record)
        if power_loss and record.status == "crashed":
            from .power import SYNC_LOG, lose_unsynced

            session = session_path_of(case_dir)
            lose_unsynced(session, case_dir / SYNC_LOG, keep=case_dir / f"power-lost-{index}.bin")
        if record.status in ("hung", "error", "died", "exited", "not_reached"):
            break
        if index == 1:
            apply_between_lives(case_dir, scenario)
    trace = read_trace(case_dir)
    errors = {e["life"]: e["error"] for e in trace if e.get("event") == "error"}
    lives = [
        LifeRecord(r.life, r.crash, r.status, r.exitcode, r.seconds, errors.get(r.life, r.error))
        for r in lives
    ]
    return CaseRun(case_dir, tuple(lives), trace)
