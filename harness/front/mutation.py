"""The kill matrix: does the scenario suite catch deliberately broken agents?

A harness is worth what it catches. ``run_kill_matrix`` runs scenarios against each mutant
(an agent with one known bug) through the same cases as the suite (``harness.front.cases``): the
clean run, a SIGKILL at every recorded point, a power loss at the points where lost session
lines let a side effect be redone, the tool side failing each call that reached it (the
tool-side columns, ``harness.core.tool_side``), two lives resuming one crash at once where the
agent's lives can be told apart (``double@P``), and with ``full`` the depth-2 recovery cases.
Without ``full``, the recovery cases of a scenario that tears the recovering life's own writes
(``recovery_torn_writes``) still run: first, for a mutant that hints ``recovery_torn_writes``;
last, after every other case of every scenario, for any mutant still alive (a bug only such
a torn write shows survives everything else: ``closed_mark_first``).

A mutant is *killed* by a scenario when one of its cases fails (``failed``, ``error`` or
``hung``) AND the reference agent passes that same case: a case the reference fails too is
a broken scenario, not a caught bug. The reference runs only for the cases a mutant fails,
so a default run costs about one case per mutant more than the mutant's own cases.

What killed it: each kill says whether an invariant failed the case (``invariant``: any
scenario catches the bug, with or without expectations), only the scenario's expectations
did (``expectation``: a team's scenario that states none would miss it), or the case hung
or errored (``hung`` / ``error``: no expectation needed either). With ``invariants_only`` a
case failed by expectations alone is noted (cell ``E``) and the search goes on for a kill
that needs none: the figure "killed by invariants alone".

Speed: by default each mutant stops at its first kill, and its scenarios and points are
ordered by the mutant's ``hints`` (scenario tags, tool names, boundary names, ``power_loss``,
``double_resume``, ``recovery_torn_writes``) so that the likely killer runs first. Hints
only order; they never decide a verdict.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashmatrix.harness.agents.loading import load_adapter
from crashmatrix.harness.core.boundaries import TORN_WRITE, CrashPoint
from crashmatrix.harness.core.double_resume import DOUBLE_PREFIX
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.errors import CrashmatrixError, InputError
from crashmatrix.harness.front.cases import (
    enumerate_points,
    run_double,
    run_point,
    run_recovery,
    run_tool_fault,
)
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.input.suite import scenario_files
from crashmatrix.harness.lives.first_crash import FirstCrashes
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.plan.enumeration import (
    POWER_BOUNDARIES,
    RECOVERY_FIRST,
    adapter_tool_side_unreachable,
    double_points,
    power_points,
    selected,
)
from crashmatrix.harness.verdict.result import CaseResult
from crashmatrix.harness.verdict.verdict import Verdict

__all__ = [
    "FAILING",
    "POWER_BOUNDARIES",
    "Kill",
    "KillMatrix",
    "MutantRow",
    "killed_by",
    "main_mutants",
    "mutant_spec",
    "run_kill_matrix",
    "scenario_files",
]

FAILING = ("failed", "error", "hung")
# Power loss differs from SIGKILL only where unsynced lines would let an action be redone:
# its running line (after_running/after_side_effect) or its receipt (after_tool_result).
POWER = "power"
TOOL_SIDE = "tool_side"
DOUBLE = "double"
KILLED, SURVIVED, NOT_RUN = "K", ".", "-"
# --invariants: the scenario failed the mutant only through its expectations.
EXPECTATION_ONLY = "E"
INVARIANT, EXPECTATION = "invariant", "expectation"
MUTANTS_MODULE = "crashmatrix.reference_agent.mutants"


@dataclass(frozen=True, slots=True)
class Kill:
    """The case that killed a mutant: the mutant failed it, the reference passed it."""

    scenario: str
    case: str  # "clean", a point id, "power@<point id>" or "recovery@<point id>"
    status: str  # the mutant's verdict status
    reason: str  # the first broken invariant or mismatch
    # What failed the case: "invariant", "expectation" (the scenario's expectations alone),
    # or the status itself when the case hung or errored.
    by: str = INVARIANT

    def describe(self) -> str:
        return f"{self.scenario}::{self.case} ({self.status}: {self.reason}; by {self.by})"

    @property
    def needs_expectations(self) -> bool:
        return self.by == EXPECTATION

    def to_json(self) -> dict[str, str]:
        return {
            "scenario": self.scenario,
            "case": self.case,
            "status": self.status,
            "reason": self.reason,
            "by": self.by,
        }


@dataclass(frozen=True, slots=True)
class MutantRow:
    mutant: str
    cells: Mapping[str, str]  # scenario -> K | . | -
    first_kill: Kill | None
    cases_run: int
    seconds: float
    # Cases the mutant failed that the reference failed too: the scenario is at fault.
    unconfirmed: tuple[str, ...] = ()
    # Every kill found, one per scenario at most (the first only, unless the run goes on).
    kills: tuple[Kill, ...] = ()

    @property
    def killed(self) -> bool:
        return self.first_kill is not None

    @property
    def without_expectations(self) -> bool:
        """Some kill rests on no expectation: an invariant failed it, or it hung."""
        return any(not kill.needs_expectations for kill in self.kills or _some(self.first_kill))


@dataclass(frozen=True, slots=True)
class KillMatrix:
    scenarios: tuple[str, ...]
    rows: tuple[MutantRow, ...]
    seconds: float = 0.0

    # Whether only kills needing no expectation were counted (``invariants_only``).
    invariants_only: bool = False

    @property
    def survivors(self) -> tuple[str, ...]:
        return tuple(row.mutant for row in self.rows if not row.killed)

    @property
    def by_expectations_only(self) -> tuple[str, ...]:
        """Mutants whose every kill found rests on a scenario's expectations."""
        return tuple(row.mutant for row in self.rows if row.killed and not row.without_expectations)

    def figure(self) -> str:
        """How many mutants are killed with no expectation needed, and which are not."""
        free = [row for row in self.rows if row.without_expectations]
        by_invariant = sum(
            1 for row in free if any(k.by == INVARIANT for k in row.kills or _some(row.first_kill))
        )
        only = self.by_expectations_only
        text = (
            f"{len(free)}/{len(self.rows)} mutants killed without expectations "
            f"({by_invariant} by an invariant, {len(free) - by_invariant} hung or errored)"
        )
        if only:
            text += f"; by expectations only: {', '.join(only)}"
        if not self.invariants_only:
            text += " (first kills only: --invariants searches on for a kill without expectations)"
        return text

    def render(self) -> str:
        """Mutant x scenario (K killed, E killed by expectations only, . survived, - not run), then
        who killed each mutant and how many need no expectation.

        Scenario columns are numbered (a legend follows) so the table stays narrow."""
        width = max([len(r.mutant) for r in self.rows] + [6])
        numbers = [str(i + 1) for i in range(len(self.scenarios))]
        head = " ".join(n[-1] for n in numbers)
        tens = " ".join(n[-2] if len(n) > 1 else " " for n in numbers)
        lines = []
        if len(numbers) > 9:
            lines.append(f"{'':<{width}}  {tens}")
        lines.append(f"{'mutant':<{width}}  {head}  killed by")
        for row in self.rows:
            cells = " ".join(row.cells.get(s, NOT_RUN) for s in self.scenarios)
            by = row.first_kill.describe() if row.first_kill else "SURVIVED"
            lines.append(f"{row.mutant:<{width}}  {cells}  {by}")
        lines.append("")
        lines += [f"{n:>3} {s}" for n, s in zip(numbers, self.scenarios, strict=True)]
        killed = sum(1 for r in self.rows if r.killed)
        lines.append("")
        lines.append(
            f"{killed}/{len(self.rows)} mutants killed"
            + (f"; survivors: {', '.join(self.survivors)}" if self.survivors else "")
            + f" ({sum(r.cases_run for r in self.rows)} cases, {self.seconds:.0f}s)"
        )
        lines.append(self.figure())
        expectation_kills = [(r.mutant, k) for r in self.rows for k in r.kills if k.needs_expectations]
        if self.invariants_only and expectation_kills:
            lines.append("")
            lines.append("killed by expectations only (E):")
            lines += [f"  {mutant}: {kill.describe()}" for mutant, kill in expectation_kills]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "scenarios": list(self.scenarios),
            "seconds": round(self.seconds, 2),
            "survivors": list(self.survivors),
            "invariants_only": self.invariants_only,
            "by_expectations_only": list(self.by_expectations_only),
            "mutants": [
                {
                    "mutant": row.mutant,
                    "killed": row.killed,
                    "cells": dict(row.cells),
                    "first_kill": None if row.first_kill is None else row.first_kill.to_json(),
                    "without_expectations": row.without_expectations,
                    "kills": [kill.to_json() for kill in row.kills],
                    "cases_run": row.cases_run,
                    "seconds": round(row.seconds, 2),
                    "unconfirmed": list(row.unconfirmed),
                }
                for row in self.rows
            ],
        }


