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
import functools
import hashlib
import itertools
import json
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from crashmatrix.harness.agents.conversation import ASKED
from crashmatrix.harness.agents.effects import scan
from crashmatrix.harness.agents.loading import (
    adapter_for,
    capabilities_of,
    fork_preload,
    load_adapter,
    observe,
)
from crashmatrix.harness.agents.protocol import AgentAdapter
from crashmatrix.harness.agents.python_agent import RULE_FIRED, RULES_INSTALLED, silent_rules
from crashmatrix.harness.agents.session_records import CannotPlant, JsonlLines, SessionRecords, SqliteRows
from crashmatrix.harness.agents.tool_faults import ToolSideFault, arm
from crashmatrix.harness.core.boundaries import TORN_WRITE, CrashPoint
from crashmatrix.harness.core.globs import matches, matches_any
from crashmatrix.harness.core.records import ExecutionRecord, MessageEntry
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.session_log import split_lines
from crashmatrix.harness.core.tool_side import MCP_CALL_EVENT, tool_faults_acted
from crashmatrix.harness.core.trace import CaseRun
from crashmatrix.harness.core.world_events import NON_SIDE_EFFECT_KINDS
from crashmatrix.harness.errors import CrashmatrixError, InputError
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.input.suite import BUILTIN_SUITE, scenario_files
from crashmatrix.harness.lives.casedir import clone_case, session_path_of
from crashmatrix.harness.lives.injector import LifeLauncher, run_case
from crashmatrix.harness.observation.conversation import conversation_from_requests
from crashmatrix.harness.observation.observation import Observation
from crashmatrix.harness.plan.applicability import not_applicable
from crashmatrix.harness.plan.enumeration import (
    RECOVERY_FIRST,
    TOOL_SIDE_COLUMNS,
    points_from_trace,
    tool_side_points,
    tool_side_unreachable,
)
from crashmatrix.harness.verdict.coverage import (
    BLIND,
    FIRES,
    NOT_APPLICABLE,
    PLANTS,
    Coverage,
    Plant,
    PlantResult,
    Proof,
    State,
    judge_plant,
)
from crashmatrix.harness.verdict.expectations import compare, project
from crashmatrix.harness.verdict.invariants import check_all
from crashmatrix.harness.verdict.invariants import not_applicable as checks_not_applicable
from crashmatrix.harness.verdict.verdict import evidence, judge

