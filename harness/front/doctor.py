"""``crashmatrix doctor --agent X``: does every check see this agent?

    crashmatrix doctor --agent ADAPTER [--scenario FILE] [--json] [--keep DIR]

A check that never fires proves nothing: an invariant reading the wrong file, an adapter
that maps no Tool Result, effects nobody counts, all pass silently. So before a run is
trusted, the doctor runs ONE clean case of a built-in scenario that applies to the agent
(through the normal lives), and then, on a copy of that case each, plants the faults the
checks exist for into the agent's OWN state, at the rawest layer the harness can honestly
write:

* a duplicate effect: the effect's unit copied in the agent's effect source (a JSONL line, a
  SQLite row, a file) and probed as after a life; or the mock world's event and row,
* a torn last line: the line of the final answer cut in half (the writer died mid-append),
* a second Tool Result: the raw line of a Tool Result written twice,
* a ledger line in the prompt: a ledger record pasted as text into a system message of the
  last model request the model received,
* a tampered argument: one argument of a saved tool call changed in the session's raw line
  (same length, so no later offset moves).

Each copy is read back through the adapter's own ``observe`` and judged by the verdict's
invariants; the table says which check fired (``harness.verdict.coverage``). Exit status: 0
when every check that applies fires, 1 when one is blind (or the clean case did not finish),
2 for bad input.

The pytest plugin runs the same doctor once (``cached_coverage``: keyed by the agent's files,
crashmatrix's sources and version, under a cache directory) and prints its summary line.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import fnmatch
import hashlib
import json
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from crashmatrix.harness.agents.loading import (
    adapter_for,
    capabilities_of,
    fork_preload,
    load_adapter,
    observe,
)
from crashmatrix.harness.agents.protocol import AgentAdapter
from crashmatrix.harness.agents.session_records import CannotPlant, JsonlLines, SessionRecords, SqliteRows
from crashmatrix.harness.core.records import ExecutionRecord, MessageEntry
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.session_log import split_lines
from crashmatrix.harness.core.trace import CaseRun
from crashmatrix.harness.core.world_events import NON_SIDE_EFFECT_KINDS
from crashmatrix.harness.errors import CrashmatrixError, InputError
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.input.suite import BUILTIN_SUITE, scenario_files
from crashmatrix.harness.lives.casedir import clone_case, session_path_of
from crashmatrix.harness.lives.injector import LifeLauncher, run_case
from crashmatrix.harness.observation.observation import Observation
from crashmatrix.harness.plan.applicability import not_applicable
from crashmatrix.harness.verdict.coverage import (
    BLIND,
    NOT_APPLICABLE,
    PLANTS,
    Coverage,
    Plant,
    PlantResult,
    State,
    judge_plant,
)
from crashmatrix.harness.verdict.invariants import check_all
from crashmatrix.harness.verdict.invariants import not_applicable as checks_not_applicable
from crashmatrix.harness.verdict.verdict import evidence

__all__ = [
    "blind_checks",
    "cache_dir",
    "cached_coverage",
    "cached_summary",
    "doctor_scenario",
    "main_doctor",
    "run_doctor",
    "self_check",
]

# The scenarios the doctor prefers, in order: a non-idempotent call with an effect, a Tool
# Result and a final answer. Any other scenario of the suite that applies comes after.
PREFERRED = (
    "send_email/send_once.yaml",
    "create_order/keyed_once.yaml",
    "create_order/unkeyed_crash.yaml",
    "write_file/write_file_recovery.yaml",
    "write_file/overwrite_existing.yaml",
)
_SAY_NO = ("no", "n", "false")


class _Cannot(CannotPlant):
    """A plant the harness cannot make on this agent; the message says why. ``per_call``:
    blind only for some calls (see ``PlantResult.per_call``)."""

    def __init__(self, why: str, *, state: State = BLIND, per_call: bool = False) -> None:
        super().__init__(why, not_applicable=state == NOT_APPLICABLE)
        self.per_call = per_call


# -- which scenario ------------------------------------------------------------------------


def doctor_scenario(adapter: AgentAdapter, suite: Path = BUILTIN_SUITE) -> Scenario:
    """The first scenario of the suite that applies to the agent as it is: no fault, no edit
    between lives, no approval answered no (the doctor plants its own faults)."""
    capabilities = capabilities_of(adapter)
    paths = scenario_files(suite)
    ranked = sorted(paths, key=lambda p: (_rank(p, suite), str(p)))
    for path in ranked:
        scenario = load_scenario(path)
        answers = [*scenario.approvals.values(), *scenario.approvals_again.values()]
        if scenario.faults or scenario.between_lives or any(str(a).lower() in _SAY_NO for a in answers):
            continue
        if not not_applicable(scenario, capabilities):
            return scenario
    raise InputError(
        f"doctor: no scenario of {suite} applies to agent {adapter.name!r} "
        "(it has none of the suite's tools); give one with --scenario FILE"
    )


def _rank(path: Path, suite: Path) -> int:
    relative = path.relative_to(suite).as_posix() if path.is_relative_to(suite) else path.name
    return PREFERRED.index(relative) if relative in PREFERRED else len(PREFERRED)


# -- the doctor ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Case:
    """The clean case the plants are made on, and what it showed."""

    agent: str
    adapter: AgentAdapter
    scenario: Scenario
    run: CaseRun
    observation: Observation


def run_doctor(
    agent: str,
    *,
    launcher: LifeLauncher | None = None,
    work: Path | None = None,
    scenario: Path | None = None,
    deadline: float = 30.0,
) -> Coverage:
    """Plant every fault of ``PLANTS`` into a copy of one clean case of ``agent`` and say
    which checks fired. ``work``: where the case directories go (a temporary one if None)."""
    started = time.monotonic()
    load_adapter(agent)  # a bad --agent fails here, with its one line, before anything runs
    adapter = adapter_for(agent)
    chosen = load_scenario(scenario) if scenario is not None else doctor_scenario(adapter)
    reasons = not_applicable(chosen, capabilities_of(adapter))
    if reasons:
        raise InputError(f"{chosen.path}: does not apply to agent {agent!r}: {'; '.join(reasons)}")
    launcher = launcher or LifeLauncher("fork", preload=fork_preload(agent), warm=(agent,))
    with _work_dir(work) as base:
        run = run_case(base / "clean", chosen, launcher, agent=agent, deadline=deadline)
        label = _label(chosen)
        if run.status != "ok":
            problem = "; ".join(
                f"life {life.life} {life.status}: {life.error}" for life in run.lives if life.error
            )
            why = (
                f"the clean case of {label} did not finish ({run.status}{': ' + problem if problem else ''})"
            )
            return Coverage(agent, label, (), why, time.monotonic() - started)
        case = _Case(agent, adapter, chosen, run, _observe(adapter, run))
        clean = evidence(case.observation, chosen)
        baseline = check_all(clean)
        results = [_try(plant, case, base / plant.name, baseline) for plant in PLANTS]
    return Coverage(agent, label, tuple(results), "", time.monotonic() - started)


def _observe(adapter: AgentAdapter, run: CaseRun) -> Observation:
    """The adapter's observation with every check at work: what an earlier doctor found
    blind must not silence the checks this one is testing."""
    return dataclasses.replace(observe(adapter, run), blind_checks={})


def _label(scenario: Scenario) -> str:
    path = scenario.path
    return path.relative_to(BUILTIN_SUITE).as_posix() if path.is_relative_to(BUILTIN_SUITE) else str(path)


@contextlib.contextmanager
def _work_dir(work: Path | None) -> Iterator[Path]:
    if work is not None:
        work.mkdir(parents=True, exist_ok=True)
        yield work
        return
    with tempfile.TemporaryDirectory(prefix="crashmatrix-doctor-") as tmp:
        yield Path(tmp)


def _try(plant: Plant, case: _Case, target: Path, baseline: Sequence[Any]) -> PlantResult:
    clone_case(case.run.case_dir, target)
    try:
        where = _PLANTERS[plant.name](case, target)
    except CannotPlant as cannot:  # the doctor's own, or a session's records'
        state: State = NOT_APPLICABLE if cannot.not_applicable else BLIND
        per_call = isinstance(cannot, _Cannot) and cannot.per_call
        return PlantResult(plant.name, plant.check, state, f"cannot plant: {cannot}", per_call=per_call)
    planted = _observe(case.adapter, dataclasses.replace(case.run, case_dir=target))
    if planted.session is None and planted.session_problem:
        # The adapter could not read what was planted: the verdict fails such a case with
        # the reason, but this check saw nothing.
        return PlantResult(
            plant.name, plant.check, BLIND, f"the session could not be read: {planted.session_problem}", where
        )
    facts = evidence(planted, case.scenario)
    return judge_plant(
        plant,
        baseline=baseline,
        planted=check_all(facts),
        inapplicable=checks_not_applicable(facts),
        where=where,
    )


# -- the agent's session, as raw lines or rows ---------------------------------------------


_ONE_COLUMN = re.compile(r"^\s*select\s+(\w+)\s+from\s+(\w+)\b(.*)$", re.IGNORECASE | re.DOTALL)


def _session(case: _Case, case_dir: Path) -> SessionRecords:
    """The agent's session as it writes it: seed 000's JSONL where the harness told it, a
    foreign JSONL file, the rows of a one-column SQLite query, or what an adapter whose agent
    keeps its own store returns (``session_records``: a framework's session or checkpoints);
    other sessions have no record the harness could write."""
    if case.observation.session_unavailable:
        raise _Cannot(f"the adapter cannot read the agent's session ({case.observation.session_unavailable})")
    own = getattr(case.adapter, "session_records", None)
    if callable(own):
        records: SessionRecords = own(case_dir)
        return records
    spec = getattr(case.adapter, "spec", None)
    source = getattr(spec, "source", None)
    if source is None:
        return JsonlLines(session_path_of(case_dir))
    workspace = case_dir / "world" / "workspace"
    if source.kind == "jsonl":
        return JsonlLines(workspace / source.path)
    if source.kind == "sqlite":
        match = _ONE_COLUMN.match(source.query)
        if match is not None:
            return SqliteRows(workspace / source.path, match.group(2), match.group(1), match.group(3))
        raise _Cannot(
            f"its session query {source.query!r} is not SELECT <one column> FROM <table>: no row to write"
        )
    raise _Cannot("its session is the records a reader function returns: no line to write")


def _line_of(case: _Case, pick: Callable[[Any], bool], what: str) -> int:
    """The raw line (or row) number of the first entry of the clean session ``pick``
    accepts (the last one, when ``what`` starts with 'last')."""
    log = case.observation.session
    entries = list(log.entries) if log is not None else []
    if what.startswith("last"):
        entries.reverse()
    for entry in entries:
        if pick(entry) and entry.line > 0:
            return int(entry.line)
    raise _Cannot(f"the clean case's session has no {what}", state=NOT_APPLICABLE)


def _is_tool_result(entry: Any) -> bool:
    return isinstance(entry, MessageEntry) and entry.message.role == "tool"


def _is_final(entry: Any) -> bool:
    return (
        isinstance(entry, MessageEntry) and entry.message.role == "assistant" and not entry.message.tool_calls
    )


def _is_call(entry: Any) -> bool:
    return isinstance(entry, MessageEntry) and bool(entry.message.tool_calls)


def _plant_second_result(case: _Case, target: Path) -> str:
    session = _session(case, target)
    return session.again(_line_of(case, _is_tool_result, "Tool Result"))


def _plant_torn(case: _Case, target: Path) -> str:
    session = _session(case, target)
    return session.tear(_line_of(case, _is_final, "last final answer"))


def _plant_tampered(case: _Case, target: Path) -> str:
    session = _session(case, target)
    number = _line_of(case, _is_call, "tool call")
    raw = session.get(number)
    entry = next(e for e in case.observation.session.entries if e.line == number)  # type: ignore[union-attr]
    assert isinstance(entry, MessageEntry)
    call = entry.message.tool_calls[0]
    arguments = call.parsed_arguments()
    values = arguments.values() if isinstance(arguments, dict) else ()
    for value in values:
        if not isinstance(value, str) or len(value) < 2 or not value.isascii() or value.encode() not in raw:
            continue
        # Same length: no later line's offset moves (the world's events keep their meaning).
        other = "".join(("y" if c == "x" else "x") if c.isalnum() else c for c in value)
        if other == value:
            continue
        session.replace(number, raw.replace(value.encode(), other.encode()))
        return f"{session.name()} record {number}: {call.id}'s argument {value!r} -> {other!r}"
    raise _Cannot(
        f"tool call {call.id!r} has no text argument spelled as it is in {session.name()} record {number}"
    )


def _plant_ledger_in_prompt(case: _Case, target: Path) -> str:
    path = target / "model_requests.jsonl"
    if not path.exists() or not path.read_text(encoding="utf-8").strip():
        raise _Cannot("the case logged no model request")
    lines = path.read_text(encoding="utf-8").splitlines()
    last = max(i for i, text in enumerate(lines) if text.strip())
    request = json.loads(lines[last])
    messages = request.get("messages")
    if not isinstance(messages, list):
        raise _Cannot("the last model request has no messages list")
    log = case.observation.session
    executions = [e for e in (log.entries if log else ()) if isinstance(e, ExecutionRecord)]
    record = {
        "type": "tool_execution",
        "execution_id": executions[-1].execution_id if executions else "exec_planted_by_doctor",
        "tool_call_id": executions[-1].tool_call_id if executions else "call_planted_by_doctor",
        "status": "running",
    }
    text = "Recovered from the ledger: " + json.dumps(record)
    if messages and isinstance(messages[0], dict) and messages[0].get("role") == "system":
        messages[0] = {**messages[0], "content": f"{messages[0].get('content') or ''}\n{text}"}
    else:
        messages.insert(0, {"role": "system", "content": text})
    lines[last] = json.dumps(request, ensure_ascii=False)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return (
        f"model request {last + 1}: a system message carries {record['status']!r} of {record['execution_id']}"
    )


# -- a duplicate effect --------------------------------------------------------------------

_EFFECT_KIND = "effect"  # harness.agents.effects.EFFECT_KIND: an effect probed in the agent's world


def _plant_duplicate_effect(case: _Case, target: Path) -> str:
    observation = case.observation
    contracts = case.scenario.contracts
    tools = [
        t
        for t in case.scenario.tools
        if (c := contracts.get(t)) is not None and c.idempotency == "non_idempotent"
    ]
    if not tools:
        raise _Cannot(f"{_label(case.scenario)} calls no non-idempotent tool", state=NOT_APPLICABLE)
    events = [e for e in observation.world.events if e.kind not in NON_SIDE_EFFECT_KINDS and e.tool in tools]
    if not events:
        unseen = [t for t in tools if not observation.world.sees(t)]
        if unseen:
            raise _Cannot(
                f"the effects of {', '.join(unseen)} are not observed (declare them under effects: "
                "in the adapter, or serve them as services:)",
                per_call=True,
            )
        raise _Cannot(f"the clean case shows no effect of {', '.join(tools)}")
    event = events[-1]
    if event.kind == _EFFECT_KIND:
        where = _duplicate_in_source(case, target, event.detail)
        after_life = getattr(case.adapter, "after_life", None)
        if callable(after_life):  # found as the harness finds an effect made after a life
            after_life(target, case.run.lives[-1], case.run.trace)
        return where
    return _duplicate_world_event(target, event.seq)


def _duplicate_world_event(target: Path, seq: int) -> str:
    """The mock world's event ``seq`` and the rows it wrote (every table's row with that
    ``seq``), once more under a new seq: the mock service did it twice."""
    conn = sqlite3.connect(target / "world" / "world.sqlite")
    try:
        with conn:
            columns = [r[1] for r in conn.execute("PRAGMA table_info(events)") if r[1] != "seq"]
            names = ", ".join(columns)
            cursor = conn.execute(
                f"INSERT INTO events ({names}) SELECT {names} FROM events WHERE seq = ?", (seq,)
            )
            new = cursor.lastrowid
            copied = []
            tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                info = list(conn.execute(f"PRAGMA table_info({table})"))
                if table == "events" or table.startswith("sqlite_") or "seq" not in [r[1] for r in info]:
                    continue
                keep = [r[1] for r in info if not r[5] and r[1] != "seq"]  # not the primary key
                listed = ", ".join([*keep, "seq"])
                picked = ", ".join([*keep, "?"])
                done = conn.execute(
                    f"INSERT INTO {table} ({listed}) SELECT {picked} FROM {table} WHERE seq = ?", (new, seq)
                )
                if done.rowcount:
                    copied.append(table)
    finally:
        conn.close()
    rows = f" and its {', '.join(copied)} row" if copied else ""
    return f"world.sqlite: event seq {seq}{rows} again as seq {new}"


def _duplicate_in_source(case: _Case, target: Path, detail: Any) -> str:
    spec = getattr(case.adapter, "spec", None)
    source = str(detail.get("source", "")) if isinstance(detail, dict) else ""
    found = [s for s in getattr(spec, "effects", ()) if s.label == source]
    if not found:
        raise _Cannot(f"the effect's source {source!r} is not among the adapter's effects:")
    effect = found[0]
    workspace = target / "world" / "workspace"
    path = workspace / effect.path
    identity = str(detail.get("identity", ""))
    if effect.source == "jsonl":
        number = int(identity.partition("#")[2].partition(":")[0] or 0)
        data = path.read_bytes()
        lines, _ = split_lines(path, data)
        if not 0 < number <= len(lines):
            raise _Cannot(f"{effect.path} has no line {number} any more")
        with open(path, "ab") as out:
            out.write(lines[number - 1].data + b"\n")
        return f"{effect.path}: line {number} appended again"
    if effect.source == "sqlite":
        match = re.search(r"\bfrom\s+[\"`\[]?(\w+)", effect.query, re.IGNORECASE)
        if match is None:
            raise _Cannot(f"cannot tell the table of {effect.query!r}")
        table = match.group(1)
        try:
            conn = sqlite3.connect(path)
            try:
                with conn:
                    keep = [r[1] for r in conn.execute(f"PRAGMA table_info({table})") if not r[5]]
                    names = ", ".join(keep)
                    conn.execute(
                        f"INSERT INTO {table} ({names}) SELECT {names} FROM {table} "
                        f"WHERE rowid = (SELECT max(rowid) FROM {table})"
                    )
            finally:
                conn.close()
        except sqlite3.Error as error:
            raise _Cannot(f"{effect.path}: the last row of {table} cannot be copied ({error})") from error
        return f"{effect.path}: the last row of {table} inserted again"
    # files: the last file again under a name its glob still matches
    relative = identity.partition(":")[0]
    original = workspace / relative
    for name in (
        f"{original.stem}-again{original.suffix}",
        f"again-{original.name}",
        f"{original.name}.again",
    ):
        copy = original.with_name(name)
        if fnmatch.fnmatchcase(copy.relative_to(workspace).as_posix(), effect.path):
            shutil.copy2(original, copy)
            return f"{relative} copied to {copy.name}"
    raise _Cannot(f"no second file name of {relative} matches {effect.path!r}")


_PLANTERS: dict[str, Callable[[_Case, Path], str]] = {
    "duplicate_effect": _plant_duplicate_effect,
    "torn_last_line": _plant_torn,
    "second_tool_result": _plant_second_result,
    "ledger_in_prompt": _plant_ledger_in_prompt,
    "tampered_argument": _plant_tampered,
}


# -- the cache the pytest plugin uses ------------------------------------------------------


def cache_dir() -> Path:
    """``$CRASHMATRIX_CACHE_DIR``, else ``$XDG_CACHE_HOME/crashmatrix``, else ``~/.cache/crashmatrix``:
    never the project's folder (an installed suite's folder is not written)."""
    given = os.environ.get("CRASHMATRIX_CACHE_DIR")
    if given:
        return Path(given)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "crashmatrix"


def _agent_files(agent: str) -> list[Path]:
    """The files an agent is made of, as far as the harness can tell: an adapter YAML and
    the sources beside it; a Python adapter's module."""
    if agent.endswith((".yaml", ".yml")):
        adapter = Path(agent)
        return [adapter, *sorted(p for p in adapter.resolve().parent.glob("*.py"))]
    import importlib.util

    from crashmatrix.harness.agents.loading import BUILTIN

    module = BUILTIN.get(agent, agent).partition(":")[0]
    with contextlib.suppress(ImportError, ValueError):
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin:
            return [Path(spec.origin)]
    return []