# ---------------------------------------------------------------- ordering (pure)


def _words(text: str) -> set[str]:
    return set(re.split(r"[^a-z0-9_]+", text.lower())) - {""}


# The hint (and scenario word) of a mutant only a torn write of its own recovery records shows.
TORN_HINT = "recovery_torn_writes"


def scenario_score(scenario: Scenario, hints: Sequence[str]) -> int:
    """How many hints a scenario matches by tag, tool or name: a cheap 'likely killer' guess."""
    words = set(scenario.tags) | set(scenario.tools) | _words(scenario.name)
    if scenario.recovery_torn_writes:
        words.add(TORN_HINT)
    return sum(1 for hint in hints if hint in words)


def case_score(case: _Case, hints: Sequence[str]) -> int:
    score = 0
    if case.kind == POWER and "power_loss" in hints:
        score += 2
    if case.kind == DOUBLE and "double_resume" in hints:
        score += 2
    if case.kind == "recovery" and TORN_HINT in hints:
        score += 2
    if case.point is not None and case.point.boundary in hints:
        score += 1
    return score


@dataclass(frozen=True, slots=True)
class _Case:
    case_id: str
    kind: str  # clean | crash | power | recovery | tool_side | double
    point: CrashPoint | None


def _cases(
    points: Sequence[CrashPoint],
    scenario: Scenario,
    *,
    recovery: bool,
    power: bool,
    tool_side: Sequence[CrashPoint] = (),
    double: bool = False,
) -> list[_Case]:
    cases = [_Case(p.id, "crash", p) for p in points]
    if double:  # two lives resuming one crash at once (harness/lives/double_resume.py)
        cases += [_Case(f"{DOUBLE_PREFIX}{p.id}", DOUBLE, p) for p in double_points(points)]
    if power:
        cases += [_Case(f"{POWER}@{p.id}", POWER, p) for p in power_points(points)]
    # The tool side fails one call while the agent lives on (harness/core/tool_side.py).
    cases += [_Case(p.id, TOOL_SIDE, p) for p in tool_side]
    if recovery and scenario.recovery_crashes:
        cases += [
            _Case(f"recovery@{p.id}", "recovery", p)
            for p in points
            if p.boundary in RECOVERY_FIRST and p.occurrence == 1
        ]
    return cases


