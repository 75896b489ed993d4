"""The results file: one record per crash case, the only input every report renders from.

A run writes it once (``matrix.json``); ``crashmatrix report`` re-renders it later, and
``--compare`` puts two of them side by side. Its shape is ``results.schema.json`` (shipped
next to this module); a file that does not fit is refused with one line naming the file and
the problem, never a traceback.

Records are plain JSON values all the way down (expectations may hold ``{"in": [...]}``
sets, a world view holds file texts), so a report never needs the harness's classes, the
case directory or the scenario file to render.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from crashmatrix.harness.core.evals import crashed_call
from crashmatrix.harness.verdict.explain import rerun_command
from crashmatrix.harness.verdict.result import CaseResult
from crashmatrix.harness.verdict.verdict import Verdict
from crashmatrix.reports.errors import ResultsFileError

__all__ = [
    "FAILING",
    "FORMAT",
    "GAP_STATES",
    "SCHEMA_PATH",
    "STATUSES",
    "VERSION",
    "CaseRecord",
    "NotRun",
    "Results",
    "load_results",
    "record_from_result",
    "results_from_json",
    "results_to_json",
    "schema",
    "verdict_reasons",
    "with_world_diffs",
    "write_results",
]

FORMAT = "crashmatrix-results"
VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("results.schema.json")
# not_reached: the case ran and its point never happened; not_reachable: the point was
# recorded, but this agent cannot be killed there (outside ``adapter.boundaries``).
STATUSES = ("passed", "failed", "not_reached", "not_reachable", "not_applicable", "hung", "error")
# Why a matrix cell has no case at all, when it has a reason (``NotRun``).
GAP_STATES = ("not_reachable", "deselected")
FAILING = frozenset({"failed", "hung", "error"})

# A world view keeps file texts so a diff can show them; a generated file can be large, and
# ~700 records each carrying it would bloat every report for no reader's benefit.
_MAX_FILE_TEXT = 240
_AGENT_STATE = ".agent_state/"


@dataclass(frozen=True, slots=True)
class CaseRecord:
    """One crash case as a report sees it (one row of ``cases`` in the results file)."""

    node_id: str  # the pytest node id, e.g. "scenarios/x.yaml::after_running[call_1]"
    scenario: str  # the scenario's name
    scenario_path: str
    tools: tuple[str, ...]
    idempotency: tuple[str, ...]  # the idempotency classes of the scenario's tools
    point: str  # "clean", a point id, or "recovery@<point id>"
    # the matrix column: "clean", a boundary, "torn_write", "power_loss", "recovery" or a tool-side kind
    boundary: str
    status: str  # one of STATUSES
    indeterminate: bool  # passed only because the expectation allowed a set of values
    seconds: float
    lives: int
    repro: str  # one command that reruns just this case
    case_dir: str = ""
    expected: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    observed: Mapping[str, Any] | None = None  # outcome / ledger / code / world, as judged
    mismatches: tuple[Mapping[str, Any], ...] = ()  # {field, expected, observed}
    violations: tuple[Mapping[str, Any], ...] = ()  # {invariant, message, tool_call_id}
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    not_applicable: tuple[str, ...] = ()  # "check: why" -- neither passed nor failed
    evals: tuple[str, ...] = ()  # the named evals its scenario shows (the scorecard)
    # The call the crash point names, its tool and THAT call's idempotency class
    # (``harness.core.evals.crashed_call``): the class whose crash evals the case answers.
    # "" for a clean case, a point naming no call, or a file from before they were recorded.
    crash_call: str = ""
    crash_tool: str = ""
    crash_class: str = ""
    # A depth-2 case's second crashes: {point, status, repro, case_dir, reasons, timeline}
    # each (``_second_crashes``); older files hold {point, status} only.
    recovery_points: tuple[Mapping[str, Any], ...] = ()
    world_diff: tuple[Mapping[str, Any], ...] = ()  # {key, clean, observed} vs the clean case
    timeline: tuple[Mapping[str, Any], ...] = ()  # see reports.timeline

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def failing(self) -> bool:
        """Failed, hung or errored: what a reader must look at (not_reached is not a verdict
        on the agent, the point simply did not happen)."""
        return self.status in FAILING

    @property
    def title(self) -> str:
        return f"{Path(self.scenario_path).name}::{self.point}"

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for name in (
            "tools",
            "idempotency",
            "mismatches",
            "violations",
            "problems",
            "notes",
            "not_applicable",
            "evals",
        ):
            out[name] = list(out[name])
        for name in ("recovery_points", "world_diff", "timeline"):
            out[name] = list(out[name])
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> CaseRecord:
        """A record from its JSON object; the object has already passed the schema."""
        known = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {k: v for k, v in raw.items() if k in known}
        for name in ("tools", "idempotency", "problems", "notes", "not_applicable", "evals"):
            values[name] = tuple(str(v) for v in values.get(name, ()))
        for name in ("mismatches", "violations", "recovery_points", "world_diff", "timeline"):
            values[name] = tuple(values.get(name, ()))
        return cls(**values)


@dataclass(frozen=True, slots=True)
class NotRun:
    """Crash points of one scenario at one matrix column that have no case, and why.

    ``not_reachable``: this agent cannot be killed there (a black box is crashed only at its
    model and service edges), so no case could exist -- the clean run does not even see those
    boundaries. ``deselected``: the clean run passed them, and ``--crash-boundary``, the
    scenario's ``cover`` or ``--no-recovery-crashes`` removed them. Neither is a pass."""

    scenario_path: str
    boundary: str  # the matrix column
    state: str  # one of GAP_STATES
    why: str
    # Point ids (deselected) or the clean run's calls that would have passed the boundary
    # (not reachable: the agent's run never showed the boundary, so no point id exists).
    points: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario_path": self.scenario_path,
            "boundary": self.boundary,
            "state": self.state,
            "why": self.why,
            "points": list(self.points),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> NotRun:
        return cls(
            str(raw["scenario_path"]),
            str(raw["boundary"]),
            str(raw["state"]),
            str(raw["why"]),
            tuple(str(p) for p in raw.get("points", ())),
        )