def cache_key(agent: str, scenario: Path | None = None) -> str:
    """The agent's files, crashmatrix's own sources (an editable install changes without a
    new version) and version: a doctor's findings hold while none of them changed."""
    from importlib.metadata import PackageNotFoundError, version

    digest = hashlib.sha256(agent.encode())
    with contextlib.suppress(PackageNotFoundError):
        digest.update(version("crashmatrix").encode())
    root = Path(__file__).resolve().parents[2]
    sources = [
        p for folder in ("harness", "reference_agent", "mock_tools") for p in (root / folder).rglob("*.py")
    ]
    for path in [*_agent_files(agent), *sorted(sources), *([scenario] if scenario else [])]:
        with contextlib.suppress(OSError):
            digest.update(str(path).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:32]


def cached_coverage(
    agent: str,
    launcher: Callable[[], LifeLauncher],
    *,
    directory: Path | None = None,
    deadline: float = 30.0,
) -> Coverage:
    """The doctor's findings for ``agent``: read from the cache, or found once (one process
    finds them, any other waits on the lock and reads them: xdist workers share them)."""
    directory = directory or cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"doctor-{cache_key(agent)}.json"
    cached = read_cached(target)
    if cached is not None:
        return cached
    with open(directory / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cached = read_cached(target)
        if cached is not None:
            return cached
        coverage = run_doctor(agent, launcher=launcher(), deadline=deadline)
        temporary = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(coverage.to_json(), indent=1), encoding="utf-8")
        os.replace(temporary, target)
    return coverage