def _some(kill: Kill | None) -> tuple[Kill, ...]:
    return () if kill is None else (kill,)


def killed_by(verdict: Verdict) -> str:
    """What failed a case: an invariant (whatever the scenario expects), its expectations
    alone, or the case's own status (it hung or errored: no expectation needed; a hung case
    may list violations too, of a session the deadline cut short)."""
    if verdict.status in ("hung", "error"):
        return verdict.status
    if verdict.violations:
        return INVARIANT
    if verdict.mismatches:
        return EXPECTATION
    return verdict.status


def _reason(verdict: Verdict) -> str:
    if verdict.violations:
        return verdict.violations[0].invariant
    if verdict.mismatches:
        return verdict.mismatches[0].describe()
    if verdict.problems:
        return verdict.problems[0]
    return verdict.status


# ---------------------------------------------------------------- running


@dataclass
class _Runner:
    launcher: LifeLauncher
    power: bool
    work_dir: Path
    deadline: float
    reference: str
    progress: Callable[[str], None]
    # First crashes from each clean life's snapshots (``harness.lives.snapshots``); None:
    # each case runs its own first life (``--no-snapshots``).
    shared: FirstCrashes | None = None
    _reference_results: dict[tuple[str, str], bool] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, scenario: Scenario, case: _Case, agent: str, case_dir: Path) -> CaseResult:
        if case.kind == TOOL_SIDE:
            assert case.point is not None
            return run_tool_fault(
                scenario, case.point, self.launcher, case_dir, agent=agent, deadline=self.deadline
            )
        if case.kind == DOUBLE:
            assert case.point is not None
            return run_double(
                scenario,
                case.point,
                self.launcher,
                case_dir,
                agent=agent,
                deadline=self.deadline,
                shared=self.shared,
            )
        if case.kind == "recovery":
            assert case.point is not None
            return run_recovery(
                scenario,
                case.point,
                self.launcher,
                case_dir,
                agent=agent,
                deadline=self.deadline,
                shared=self.shared,
            )
        result = run_point(
            scenario,
            case.point,
            self.launcher,
            case_dir,
            agent=agent,
            deadline=self.deadline,
            power_loss=case.kind == POWER,
            shared=self.shared,  # not for a power case: it runs whole, its life 1 recording
        )
        return result

    def reference_passes(self, scenario: Scenario, case: _Case) -> bool:
        key = (str(scenario.path), case.case_id)
        with self._lock:
            if key in self._reference_results:
                return self._reference_results[key]
        case_dir = self.work_dir / "reference" / scenario.path.stem / _safe(case.case_id)
        if case.kind == "clean":
            passed = enumerate_points(
                scenario,
                self.launcher,
                case_dir,
                agent=self.reference,
                deadline=self.deadline,
                shared=self.shared,
            ).clean_verdict.passed
        else:
            passed = self.run(scenario, case, self.reference, case_dir).passed
        with self._lock:
            self._reference_results[key] = passed
        return passed

    def mutant_row(
        self,
        mutant: str,
        scenarios: Sequence[Scenario],
        *,
        stop_at_first_kill: bool,
        recovery: bool,
        invariants_only: bool = False,
        tool_side: bool = True,
    ) -> MutantRow:
        started = time.monotonic()
        adapter = load_adapter(mutant)
        hints = tuple(getattr(adapter, "hints", ()))
        order = sorted(scenarios, key=lambda s: -scenario_score(s, hints))  # stable: path order
        # (scenario, its recovery cases only): the torn second crashes of the scenarios that
        # tear the recovering life's writes, after everything else for a mutant not hinting them.
        passes = [(s, False) for s in order]
        if not recovery and TORN_HINT not in hints:
            passes += [(s, True) for s in order if s.recovery_crashes and s.recovery_torn_writes]
        cells: dict[str, str] = {}
        first: Kill | None = None
        kills: list[Kill] = []
        unconfirmed: list[str] = []
        runs = 0
        name = _short(mutant)
        for scenario, torn_pass in passes:
            if first is not None and stop_at_first_kill:
                break
            label = _label(scenario)
            base = self.work_dir / name / scenario.path.stem
            enum = enumerate_points(
                scenario,
                self.launcher,
                base / "clean",
                agent=mutant,
                deadline=self.deadline,
                shared=self.shared,
            )
            runs += 1
            points = [
                p
                for p in selected(enum.points, scenario)
                if p.boundary in adapter.boundaries or p.boundary == TORN_WRITE
            ]
            # The tool-side columns where they can act on this agent (a mutant of the reference
            # agent: every call that reached its mock tools).
            cannot = adapter_tool_side_unreachable(mutant, getattr(adapter, "spec", None))
            faults = [p for p in enum.tool_side if p.boundary not in cannot] if tool_side else []
            double = bool(getattr(adapter, "double_resume", False))
            torn = scenario.recovery_torn_writes and (TORN_HINT in hints or torn_pass)
            cases = _cases(
                points, scenario, recovery=recovery or torn, power=self.power, tool_side=faults, double=double
            )
            if torn_pass:
                cases = [c for c in cases if c.kind == "recovery"]
            cases.sort(key=lambda c: -case_score(c, hints))
            cells.setdefault(label, SURVIVED)
            noted: Kill | None = None  # a kill by expectations alone, under invariants_only
            for case in [*([] if torn_pass else [_Case("clean", "clean", None)]), *cases]:
                if case.kind == "clean":
                    verdict = enum.clean_verdict  # the enumeration run IS the clean case
                else:
                    verdict = self.run(scenario, case, mutant, base / _safe(case.case_id)).verdict
                    runs += 1
                if verdict.status not in FAILING:
                    continue
                if not self.reference_passes(scenario, case):
                    unconfirmed.append(f"{label}::{case.case_id}")
                    continue
                kill = Kill(label, case.case_id, verdict.status, _reason(verdict), killed_by(verdict))
                if invariants_only and kill.needs_expectations:
                    noted = noted or kill  # a scenario without expectations would pass it: go on
                    continue
                # One kill decides the cell; without stop_at_first_kill the next scenario runs.
                cells[label] = KILLED
                kills.append(kill)
                if first is None:
                    first = kill
                    self.progress(f"{name}: killed by {first.describe()}")
                break
            if noted is not None and cells[label] == SURVIVED:
                cells[label] = EXPECTATION_ONLY
                kills.append(noted)
        if first is None:
            self.progress(f"{name}: SURVIVED {runs} cases")
        if first is None and kills:  # killed by expectations only: the row still says how
            first = kills[0]
        return MutantRow(
            name, cells, first, runs, time.monotonic() - started, tuple(unconfirmed), tuple(kills)
        )