@dataclass(frozen=True, slots=True)
class Results:
    """A whole run: which agent, when, and every case."""

    agent: str
    cases: tuple[CaseRecord, ...]
    created: str = ""  # ISO 8601, UTC
    seconds: float = 0.0  # wall time of the run
    # The run was interrupted (Ctrl-C, SIGTERM, -x): the cases present are real, the
    # absent ones were never run. Readers must not take a partial matrix for a whole one.
    incomplete: bool = False
    # The boundaries the agent can be killed at (``adapter.boundaries``, plus torn_write if
    # the harness can tear its writes); None: not recorded (a file from an older run).
    reachable: tuple[str, ...] | None = None
    not_run: tuple[NotRun, ...] = ()  # per scenario and column: no case, and why

    @property
    def failing(self) -> tuple[CaseRecord, ...]:
        return tuple(case for case in self.cases if case.failing)


# ---------------------------------------------------------------------------- from a case


def _small_world(world: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in sorted(world.items()):
        if key == "files" and isinstance(value, Mapping):
            files: dict[str, str | None] = {}
            for path, text in sorted(value.items()):
                if path.startswith(_AGENT_STATE):
                    continue  # the session file itself: the timeline shows it line by line
                if isinstance(text, str) and len(text) > _MAX_FILE_TEXT:
                    text = f"{text[:_MAX_FILE_TEXT]}… (+{len(text) - _MAX_FILE_TEXT} chars)"
                files[path] = text
            out[key] = files
        else:
            out[key] = value
    return out


def _jsonable(value: Any) -> Any:
    """Expectations and observations as plain JSON (mappings become dicts, tuples lists)."""
    return json.loads(json.dumps(value, default=str))


def _verdict_fields(verdict: Verdict) -> dict[str, Any]:
    observed = verdict.observed
    return {
        "status": verdict.status,
        "indeterminate": verdict.indeterminate,
        "expected": _jsonable(verdict.expected),
        "observed": None
        if observed is None
        else _jsonable(
            {
                "outcome": observed.outcome,
                "ledger": observed.ledger,
                "code": observed.code,
                "told": observed.told,
                "world": _small_world(observed.world),
            }
        ),
        "mismatches": tuple(
            _jsonable({"field": m.field, "expected": m.expected, "observed": m.observed})
            for m in verdict.mismatches
        ),
        "violations": tuple(
            {"invariant": v.invariant, "message": v.message, "tool_call_id": v.tool_call_id}
            for v in verdict.violations
        ),
        "problems": tuple(verdict.problems),
        "notes": tuple(verdict.notes),
        "not_applicable": tuple(verdict.not_applicable),
    }


def verdict_reasons(verdict: Verdict) -> tuple[str, ...]:
    """Why a verdict is not a pass, in ``CaseRecord.reasons``'s words, one line each."""
    return (
        *(f"problem: {p}" for p in verdict.problems),
        *(m.describe() for m in verdict.mismatches),
        *(f"invariant {v.invariant}: {v.message}" for v in verdict.violations),
    )


def _second_crashes(result: CaseResult) -> tuple[dict[str, Any], ...]:
    """Each second crash of a depth-2 case with what a reader acts on: its own rerun line,
    its directory, why it did not pass and its compact timeline."""
    cases = {sub.point: sub for sub in result.sub_cases}
    out = []
    for point, verdict in result.sub_results:
        entry: dict[str, Any] = {
            "point": point,
            "status": verdict.status,
            "repro": rerun_command(result, second=point),
        }
        sub = cases.get(point)
        if sub is not None:
            entry["case_dir"] = str(sub.case_dir)
        if not verdict.passed:
            entry["reasons"] = list(verdict_reasons(verdict)) or [verdict.status]
        if sub is not None:
            entry["timeline"] = [dict(moment) for moment in sub.timeline]
        out.append(entry)
    return tuple(out)


def _shown_path(path: Path) -> str:
    try:  # relative to where the run stands, like the repro command
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def record_from_result(
    result: CaseResult, node_id: str, *, timeline: Sequence[Mapping[str, Any]] = ()
) -> CaseRecord:
    """The record of a finished case (the pytest plugin calls this right after the case)."""
    scenario = result.scenario
    crashed = crashed_call(scenario, result.point_id)
    return CaseRecord(
        node_id=node_id,
        scenario=scenario.name,
        scenario_path=_shown_path(scenario.path),
        tools=tuple(scenario.tools),
        idempotency=tuple(scenario.idempotency_classes),
        evals=tuple(scenario.evals),
        crash_call=crashed.call if crashed else "",
        crash_tool=crashed.tool if crashed else "",
        crash_class=crashed.idempotency if crashed else "",
        point=result.point_id,
        boundary=result.boundary,
        seconds=round(result.seconds, 3),
        lives=result.lives,
        repro=rerun_command(result),
        case_dir=str(result.case_dir),
        recovery_points=_second_crashes(result),
        timeline=tuple(timeline),
        **_verdict_fields(result.verdict),
    )


def with_world_diffs(cases: Iterable[CaseRecord]) -> tuple[CaseRecord, ...]:
    """Each case's world compared with its scenario's clean case: what the crash changed
    (a second email is ``emails: 1 -> 2``). Cases of a scenario without a clean record
    (filtered out, or its run errored) get no diff rather than a guess."""
    cases = tuple(cases)
    clean: dict[str, Mapping[str, Any]] = {}
    for case in cases:
        if case.boundary == "clean" and case.observed is not None:
            clean[case.scenario_path] = case.observed.get("world") or {}
    out = []
    for case in cases:
        base = clean.get(case.scenario_path)
        if base is None or case.observed is None or case.boundary == "clean":
            out.append(case)
            continue
        out.append(dataclasses.replace(case, world_diff=_world_diff(base, case.observed.get("world") or {})))
    return tuple(out)


def _world_diff(clean: Mapping[str, Any], observed: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    changes: list[dict[str, Any]] = []
    for key in sorted(set(clean) | set(observed)):
        if key == "files":
            before, after = clean.get("files") or {}, observed.get("files") or {}
            for path in sorted(set(before) | set(after)):
                if before.get(path) != after.get(path):
                    changes.append(
                        {"key": f"files[{path}]", "clean": before.get(path), "observed": after.get(path)}
                    )
        elif clean.get(key, 0) != observed.get(key, 0):
            changes.append({"key": key, "clean": clean.get(key, 0), "observed": observed.get(key, 0)})
    return tuple(changes)


# ---------------------------------------------------------------------------- JSON I/O


@cache
def schema() -> Mapping[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return loaded


def results_to_json(results: Results, derived: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The file's object; ``derived`` adds keys computed from the cases (the scorecard, by
    ``reports.writer``) for machine readers -- a reader recomputes them, never trusts them."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "agent": results.agent,
        "created": results.created,
        "seconds": round(results.seconds, 3),
        "incomplete": results.incomplete,
        **({} if results.reachable is None else {"reachable": list(results.reachable)}),
        "not_run": [gap.to_json() for gap in results.not_run],
        **(derived or {}),
        "cases": [case.to_json() for case in results.cases],
    }


def _where(error: Any) -> str:
    parts = []
    for part in error.absolute_path:
        parts.append(f"[{part}]" if isinstance(part, int) else f".{part}")
    return "".join(parts).lstrip(".") or "(top level)"


def results_from_json(raw: Any, path: Path | str = "<results>") -> Results:
    """Validate a parsed results file against the schema and build it; one-line errors."""
    validator = jsonschema.Draft202012Validator(schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(raw))
    if error is not None:
        hint = ""
        if isinstance(raw, Mapping) and raw.get("format") != FORMAT:
            hint = f' (is this a crashmatrix results file? expected "format": {json.dumps(FORMAT)})'
        raise ResultsFileError(path, f"{_where(error)}: {error.message}{hint}")
    return Results(
        agent=str(raw["agent"]),
        cases=tuple(CaseRecord.from_json(case) for case in raw["cases"]),
        created=str(raw.get("created", "")),
        seconds=float(raw.get("seconds", 0.0)),
        incomplete=bool(raw.get("incomplete", False)),
        reachable=None if raw.get("reachable") is None else tuple(str(b) for b in raw["reachable"]),
        not_run=tuple(NotRun.from_json(gap) for gap in raw.get("not_run", ())),
    )


# A results file is crashmatrix's own output, every case with its timeline: a thousand cases
# are a few MB. Past this it is not one (a dump, a log), and reading it whole would take
# minutes and memory before any message.
RESULTS_LIMIT = 256 * 1024 * 1024


def load_results(path: Path | str) -> Results:
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError:
        size = 0  # reading it says why
    if size > RESULTS_LIMIT:
        raise ResultsFileError(
            path,
            f"file is {size} bytes, over the {RESULTS_LIMIT} bytes a crashmatrix results file "
            "reaches; is it the right file?",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as error:
        raise ResultsFileError(path, "no such file") from error
    except (OSError, UnicodeDecodeError) as error:
        raise ResultsFileError(path, f"cannot read it ({error})") from error
    try:
        raw = json.loads(text)
    except ValueError as error:
        raise ResultsFileError(path, f"not JSON: {error}") from error
    return results_from_json(raw, path)


def write_results(results: Results, path: Path | str, derived: Mapping[str, Any] | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole then renamed: a reader (CI uploading artifacts) never sees half a file.
    tmp = path.with_name(f".{path.name}.tmp")
    raw = results_to_json(results, derived)
    cases = raw.pop("cases")
    # One case per line: readable, greppable and diffable, without indenting ~700 timelines.
    head = json.dumps(raw, ensure_ascii=False, indent=1)[:-2]
    body = ",\n".join(json.dumps(case, ensure_ascii=False, separators=(",", ":")) for case in cases)
    try:
        tmp.write_text(f'{head},\n "cases": [\n{body}\n ]\n}}\n', "utf-8")
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk keeps no half a file
        raise
    tmp.replace(path)
    return path