# What the doctor found in this process, by --agent: the checks blind on each agent, which
# every verdict of that agent lists as not applicable (``blind_checks``).
_FOUND: dict[str, Coverage | None] = {}  # None: looked for, none cached


def self_check(agent: str, launcher: Callable[[], LifeLauncher], *, deadline: float = 30.0) -> str:
    """The pytest plugin's once-per-session doctor: its one summary line. Never fails a run:
    a doctor that cannot run says so in the line."""
    try:
        coverage = cached_coverage(agent, launcher, deadline=deadline)
    except Exception as error:  # the self-check is a by-product: it must not fail the run
        return f"doctor: {agent}: could not run ({(str(error) or type(error).__name__).splitlines()[0]})"
    _remember(agent, coverage)
    return coverage.summary()


def cached_summary(agent: str) -> str:
    """The summary line of the doctor's cached findings for ``agent`` ("" if none): what an
    xdist controller prints after its workers ran the doctor."""
    coverage = read_cached(cache_dir() / f"doctor-{cache_key(agent)}.json")
    return coverage.summary() if coverage is not None else ""


def blind_checks(agent: str) -> dict[str, str]:
    """check -> why, for each check the doctor found blind on ``agent`` in this process (or
    in the cache, for a process that did not run it): not applicable in every verdict."""
    if agent not in _FOUND:
        _remember(agent, read_cached(cache_dir() / f"doctor-{cache_key(agent)}.json"))
    coverage = _FOUND[agent]
    return coverage.blind_reasons() if coverage is not None else {}