def _safe(case_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@-]+", "_", case_id)


def _short(mutant: str) -> str:
    return mutant.rpartition(":")[2] or mutant


def _label(scenario: Scenario) -> str:
    """``group/file.yaml`` for built-in layouts, else the file name."""
    return f"{scenario.path.parent.name}/{scenario.path.name}"


def run_kill_matrix(
    scenario_paths: Sequence[Path],
    mutants: Sequence[str],
    launcher: LifeLauncher,
    work_dir: Path,
    *,
    stop_at_first_kill: bool = True,
    recovery: bool = False,
    power: bool = True,
    deadline: float = 30.0,
    reference: str = "reference",
    workers: int = 2,
    progress: Callable[[str], None] | None = None,
    invariants_only: bool = False,
    tool_side: bool = True,
    snapshots: bool = True,
) -> KillMatrix:
    """Run the kill matrix. ``mutants`` are agent specs (``module:factory``); ``deadline``
    is per life, as everywhere else. Mutants run ``workers`` at a time (each case is its
    own processes, so threads only wait). ``invariants_only``: a case failed by the
    scenario's expectations alone is noted, not counted, and the search goes on.
    ``snapshots``: each (agent, scenario)'s clean life leaves every point's first crash, and
    the cases start there (``harness.lives.snapshots``; the same kill matrix, proven by
    ``benchmarks/snapshot_equivalence.py``)."""
    started = time.monotonic()
    scenarios = [load_scenario(p) for p in scenario_paths]
    shared = (
        FirstCrashes(work_dir / "first-crashes", snapshots=True, window_boundaries=RECOVERY_FIRST)
        if snapshots
        else None
    )
    runner = _Runner(launcher, power, work_dir, deadline, reference, progress or (lambda _: None), shared)

    def row(mutant: str) -> MutantRow:
        return runner.mutant_row(
            mutant,
            scenarios,
            stop_at_first_kill=stop_at_first_kill,
            recovery=recovery,
            invariants_only=invariants_only,
            tool_side=tool_side,
        )

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        rows = tuple(pool.map(row, mutants))
    return KillMatrix(tuple(_label(s) for s in scenarios), rows, time.monotonic() - started, invariants_only)