__all__ = [
    "beside_adapter",
    "blind_checks",
    "cache_dir",
    "cached_coverage",
    "cached_summary",
    "doctor_scenario",
    "doctor_scenarios",
    "main_doctor",
    "run_doctor",
    "self_check",
    "tool_side_plan",
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

    def __init__(
        self, why: str, *, state: State = BLIND, per_call: bool = False, scenario_bound: bool = False
    ) -> None:
        super().__init__(why, not_applicable=state == NOT_APPLICABLE)
        self.per_call = per_call
        # The scenario lacks what the plant needs (a non-idempotent call, a Tool Result, a text
        # argument): another scenario of the suite may have it (``_Cases.prefer``).
        self.scenario_bound = scenario_bound


# -- which scenario ------------------------------------------------------------------------


def doctor_scenarios(adapter: AgentAdapter, suite: Path = BUILTIN_SUITE) -> Iterator[Scenario]:
    """The scenarios of the suite that apply to the agent as it is, in the doctor's order: no
    fault, no edit between lives, no approval answered no (the doctor plants its own faults)."""
    paths = scenario_files(suite)
    yield from _applying(adapter, sorted(paths, key=lambda p: (_rank(p, suite), str(p))))


def _applying(adapter: AgentAdapter, paths: Sequence[Path]) -> Iterator[Scenario]:
    capabilities = capabilities_of(adapter)
    for path in paths:
        scenario = load_scenario(path)
        answers = [*scenario.approvals.values(), *scenario.approvals_again.values()]
        if scenario.faults or scenario.between_lives or any(str(a).lower() in _SAY_NO for a in answers):
            continue
        if not not_applicable(scenario, capabilities):
            yield scenario


def doctor_scenario(adapter: AgentAdapter, suite: Path = BUILTIN_SUITE) -> Scenario:
    """The first scenario of the suite that applies to the agent as it is (``doctor_scenarios``);
    for an agent that has none of the suite's tools (its own MCP server's, in proxy mode), the
    first that applies of the scenarios beside its adapter file (``beside_adapter``)."""
    for scenario in doctor_scenarios(adapter, suite):
        return scenario
    for scenario in _applying(adapter, beside_adapter(adapter)):
        return scenario
    raise InputError(
        f"doctor: no scenario of {suite} applies to agent {adapter.name!r} "
        "(it has none of the suite's tools), nor does one beside its adapter file; "
        "give one with --scenario FILE"
    )


_SCENARIO_SCHEMA = re.compile(r"\$schema=\S*scenario\.schema\.json")


def beside_adapter(adapter: AgentAdapter) -> list[Path]:
    """The scenario files in the folder of the agent's adapter YAML: those that declare the
    scenario schema in their leading comments (as ``crashmatrix explore`` and the examples
    write them; an adapter or a contract beside them declares its own), sorted."""
    here = getattr(getattr(adapter, "spec", None), "here", None)
    if not isinstance(here, Path) or not here.is_dir():
        return []
    found = []
    for path in sorted(here.glob("*.y*ml")):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            comments = itertools.takewhile(lambda line: line.lstrip().startswith("#"), lines)
            if any(_SCENARIO_SCHEMA.search(line) for line in comments):
                found.append(path)
    return found


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


# How many clean cases of other scenarios the doctor may run besides its first one, to find
# a scenario that exercises a check, a rule or an effect source (each costs one clean case).
EXTRA_SCENARIOS = 4


@dataclasses.dataclass
class _Cases:
    """The clean cases the doctor runs: the chosen scenario's, and, when a check, a rule or
    an effect source needs a scenario that exercises it, one of the suite's that does (each
    run once, when first needed, at most ``EXTRA_SCENARIOS`` of them)."""

    agent: str
    adapter: AgentAdapter
    launcher: LifeLauncher
    base: Path
    deadline: float
    explicit: bool  # --scenario given: every plant uses it
    runs: dict[str, _Case | str] = dataclasses.field(default_factory=dict)
    _candidates: list[Scenario] | None = None

    def case(self, scenario: Scenario) -> _Case | str:
        """The clean case of ``scenario`` (run now if it was not), or why it did not finish."""
        label = _label(scenario)
        if label not in self.runs:
            directory = self.base / ("clean" if not self.runs else f"clean-{len(self.runs)}")
            run = run_case(directory, scenario, self.launcher, agent=self.agent, deadline=self.deadline)
            if run.status != "ok":
                problem = "; ".join(
                    f"life {life.life} {life.status}: {life.error}" for life in run.lives if life.error
                )
                self.runs[label] = (
                    f"the clean case of {label} did not finish "
                    f"({run.status}{': ' + problem if problem else ''})"
                )
            else:
                self.runs[label] = _Case(self.agent, self.adapter, scenario, run, _observe(self.adapter, run))
        return self.runs[label]

    @property
    def done(self) -> list[_Case]:
        return [case for case in self.runs.values() if isinstance(case, _Case)]

    @property
    def budget(self) -> bool:
        return not self.explicit and len(self.runs) <= EXTRA_SCENARIOS

    def prefer(self, want: Callable[[Scenario], bool]) -> Iterator[_Case]:
        """Clean cases of the scenarios ``want`` accepts: those already run first, then the
        suite's in the doctor's order, while the budget lasts."""
        yield from (case for case in self.done if want(case.scenario))
        if self._candidates is None:
            self._candidates = list(doctor_scenarios(self.adapter))
        for scenario in self._candidates:
            if _label(scenario) in self.runs or not want(scenario):
                continue
            if not self.budget:
                return
            case = self.case(scenario)
            if isinstance(case, _Case):
                yield case


def run_doctor(
    agent: str,
    *,
    launcher: LifeLauncher | None = None,
    work: Path | None = None,
    scenario: Path | None = None,
    deadline: float = 30.0,
) -> Coverage:
    """Plant every fault of ``PLANTS`` into a copy of a clean case of ``agent`` (the chosen
    scenario's, or one of the suite's that exercises the check) and say which checks fired;
    then prove the adapter's own claims (``_proofs``). ``work``: where the case directories
    go (a temporary one if None)."""
    started = time.monotonic()
    load_adapter(agent)  # a bad --agent fails here, with its one line, before anything runs
    adapter = adapter_for(agent)
    chosen = load_scenario(scenario) if scenario is not None else doctor_scenario(adapter)
    reasons = not_applicable(chosen, capabilities_of(adapter))
    if reasons:
        raise InputError(f"{chosen.path}: does not apply to agent {agent!r}: {'; '.join(reasons)}")
    launcher = launcher or LifeLauncher("fork", preload=fork_preload(agent), warm=(agent,))
    with _work_dir(work) as base:
        cases = _Cases(agent, adapter, launcher, base, deadline, explicit=scenario is not None)
        case = cases.case(chosen)
        label = _label(chosen)
        if isinstance(case, str):
            return Coverage(agent, label, (), case, time.monotonic() - started)
        results = [_plant_where_it_applies(plant, case, cases) for plant in PLANTS]
        proofs = _proofs(case, cases)
    return Coverage(agent, label, tuple(results), "", time.monotonic() - started, tuple(proofs))


def _plant_where_it_applies(plant: Plant, case: _Case, cases: _Cases) -> PlantResult:
    """The plant in the chosen scenario's clean case; where that scenario lacks what the
    plant needs (a non-idempotent call of a tool whose effects this adapter counts, a Tool
    Result, a text argument), in the first of the suite's scenarios that has it."""
    result, bound = _try(plant, case, cases.base / plant.name)
    if not bound or cases.explicit:
        return result
    tried = 0
    for number, other in enumerate(cases.prefer(_wants(plant, case.adapter)), 1):
        if other is case:
            continue
        tried += 1
        again, bound = _try(plant, other, cases.base / f"{plant.name}-{number}")
        # A scenario that exercises the check decides it; one whose plant failed only
        # replaces a first result that could not judge at all (n.a.), never a narrower one
        # (blind for some calls only: ``per_call``).
        if again.state == FIRES or (not bound and result.state == NOT_APPLICABLE):
            return again
    if result.state == NOT_APPLICABLE:
        nor = (
            f"nor did {tried} other scenario{'s' if tried != 1 else ''} of the suite"
            if tried
            else "nor does any other scenario of the suite that applies to this agent"
        )
        if plant.name == "duplicate_effect" and not tried:
            nor += " (none calls a non-idempotent tool it has and counts)"
        return dataclasses.replace(result, detail=f"{result.detail}; {nor}")
    return result


def _wants(plant: Plant, adapter: AgentAdapter) -> Callable[[Scenario], bool]:
    """Which scenarios exercise ``plant``'s check on this adapter: for a duplicate effect, a
    non-idempotent call of a tool whose effects the adapter counts; for the rest, any."""
    if plant.name != "duplicate_effect":
        return lambda scenario: True
    watched = getattr(getattr(adapter, "spec", None), "watched", None)  # None: every tool

    def counted(scenario: Scenario) -> bool:
        return any(
            (c := scenario.contracts.get(t)) is not None
            and c.idempotency == "non_idempotent"
            and (watched is None or t in watched)
            for t in scenario.tools
        )

    return counted


# -- what the adapter claims -----------------------------------------------------------------


def _proofs(case: _Case, cases: _Cases) -> list[Proof]:
    """Each claim of the adapter, proven or named blind: its boundary rules and intercepts
    fire, its effect sources are read, its approval prompt matches, the chosen scenario's
    crash points are reachable, its clean case's expectation keys are judged."""
    return [
        *_rule_proofs(cases),
        *_effect_proofs(cases),
        *_approval_proofs(cases),
        *_crash_proofs(case, cases),
        *_tool_side_proofs(case, cases),
        *_expectation_proofs(case),
    ]


def _installed(cases: _Cases) -> dict[str, Mapping[str, Any]]:
    return {
        str(rule.get("rule")): rule
        for case in cases.done
        for event in case.run.trace
        if event.get("event") == RULES_INSTALLED
        for rule in event.get("rules") or ()
    }


# Where a restart is crashed to prove a rule only recovery fires, best first.
_RECOVERY_ORDER = ("after_side_effect", "after_running", "before_tool_result", "after_approved")


def _rule_proofs(cases: _Cases) -> list[Proof]:
    """Each boundary rule and intercept of a kind-2 adapter fires in a run that calls its
    tool: the doctor's clean cases are searched first, then one scenario per tool of the
    agent that none of them called (a rule may be about any of its tools), then a restart
    after a crash (a rule on what only recovery calls: a lookup by idempotency key)."""
    installed = _installed(cases)
    if not installed:
        return []
    # (where it ran, its trace): the clean cases, then any recovery run below.
    runs: list[tuple[str, Sequence[Mapping[str, Any]]]] = []

    def seen() -> list[tuple[str, Sequence[Mapping[str, Any]]]]:
        return [(_label(case.scenario), case.run.trace) for case in cases.done] + runs

    def silent() -> bool:
        fired = {str(e.get("rule")) for _, trace in seen() for e in trace if e.get("event") == RULE_FIRED}
        return not set(installed) <= fired

    def calls_another_tool(scenario: Scenario) -> bool:
        return not set(scenario.tools) <= {tool for case in cases.done for tool in case.scenario.tools}

    if silent():
        for _ in cases.prefer(calls_another_tool):
            if not silent():
                break
    for case in list(cases.done) if silent() and not cases.explicit else ():
        # Killed right after the effect: the restart has the most to find out (a lookup).
        points = [p for p in points_from_trace(case.run.trace, 1) if p.boundary in case.adapter.boundaries]
        for point in sorted(
            (p for p in points if p.boundary in RECOVERY_FIRST),
            key=lambda p: _RECOVERY_ORDER.index(p.boundary),
        ):
            run = run_case(
                cases.base / f"recover-{len(runs)}",
                case.scenario,
                cases.launcher,
                agent=case.agent,
                point=point,
                deadline=cases.deadline,
            )
            runs.append((f"{_label(case.scenario)} (restarted after {point.id})", run.trace))
            break  # one recovery a scenario: its first point where recovery has work to do
        if not silent():
            break
    quiet = {rule.rule: rule for rule in silent_rules([e for _, trace in seen() for e in trace])}
    labels = ", ".join(label for label, _ in seen())
    proofs: list[Proof] = []
    for name, rule in sorted(installed.items(), key=lambda item: _position_key(item[0])):
        what = "boundary rule" if rule.get("kind") == "boundary" else f"intercept of {rule.get('tool')}"
        subject = f"{what} {name} ({rule.get('function')} -> {rule.get('boundary')}) fires"
        if name in quiet:
            proofs.append(Proof("rule", subject, BLIND, f"never fired in {labels}: {quiet[name].why}"))
            continue
        where = next(
            label
            for label, trace in seen()
            if any(e.get("event") == RULE_FIRED and e.get("rule") == name for e in trace)
        )
        proofs.append(Proof("rule", subject, FIRES, "fired", where))
    return proofs


def _position_key(name: str) -> tuple[str, int]:
    path, _, rest = name.rpartition(".yaml:")
    line = rest.partition(":")[0]
    return (path, int(line) if line.isdigit() else 0)


def _effect_proofs(cases: _Cases) -> list[Proof]:
    """Each ``effects:`` source is read: in a clean case of a scenario that calls its tool,
    the source shows the agent's effect, and one more planted into it is seen."""
    spec = getattr(cases.adapter, "spec", None)
    proofs: list[Proof] = []
    for index, effect in enumerate(getattr(spec, "effects", ())):
        subject = f"effect source {effect.label} of {effect.tool} ({effect.where_declared}) is read"
        case = next(cases.prefer(lambda scenario, tool=effect.tool: tool in scenario.tools), None)  # type: ignore[misc]
        if case is None:
            why = f"no scenario of the suite that applies to this agent calls {effect.tool}"
            proofs.append(Proof("effect_source", subject, NOT_APPLICABLE, why))
            continue
        label = _label(case.scenario)
        target = cases.base / f"effect-{index}"
        clone_case(case.run.case_dir, target)
        workspace = target / "world" / "workspace"
        before = scan(effect, workspace)
        if not before:
            why = (
                f"the clean case of {label} calls {effect.tool}, yet {effect.label} shows no effect of it: "
                "is the path (or where:, query:) the one the agent writes?"
            )
            proofs.append(Proof("effect_source", subject, BLIND, why, label))
            continue
        try:
            where = _duplicate_in_source(
                case, target, {"source": effect.label, "identity": before[-1].identity}, new_keys=True
            )
        except CannotPlant as cannot:
            proofs.append(Proof("effect_source", subject, BLIND, f"cannot plant: {cannot}", label))
            continue
        after = scan(effect, workspace)
        if len(after) > len(before):
            proofs.append(
                Proof("effect_source", subject, FIRES, f"{where}: {len(before)} -> {len(after)}", label)
            )
        else:
            why = f"planted ({where}), yet the source still shows {len(after)}"
            proofs.append(Proof("effect_source", subject, BLIND, why, label))
    return proofs


def _approval_proofs(cases: _Cases) -> list[Proof]:
    """A foreign agent's approval prompt matches what it asks: some clean case answered it."""
    spec = getattr(cases.adapter, "spec", None)
    prompt = getattr(spec, "approval_prompt", None)
    if not prompt:
        return []
    subject = f"approval prompt {getattr(spec, 'approval_where', '')} matches what the agent asks"
    for case in cases.done:
        if (case.run.case_dir / ASKED).exists():
            return [Proof("rule", subject, FIRES, "answered", _label(case.scenario))]
    asking = next(cases.prefer(lambda scenario: bool(scenario.approvals)), None)
    if asking is not None and (asking.run.case_dir / ASKED).exists():
        return [Proof("rule", subject, FIRES, "answered", _label(asking.scenario))]
    labels = ", ".join(_label(c.scenario) for c in cases.done)
    why = (
        f"no clean case ({labels}) showed a prompt it finds: does the agent ask for approval "
        "there, and does the regex match the text it prints (see agent-N.log in a kept case)?"
    )
    return [Proof("rule", subject, BLIND, why)]


def _crash_proofs(case: _Case, cases: _Cases) -> list[Proof]:
    """Each crash point column the chosen scenario's clean run passed, and the adapter can be
    killed at, is reached by a real crash: the first such point of each column, killed there."""
    adapter = case.adapter
    firsts: dict[str, CrashPoint] = {}
    for point in points_from_trace(case.run.trace, 1):
        killable = (
            bool(getattr(adapter, "tears_writes", False))
            if point.boundary == TORN_WRITE
            else point.boundary in adapter.boundaries
        )
        if killable:
            firsts.setdefault(point.boundary, point)
    label = _label(case.scenario)
    proofs: list[Proof] = []
    for boundary, point in firsts.items():
        subject = f"crash point {point.id} is reachable"
        run = run_case(
            cases.base / f"crash-{boundary}",
            case.scenario,
            cases.launcher,
            agent=case.agent,
            point=point,
            deadline=cases.deadline,
            max_lives=1,  # the crash is the proof: no restart needed
        )
        first = run.lives[0] if run.lives else None
        if first is not None and first.status == "crashed":
            proofs.append(Proof("crash_point", subject, FIRES, "life 1 was killed there", label))
        else:
            how = f"life 1 {first.status}{': ' + first.error if first.error else ''}" if first else "no life"
            proofs.append(Proof("crash_point", subject, BLIND, f"{how}; the crash never happened", label))
    return proofs


def tool_side_plan(
    adapter: AgentAdapter, trace: Sequence[Mapping[str, Any]], scenario: str = ""
) -> list[CrashPoint | Proof]:
    """For an agent whose tools are on crashmatrix's MCP server (``tools: mcp``), each tool-side
    column: the point its proof arms (the first call the clean run, ``trace``, sent to the
    server), or its proof already: n.a. where the column cannot act (``tool_side_unreachable``:
    a pipe loses no response), blind where no call of the clean run reached the server. Any
    other agent: none (the mock tools' tool side -- the reference agent's, a framework
    adapter's wrappers', an ``intercept:``ed function's, all built by ``tool_faults.
    mock_toolbox`` -- and the loopback services' is the harness's own code in every life, and
    whether a call reaches it is the intercept's own proof, "fired"; an MCP agent reaches
    crashmatrix's server only through its own configuration, which may name a server of its
    own). Pure."""
    spec = getattr(adapter, "spec", None)  # adapter_file.ForeignSpec
    if getattr(spec, "tools", None) != "mcp":
        return []
    cannot = tool_side_unreachable(
        adapter.name, "mcp", getattr(spec, "mcp_transport", "stdio"), getattr(spec, "services", ())
    )
    firsts: dict[str, CrashPoint] = {}
    for point in tool_side_points(trace, points_from_trace(trace, 1)):
        firsts.setdefault(point.boundary, point)
    unattributed = any(e.get("event") == MCP_CALL_EVENT for e in trace)
    never = (
        "no call of the clean case reached crashmatrix's MCP server"
        + (" as a tool call of the model's (its requests were attributed to none)" if unattributed else "")
        + ": does the agent start the server the adapter gives it ({mcp_command}, or {mcp_url}), "
        "not one of its own?"
    )
    plan: list[CrashPoint | Proof] = []
    for kind in TOOL_SIDE_COLUMNS:
        subject = f"tool-side column {kind} acts"
        if kind in cannot:
            plan.append(Proof("tool_side", subject, NOT_APPLICABLE, cannot[kind], scenario))
        elif kind in firsts:
            plan.append(firsts[kind])
        else:
            plan.append(Proof("tool_side", subject, BLIND, never, scenario))
    return plan


def _tool_side_proofs(case: _Case, cases: _Cases) -> list[Proof]:
    """Each tool-side column of an MCP agent acts on it: the fault, armed for the clean run's
    first call that reached the server, is taken and acts there (one life: the agent lives
    on, and what it does then is the matrix's to judge). A column that never acts would be
    "not reached" in every matrix of this agent; one that cannot act at all is n.a. with why."""
    label = _label(case.scenario)
    proofs: list[Proof] = []
    for point in tool_side_plan(case.adapter, case.run.trace, label):
        if isinstance(point, Proof):
            proofs.append(point)
            continue
        kind = point.boundary
        fault = ToolSideFault(kind, point.tool_call_id)
        run = run_case(
            cases.base / f"tool-side-{kind}",
            case.scenario,
            cases.launcher,
            agent=case.agent,
            deadline=cases.deadline,
            max_lives=1,  # the fault acting is the proof: no restart needed
            prepare=functools.partial(arm, fault=fault),
        )
        subject = f"tool-side column {point.id} acts"
        if any(f.kind == kind and f.call == fault.call_id for f in tool_faults_acted(run.trace)):
            proofs.append(Proof("tool_side", subject, FIRES, "the fault acted on the call", label))
        else:
            never = f"armed for {fault.call_id}, the fault never acted (the case ended {run.status})"
            proofs.append(Proof("tool_side", subject, BLIND, never, label))
    return proofs


_WRONG = "(a value no case has: planted by the doctor)"


def _expectation_proofs(case: _Case) -> list[Proof]:
    """Each expectation key of the chosen scenario's clean case is judged: the same case,
    judged against that key set to a value it cannot have, fails on that key. A key the
    verdict does not judge for this agent (another vocabulary, no ledger) is n.a. with why."""
    label = _label(case.scenario)
    verdict = judge(case.observation, case.scenario, None)
    skipped = dict(entry.split(": ", 1) for entry in verdict.not_applicable if ": " in entry)
    expected = case.scenario.expectation(None)
    log = case.observation.session or conversation_from_requests(
        case.observation.requests_for_session(), case.scenario.rules, dialect=case.observation.dialect
    )
    observed = project(log, case.observation.world.as_expected(), case.observation.dialect.results)
    proofs: list[Proof] = []
    for key, path in _leaves(expected):
        subject = f"expectation {key} is judged"
        if path[0] in skipped or key in skipped:
            why = skipped.get(path[0]) or skipped[key]
            proofs.append(Proof("expectation", subject, NOT_APPLICABLE, why, label))
            continue
        wrong = _set_leaf(expected, path, _WRONG)
        mismatches, _ = compare(wrong, observed)
        if any(m.field == key for m in mismatches):
            proofs.append(Proof("expectation", subject, FIRES, "a wrong value fails it", label))
        else:
            why = f"{key} set to a value no case has, and the verdict still finds no mismatch there"
            proofs.append(Proof("expectation", subject, BLIND, why, label))
    return proofs


def _leaves(expected: Mapping[str, Any]) -> list[tuple[str, tuple[str, ...]]]:
    """(the mismatch key ``compare`` names, the path in the expectation) of every judged leaf."""
    leaves: list[tuple[str, tuple[str, ...]]] = []
    for name in ("told", "outcome", "ledger", "code"):
        for call_id in expected.get(name) or {}:
            leaves.append((f"{name}[{call_id}]", (name, call_id)))
    for key, want in (expected.get("world") or {}).items():
        if key in ("files", "rows") and isinstance(want, Mapping):
            for inner in want:
                leaves.append((f"world.{key}[{inner}]", ("world", key, inner)))
        else:
            leaves.append((f"world.{key}", ("world", key)))
    return leaves


def _set_leaf(expected: Mapping[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    copy = json.loads(json.dumps(expected))
    node = copy
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return dict(copy)


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


def _try(plant: Plant, case: _Case, target: Path) -> tuple[PlantResult, bool]:
    """The plant's result in ``case``, and whether what stopped it was the scenario's lack."""
    label = _label(case.scenario)
    clone_case(case.run.case_dir, target)
    try:
        where = _PLANTERS[plant.name](case, target)
    except CannotPlant as cannot:  # the doctor's own, or a session's records'
        state: State = NOT_APPLICABLE if cannot.not_applicable else BLIND
        per_call = isinstance(cannot, _Cannot) and cannot.per_call
        bound = isinstance(cannot, _Cannot) and cannot.scenario_bound
        why = f"cannot plant: {cannot}"
        return PlantResult(plant.name, plant.check, state, why, per_call=per_call, scenario=label), bound
    planted = _observe(case.adapter, dataclasses.replace(case.run, case_dir=target))
    if planted.session is None and planted.session_problem:
        # The adapter could not read what was planted: the verdict fails such a case with
        # the reason, but this check saw nothing.
        why = f"the session could not be read: {planted.session_problem}"
        return PlantResult(plant.name, plant.check, BLIND, why, where, scenario=label), False
    facts = evidence(planted, case.scenario)
    judged = judge_plant(
        plant,
        baseline=check_all(evidence(case.observation, case.scenario)),
        planted=check_all(facts),
        inapplicable=checks_not_applicable(facts),
        where=where,
    )
    return dataclasses.replace(judged, scenario=label), False


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
    # A framework agent declared in an adapter YAML: its framework module knows its store.
    framework = getattr(case.adapter, "framework", None)
    if callable(getattr(framework, "session_records", None)):
        store: SessionRecords = framework.session_records(case_dir / "world" / "workspace")  # type: ignore[union-attr]
        return store
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
    raise _Cannot(f"the clean case's session has no {what}", state=NOT_APPLICABLE, scenario_bound=True)


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
        f"tool call {call.id!r} has no text argument spelled as it is in {session.name()} record {number}",
        scenario_bound=True,
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
        raise _Cannot(
            f"{_label(case.scenario)} calls no non-idempotent tool", state=NOT_APPLICABLE, scenario_bound=True
        )
    events = [e for e in observation.world.events if e.kind not in NON_SIDE_EFFECT_KINDS and e.tool in tools]
    if not events:
        unseen = [t for t in tools if not observation.world.sees(t)]
        if unseen:
            raise _Cannot(
                f"the effects of {', '.join(unseen)} are not observed (declare them under effects: "
                "in the adapter, or serve them as services:)",
                per_call=True,
                scenario_bound=True,  # another scenario's non-idempotent tool may be watched
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


def _duplicate_in_source(case: _Case, target: Path, detail: Any, *, new_keys: bool = False) -> str:
    """The effect ``detail`` names, once more in its source. ``new_keys``: a column the table
    keeps unique (an idempotency key) gets a changed value instead of refusing the copy (the
    effect-source proof counts units; the at-most-once plant needs the same key again)."""
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
                    # A column the table keeps unique (an idempotency key) would refuse the
                    # copy: it gets a changed value, the rest is the same effect again.
                    unique = _unique_columns(conn, table) if new_keys else set()
                    picked = ", ".join(
                        f"CASE typeof({n}) WHEN 'text' THEN {n} || '-again' "
                        f"WHEN 'integer' THEN {n} + 1000000007 ELSE {n} END"
                        if n in unique
                        else n
                        for n in keep
                    )
                    conn.execute(
                        f"INSERT INTO {table} ({names}) SELECT {picked} FROM {table} "
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
    if (isinstance(detail, dict) and detail.get("change") == "deleted") or not original.is_file():
        # A probe's deletion (harness.agents.effects): the file went once, and is gone.
        raise _Cannot(
            f"the effect is {relative} going (a deletion): there is no file to make a second effect of",
            scenario_bound=True,
        )
    for name in (
        f"{original.stem}-again{original.suffix}",
        f"again-{original.name}",
        f"{original.name}.again",
    ):
        copy = original.with_name(name)
        relative_copy = copy.relative_to(workspace).as_posix()
        if matches(relative_copy, effect.path) and not matches_any(relative_copy, effect.exclude):
            shutil.copy2(original, copy)
            return f"{relative} copied to {copy.name}"
    raise _Cannot(f"no second file name of {relative} matches {effect.path!r}")


def _unique_columns(conn: sqlite3.Connection, table: str) -> set[str]:
    columns: set[str] = set()
    for index in conn.execute(f"PRAGMA index_list({table})"):
        if index[2]:  # unique
            columns.update(str(r[2]) for r in conn.execute(f"PRAGMA index_info({index[1]})"))
    return columns


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
    from crashmatrix.harness.agents.team_life import FRAMEWORKS

    name, _, target = agent.partition(":")
    # ``langgraph:pkg.mod:build``: the team's module, not the framework's package.
    module = (target if name in FRAMEWORKS else BUILTIN.get(agent, agent)).partition(":")[0]
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