def _remember(agent: str, coverage: Coverage | None) -> None:
    """Keep what the doctor found for ``agent``, and give its blind checks to the adapter
    this process judges the agent's cases with (``Capabilities.blind``): every observation
    then carries them (``agents.loading.observe``) and every verdict lists them as not
    applicable with the doctor's reason."""
    _FOUND[agent] = coverage
    blind = coverage.blind_reasons() if coverage is not None else {}
    adapter = adapter_for(agent)
    capabilities = capabilities_of(adapter)
    if dict(capabilities.blind) != blind:
        setattr(adapter, "capabilities", dataclasses.replace(capabilities, blind=blind))  # noqa: B010


def read_cached(path: Path) -> Coverage | None:
    try:
        return Coverage.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


# -- the command ---------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crashmatrix doctor",
        description="Plant the faults each check exists for into one clean case of an agent "
        "and show which checks fire.",
    )
    parser.add_argument(
        "--agent", required=True, help="an adapter file (agent.yaml), module:factory or reference"
    )
    parser.add_argument(
        "--scenario", type=Path, help="plant into this scenario's clean case (default: the suite's)"
    )
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument("--keep", type=Path, help="keep the clean case and each planted copy here")
    return parser


def main_doctor(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    try:
        coverage = run_doctor(args.agent, work=args.keep, scenario=args.scenario)
    except CrashmatrixError as error:
        print(f"crashmatrix doctor: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(coverage.to_json(), indent=2))
    else:
        print(f"crashmatrix doctor --agent {args.agent} (planted into the clean case of {coverage.scenario})")
        print()
        if coverage.results:
            print(coverage.table())
            print()
        print(coverage.summary())
    return 0 if coverage.ok else 1