# ---------------------------------------------------------------- command line


def mutant_spec(name: str) -> str:
    """``blind_retry`` -> ``crashmatrix.reference_agent.mutants:blind_retry``; a ``module:factory``
    spec is kept as it is."""
    return name if ":" in name else f"{MUTANTS_MODULE}:{name}"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crashmatrix mutants",
        description="Run the scenarios against deliberately broken agents; every one must be killed.",
    )
    parser.add_argument("--scenarios", type=Path, default=Path("scenarios"), help="directory or file")
    parser.add_argument(
        "--mutant",
        action="append",
        default=[],
        metavar="NAME",
        help="a mutant of reference_agent.mutants, or module:factory (repeatable; default all)",
    )
    parser.add_argument(
        "--full", action="store_true", help="run every case (recovery@ included), not just to the first kill"
    )
    parser.add_argument(
        "--invariants",
        action="store_true",
        help="count only kills that need no expectation (an invariant failed the case, or it hung): "
        "a case failed by a scenario's expectations alone is marked E and the search goes on",
    )
    parser.add_argument(
        "--no-tool-side-faults",
        action="store_true",
        help="leave out the tool-side columns' cases (a mutant they alone kill then survives)",
    )
    parser.add_argument("--workers", type=int, default=2, help="mutants run at a time (default 2)")
    parser.add_argument("--keep", type=Path, help="keep case directories here")
    parser.add_argument("--json", type=Path, help="also write the matrix as JSON here")
    parser.add_argument("--case-deadline", type=float, default=30.0)
    parser.add_argument(
        "--no-snapshots",
        action="store_true",
        help="each first crash a life killed at its point, not the clean life's snapshot there",
    )
    return parser


def main_mutants(argv: Sequence[str]) -> int:
    """``crashmatrix mutants``: exit 0 when every mutant is killed, 1 when one survives,
    2 on bad input."""
    args = _parser().parse_args(list(argv))
    try:
        from crashmatrix.reference_agent.mutants import MUTANTS

        names = args.mutant or list(MUTANTS)
        specs = [mutant_spec(n) for n in names]
        for spec, name in zip(specs, names, strict=True):
            if spec.startswith(f"{MUTANTS_MODULE}:") and _short(spec) not in MUTANTS:
                raise InputError(f"--mutant {name!r}: no such mutant; known: {', '.join(MUTANTS)}")
            load_adapter(spec)
        if not args.scenarios.exists():
            raise InputError(f"--scenarios {args.scenarios}: no such file or directory")
        paths = scenario_files(args.scenarios)
        if not paths:
            raise InputError(f"--scenarios {args.scenarios}: no scenario YAML files under it")
        for path in paths:
            load_scenario(path)  # every bad file is reported before anything runs
        preload = ["crashmatrix.harness.agents.reference", MUTANTS_MODULE, "crashmatrix.mock_tools.toolbox"]
        launcher = LifeLauncher("fork", preload=preload)
        base = args.keep or Path(tempfile.mkdtemp(prefix="crashmatrix-mutants-"))
        print(f"{len(specs)} mutants x {len(paths)} scenarios; case directories under {base}", flush=True)
        matrix = run_kill_matrix(
            paths,
            specs,
            launcher,
            base,
            stop_at_first_kill=not args.full,
            recovery=args.full,
            deadline=args.case_deadline,
            workers=args.workers,
            progress=lambda line: print(line, flush=True),
            invariants_only=args.invariants,
            tool_side=not args.no_tool_side_faults,
            snapshots=not args.no_snapshots,
        )
    except CrashmatrixError as error:
        print(f"crashmatrix: {error}", file=sys.stderr)
        return 2
    print()
    print(matrix.render())
    if args.json:
        import json

        args.json.write_text(json.dumps(matrix.to_json(), indent=2), encoding="utf-8")
    return 1 if matrix.survivors else 0
