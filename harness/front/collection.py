"""The collection side of the pytest plugin: a scenario file becomes its crash matrix.

Shape of pytest's non-Python example: ``ScenarioFile.collect()`` -> one ``CrashCase`` per
(scenario, crash point), ``repr_failure`` for a domain message instead of a traceback,
``reportinfo`` for the header. Item names are point ids, stable and sorted, so ``pytest -n
auto`` (xdist) distributes the same collection on every worker.

Collecting a scenario runs its clean case once (in a forked life) to record the points.
Imported by ``harness.front.plugin`` only when a scenario file is collected: this is where
the heavy modules (the fork server, the agents, openai through them) come in.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
import traceback
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.agents.loading import adapter_for, capabilities_of, fork_preload, load_adapter
from crashmatrix.harness.agents.protocol import AgentAdapter
from crashmatrix.harness.agents.python_agent import SilentRule, silent_rules
from crashmatrix.harness.agents.reference import ReferenceAdapter
from crashmatrix.harness.core.boundaries import BOUNDARIES, TORN_WRITE, CrashPoint
from crashmatrix.harness.core.double_resume import DOUBLE_PREFIX
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.errors import CrashmatrixError, DiskFull, YamlError
from crashmatrix.harness.front.cases import (
    HARNESS_ERROR_LOG,
    Enumeration,
    enumerate_points,
    error_cause,
    guarded,
    harness_error,
    run_double,
    run_point,
    run_power,
    run_recovery,
    run_tool_fault,
)
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.casedir import templates_under
from crashmatrix.harness.lives.first_crash import FirstCrashes
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.lives.power import power_target
from crashmatrix.harness.plan.applicability import not_applicable
from crashmatrix.harness.plan.enumeration import (
    DOUBLE_COLUMN,
    NOTHING_REACHED,
    POWER_COLUMN,
    RECOVERY_FIRST,
    TOOL_SIDE_COLUMNS,
    adapter_double_unreachable,
    adapter_tool_side_unreachable,
    double_points,
    power_points,
    selected,
)
from crashmatrix.harness.verdict.result import CaseResult
from crashmatrix.harness.verdict.verdict import Verdict

__all__ = ["CrashCase", "ScenarioFile"]

_LAUNCHER_KEY = pytest.StashKey[LifeLauncher]()
# The scenarios whose plan this process already put on a record (each travels once).
_PLANS_SENT = pytest.StashKey[set[str]]()


@dataclasses.dataclass
class ScenarioPlan:
    """What a scenario's report needs besides its cases: the agent's reachable boundaries,
    the points that get no item and why, and every item collected (node id, matrix column,
    point id), so that a report can name the items pytest's own selection (``-k``, ``-m``,
    ``--deselect``, ``--shard``) left out as deselected rather than "not reached". Filled
    while the file's items are yielded, so complete before any of them runs."""

    reachable: tuple[str, ...]
    not_run: tuple[dict[str, Any], ...]
    items: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)


_FIRST_CRASHES_KEY = pytest.StashKey[FirstCrashes]()


def launcher_for(config: pytest.Config) -> LifeLauncher:
    if _LAUNCHER_KEY not in config.stash:
        factory = getattr(config, "_tmp_path_factory", None)
        if factory is not None:  # beside the case directories: never loose in $TMPDIR
            templates_under(factory.getbasetemp() / "crashmatrix-templates")
        agent = config.getoption("agent")
        config.stash[_LAUNCHER_KEY] = LifeLauncher(
            config.getoption("isolation"),
            preload=fork_preload(agent),
            warm=(agent,),
        )
    return config.stash[_LAUNCHER_KEY]


def first_crashes(config: pytest.Config) -> FirstCrashes | None:
    """Where the items of this session share first crashes: a directory every xdist worker
    sees (the controller's basetemp). Not with --keep-cases: each kept case is whole."""
    if config.getoption("keep_cases"):
        return None
    if _FIRST_CRASHES_KEY not in config.stash:
        factory = getattr(config, "_tmp_path_factory", None)
        if factory is None:
            return None
        base = factory.getbasetemp()
        if hasattr(config, "workerinput"):  # an xdist worker's basetemp is <session's>/popen-gwN
            base = base.parent
        config.stash[_FIRST_CRASHES_KEY] = FirstCrashes(
            base / "crashmatrix-first-crashes",
            record_syncs=power_column(config),
            snapshots=snapshots(config),
            # recovery@P's second crashes from P's recovering life (unless there are none)
            window_boundaries=() if config.getoption("no_recovery_crashes") else RECOVERY_FIRST,
        )
    return config.stash[_FIRST_CRASHES_KEY]


def snapshots(config: pytest.Config) -> bool:
    """Whether first crashes come from one clean life's snapshots: on by default (the
    verdicts are proven the same, and the runs are faster: docs/performance.md); the ini
    ``crashmatrix_snapshots = false`` or ``--no-snapshots`` turns them off."""
    if config.getoption("no_snapshots", False):
        return False
    try:
        return bool(config.getini("crashmatrix_snapshots"))
    except ValueError:  # the ini is not registered (a plugin older than the option)
        return True


_AHEAD_KEY = pytest.StashKey[bool]()


def clean_ahead(config: pytest.Config, files: Callable[[], Sequence[Path]]) -> None:
    """In xdist worker k > 0, a thread that runs the clean cases of the session's scenario
    files (``files``: in the order the collection reaches them) from the other end: every
    worker's collection reaches the files in the same order and the first to reach one runs
    its clean case while the others wait on its lock (``FirstCrashes.clean``), so without it
    one worker ran all of them while the others waited. The thread never waits for a lock
    (``FirstCrashes.clean_ahead``) and leaves any failure to the collection, which reports
    it. Once a session; nothing without xdist or a shared directory."""
    if _AHEAD_KEY in config.stash:
        return
    config.stash[_AHEAD_KEY] = True
    worker = getattr(config, "workerinput", None)
    shared = first_crashes(config)
    if worker is None or shared is None:
        return
    index, count = int(str(worker.get("workerid", "gw0"))[2:] or 0), int(worker.get("workercount", 1))
    if index == 0 or count < 2:
        return
    order = list(reversed(files()))
    # Worker k of n starts (k-1)/(n-1) of the way along: two threads never trail each other.
    start = (index - 1) * len(order) // (count - 1) if count > 2 else 0
    order = order[start:] + order[:start]
    agent_spec = config.getoption("agent")
    try:
        adapter = adapter_for(agent_spec)  # once, here: the thread never loads it
    except Exception:  # the collection loads it again and says what is wrong
        return
    if getattr(adapter, "framework", None) is not None:
        # A framework team's adapter is loaded again at each scenario's collection, and that
        # load builds the team's agent in this process, in a scratch working directory: a
        # thread running clean cases meanwhile read its relative paths (the scenario files,
        # the adapter file) from there ("holds no scenario", "cannot read file"), and two
        # such loads at once put the process back in the other's deleted directory.
        return
    launcher = launcher_for(config)
    deadline = config.getoption("case_deadline")
    capabilities = capabilities_of(adapter)

    def run() -> None:
        for path in order:
            try:
                scenario = load_scenario(path)
                if not_applicable(scenario, capabilities):
                    continue
                shared.clean_ahead(scenario, launcher, agent=agent_spec, deadline=deadline)
            except Exception:  # the collection runs it again and says what failed
                continue

    threading.Thread(target=run, name="crashmatrix-clean-ahead", daemon=True).start()


def power_column(config: pytest.Config) -> bool:
    """Whether the matrix has its power-loss column (``--no-power-loss`` turns it off)."""
    return not config.getoption("no_power_loss")


def tool_side_column(config: pytest.Config) -> bool:
    """Whether the matrix has its tool-side columns (``--no-tool-side-faults``, or the ini
    ``crashmatrix_tool_side_faults = false``, turns them off)."""
    if config.getoption("no_tool_side_faults", False):
        return False
    try:
        return bool(config.getini("crashmatrix_tool_side_faults"))
    except ValueError:  # the ini is not registered (a plugin older than the option)
        return True


def unreachable_tool_side(adapter: AgentAdapter) -> dict[str, str]:
    """Why each tool-side column cannot act on this agent (``enumeration.tool_side_unreachable``
    on its adapter's ``tools:``, ``mcp: transport``, ``services:`` and ``intercept:``); a
    column not named can."""
    return adapter_tool_side_unreachable(adapter.name, getattr(adapter, "spec", None))


def tool_side_plan(
    adapter: AgentAdapter,
    recorded: Sequence[CrashPoint],
    tool_side: Sequence[CrashPoint],
    only: Sequence[str],
    *,
    on: bool = True,
) -> tuple[list[CrashPoint], list[dict[str, Any]]]:
    """The tool-side items of a scenario and its gaps (``not_run``'s entries), as the power
    column has them: a column that cannot act on this agent is not reachable with why, for
    the calls of the clean run (no item: nothing was recorded to name one by); one turned off
    (``--no-tool-side-faults``) or left out by ``--crash-boundary`` is deselected, its ids
    listed. ``recorded``: the clean run's crash points (their calls, when no call reached the
    tool side); ``tool_side``: ``Enumeration.tool_side``."""
    unreachable = unreachable_tool_side(adapter)
    calls = list(dict.fromkeys(p.tool_call_id for p in (tool_side or recorded)))
    kept = [p for p in tool_side if not only or p.boundary in only or p.id in only]
    gaps: list[dict[str, Any]] = []
    for kind in TOOL_SIDE_COLUMNS:
        if kind in unreachable:
            gap = {"boundary": kind, "state": "not_reachable", "why": unreachable[kind], "points": calls}
            gaps.append(gap)
            continue
        ids = [p.id for p in tool_side if p.boundary == kind]
        chosen = [p.id for p in kept if p.boundary == kind]
        if not tool_side and calls:  # it could act, and nothing of this run reached it
            gaps.append({"boundary": kind, "state": "not_reachable", "why": NOTHING_REACHED, "points": calls})
        elif not on and ids:
            gaps.append(
                {"boundary": kind, "state": "deselected", "why": "--no-tool-side-faults", "points": ids}
            )
        elif len(chosen) < len(ids):
            left = [i for i in ids if i not in chosen]
            gap = {"boundary": kind, "state": "deselected", "why": f"--crash-boundary {' '.join(only)}"}
            gaps.append({**gap, "points": left})
    items = [p for p in kept if p.boundary not in unreachable] if on else []
    return items, gaps


def double_plan(
    adapter: AgentAdapter, points: Sequence[CrashPoint], *, on: bool = True
) -> tuple[list[CrashPoint], list[dict[str, Any]]]:
    """The ``double@P`` items of a scenario and its gaps (``not_run``'s entries): one per
    point of ``DOUBLE_BOUNDARIES`` the matrix has (its first passage), where the agent can be
    killed there; not reachable with why on an agent whose two concurrent lives cannot be
    told apart (``enumeration.double_unreachable``); deselected by ``--no-double-resume``."""
    chosen = [p for p in double_points(points) if reachable(adapter, p)]
    if not chosen:
        return [], []
    ids = [p.id for p in chosen]
    why = adapter_double_unreachable(adapter.name, adapter)
    if why is not None:
        return [], [{"boundary": DOUBLE_COLUMN, "state": "not_reachable", "why": why, "points": ids}]
    if not on:
        gap = {"boundary": DOUBLE_COLUMN, "state": "deselected", "why": "--no-double-resume", "points": ids}
        return [], [gap]
    return chosen, []


def work_dir(config: pytest.Config, *parts: str) -> Path:
    keep = config.getoption("keep_cases")
    if keep:
        base = Path(keep)
    else:
        factory = getattr(config, "_tmp_path_factory", None)
        base = (
            factory.getbasetemp() / "crashmatrix" if factory else Path(tempfile.gettempdir()) / "crashmatrix"
        )
    path = base.joinpath(*parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def reachable(adapter: AgentAdapter, point: CrashPoint) -> bool:
    """Can this agent be killed at ``point``? Torn writes need an agent that appends its
    session through our writer (the injector tears the line); boundaries need the hook."""
    if point.boundary == TORN_WRITE:
        return bool(getattr(adapter, "tears_writes", False))
    return point.boundary in adapter.boundaries


def reachable_boundaries(adapter: AgentAdapter) -> tuple[str, ...]:
    """Every column this agent can be killed at (the results file's ``reachable``)."""
    tears = (TORN_WRITE,) if getattr(adapter, "tears_writes", False) else ()
    return (*(b for b in BOUNDARIES if b in adapter.boundaries), *tears)


def unreachable_why(adapter: AgentAdapter, boundary: str, unfired: Collection[str] = ()) -> str:
    """Why this agent cannot be killed at ``boundary``, in the words of its adapter kind.
    ``unfired``: boundaries whose adapter rules never fired in this scenario's clean run (not
    claimed as reached)."""
    kind = getattr(getattr(adapter, "spec", None), "kind", None)  # ForeignAdapter's spec
    reached = ", ".join(b for b in adapter.boundaries if b not in unfired) or "no boundary"
    said = getattr(adapter, "unreachable", {})  # a framework adapter's own words, per boundary
    if isinstance(said, Mapping) and said.get(boundary):
        return str(said[boundary])
    if boundary == TORN_WRITE:
        given = getattr(adapter, "torn_write_unreachable", "")  # the adapter's own words
        if given:
            return str(given)
        if kind == "command":
            return "kind 3 black box: it writes its own session, so the harness cannot tear a write"
        return (
            f"adapter {adapter.name} does not append its session through ctx.before_append: "
            "the harness cannot tear its writes"
        )
    if kind == "command":
        return f"kind 3 black box: the harness crashes it only at its model and service edges ({reached})"
    if kind == "python" and boundary == "during_side_effect":
        return (
            "kind 2: during_side_effect is a step inside the harness's mock tools; this agent's tools "
            "are not intercepted (adapter.yaml intercept:), so their steps have no hook"
        )
    if kind == "python":
        return (
            f"kind 2: adapter.yaml maps no function to {boundary} (boundaries:) and it is no tool "
            f"edge; it reaches {reached}"
        )
    return f"adapter {adapter.name} does not list {boundary} in its boundaries ({reached})"


def not_run(
    adapter: AgentAdapter,
    scenario: Scenario,
    recorded: Sequence[CrashPoint],
    chosen: Sequence[CrashPoint],
    only: Sequence[str],
    *,
    recovery: str = "",
    power: str = "",
    power_state: str = "deselected",
    unpassed: Sequence[str] = (),
    silent: Sequence[SilentRule] = (),
) -> list[dict[str, Any]]:
    """The scenario's points that get no item, and why (``reports.results.NotRun``):

    * every boundary the agent cannot be killed at, for the calls the clean run made: a
      black box's clean run never even shows those boundaries, so without this entry no
      cell would say the harness could not crash it there;
    * points the clean run passed that ``--crash-boundary`` or ``cover`` removed;
    * ``recovery``: why no depth-2 case runs (``--no-recovery-crashes``, the scenario's
      ``recovery_crashes: false``), for the points that would have had one;
    * ``power``: why no ``power@P`` case runs, as ``power_state``: ``deselected`` by
      ``--no-power-loss``, ``not_reachable`` where a power loss cannot act on this agent
      (its fsyncs are not visible: ``harness.lives.power.power_target`` says why);
    * ``unpassed``: cover entries of boundaries this agent reaches only under some condition
      that its clean run of this scenario never met (a framework's ``after_approved`` where no
      call asks approval): not reachable here, with that reason;
    * ``silent``: the adapter rules (kind 2 ``boundaries:``, ``intercept:``) that never fired
      in the clean run: a boundary only they feed, which the run never passed though it made
      tool calls, is not reachable for this scenario, each rule named with its adapter.yaml
      position and the likely cause (never "not reached": the harness had no way to get there)."""
    calls = list(dict.fromkeys(p.tool_call_id for p in recorded))
    seen = {p.boundary for p in recorded}
    # A rule whose function ran but whose where: never held may wait for a condition this
    # scenario lacks (an approval asked): its cells stay "not reached", as the reference
    # agent's would. One whose function never ran through the wrapper cannot fire at all.
    silent = [rule for rule in silent if not rule.conditional]
    unfired = {rule.boundary for rule in silent if rule.boundary not in seen} if calls else set()
    gaps: list[dict[str, Any]] = []
    for boundary in (*BOUNDARIES, TORN_WRITE):
        unreachable = boundary not in reachable_boundaries(adapter)
        if unreachable and boundary not in seen:  # a recorded one is an item, marked so
            gaps.append(
                {
                    "boundary": boundary,
                    "state": "not_reachable",
                    "why": unreachable_why(adapter, boundary, unfired),
                    "points": calls,
                }
            )
        elif boundary in unfired:
            rules = "; ".join(rule.describe() for rule in silent if rule.boundary == boundary)
            gaps.append({"boundary": boundary, "state": "not_reachable", "why": rules, "points": calls})
    for entry in unpassed:
        boundary = entry.partition("[")[0]
        gaps.append(
            {
                "boundary": boundary,
                "state": "not_reachable",
                "why": (
                    f"the scenario covers {entry}, which {adapter.name} reaches only under some "
                    f"condition (e.g. a call that asks approval); its clean run of this scenario "
                    "never passed it"
                ),
                "points": calls,
            }
        )
    kept = set(chosen)
    dropped: dict[tuple[str, str], list[str]] = {}
    for point in recorded:
        if point in kept:
            continue
        why = (
            f"not in the scenario's cover ({', '.join(scenario.cover)})"
            if not scenario.covers(point)
            else f"--crash-boundary {' '.join(only)}"
        )
        dropped.setdefault((point.boundary, why), []).append(point.id)
    gaps += [
        {"boundary": boundary, "state": "deselected", "why": why, "points": ids}
        for (boundary, why), ids in dropped.items()
    ]
    if recovery:
        firsts = [
            p.id
            for p in chosen
            if p.boundary in RECOVERY_FIRST and p.occurrence == 1 and reachable(adapter, p)
        ]
        if firsts:
            gaps.append({"boundary": "recovery", "state": "deselected", "why": recovery, "points": firsts})
    if power:
        ids = [p.id for p in power_points(chosen) if reachable(adapter, p)]
        if ids:
            gaps.append({"boundary": POWER_COLUMN, "state": power_state, "why": power, "points": ids})
    return gaps


def tool_marker(tool: str) -> str:
    """``pytest -m tool_send_email`` selects every case of a scenario that uses send_email."""
    return "tool_" + tool.replace("-", "_")


class ScenarioError(Exception):
    """A scenario could not be collected; the message is already one line."""


class ScenarioFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        try:
            scenario = load_scenario(self.path)
        except YamlError as error:
            # One broken scenario must not hide the others: its error is reported (and fails
            # the run), the rest still runs. pytest reads this option after collection.
            self.config.option.continue_on_collection_errors = True
            raise ScenarioError(str(error)) from error
        config = self.config
        if config.getoption("recovery_torn_writes") and scenario.recovery_crashes:
            scenario = dataclasses.replace(scenario, recovery_torn_writes=True)  # for every scenario
        agent_spec = config.getoption("agent")
        try:
            adapter = load_adapter(agent_spec)
        except CrashmatrixError as error:
            raise ScenarioError(str(error)) from error
        for tool in scenario.tools:  # registered before use: the suite runs --strict-markers
            config.addinivalue_line("markers", f"{tool_marker(tool)}: cases of scenarios using {tool}")
        reasons = not_applicable(scenario, capabilities_of(adapter))
        if reasons:
            # Nothing runs: one item says why the scenario does not apply to this agent.
            yield CrashCase.from_parent(
                self, name="clean", scenario=scenario, point=None, kind="clean", not_applicable=reasons
            )
            return
        launcher = launcher_for(config)
        stem = self.path.stem
        where = work_dir(config, f"w{os.getpid()}", stem, "enumerate")
        try:
            # The session's one clean run of the scenario (every worker's collection and
            # the items read it), leaving each point's first crash where snapshots apply.
            enum = enumerate_points(
                scenario,
                launcher,
                where,
                agent=agent_spec,
                deadline=config.getoption("case_deadline"),
                shared=first_crashes(config),
            )
        except DiskFull as error:
            # No room for a traceback's file: the one line names the disk and what to do.
            self.config.option.continue_on_collection_errors = True
            raise ScenarioError(str(error)) from error
        except Exception as error:
            # The clean run's harness side failed: one line and the traceback's file, never
            # a traceback; the report shows the scenario as an error (``not_collected``).
            details = "".join(traceback.format_exception(error))
            failed = harness_error(scenario, "clean", "clean", where, agent_spec, error_cause(error), details)
            self.config.option.continue_on_collection_errors = True  # as for a broken file
            raise ScenarioError(failed.verdict.problems[0]) from error
        only = config.getoption("crash_boundary")
        points = selected(enum.points, scenario, only)
        reached = {p.boundary for p in enum.points} | {p.id for p in enum.points}
        # A covered boundary this agent cannot be killed at is no error in the scenario: its
        # cells say "not reachable" with why (not_run), as for any other agent's gap. Nor is
        # one it reaches only under conditions this scenario lacks (a framework agent's
        # after_approved, only where a call asks approval): the reference agent's clean run
        # is what tells a scenario's author that a cover entry is wrong.
        unreachable = {*BOUNDARIES, TORN_WRITE} - set(reachable_boundaries(adapter))
        unpassed = [
            (index, entry)
            for index, entry in enumerate(scenario.cover)
            if entry not in reached and entry.partition("[")[0] not in unreachable
        ]
        if unpassed and isinstance(adapter, ReferenceAdapter):
            index, entry = unpassed[0]
            self.config.option.continue_on_collection_errors = True  # as for a broken file
            raise ScenarioError(
                f"{scenario.where(('cover', index))}: cover: {entry!r} is never reached by the clean run "
                f"(it reached {', '.join(sorted({p.boundary for p in enum.points})) or 'no boundary'}); "
                "fix the scenario or the agent"
            )
        depth_two = scenario.recovery_crashes and not config.getoption("no_recovery_crashes")
        no_depth_two = (
            ""
            if depth_two
            else "--no-recovery-crashes"
            if scenario.recovery_crashes
            else "the scenario sets recovery_crashes: false"
        )
        # The power column: on unless --no-power-loss, and only where a power loss can act on
        # this agent (its fsyncs are visible to the harness); otherwise the plan says why.
        cannot_cut = power_target(agent_spec, enum.clean.case_dir)
        no_power, power_state = (
            ("--no-power-loss", "deselected")
            if not power_column(config)
            else (cannot_cut, "not_reachable")
            if isinstance(cannot_cut, str)
            else ("", "")
        )
        # The tool-side columns: each kind for each call that reached the tool side in the
        # clean run; off with --no-tool-side-faults; not reachable, with why, where they cannot act.
        tool_side, tool_gaps = tool_side_plan(
            adapter, enum.points, enum.tool_side, only or (), on=tool_side_column(config)
        )
        # double@P: two lives resume P's first crash at once (harness/lives/double_resume.py).
        no_double = config.getoption("no_double_resume", False)
        doubled, double_gaps = double_plan(adapter, points, on=not no_double)
        plan = ScenarioPlan(
            reachable_boundaries(adapter),
            (
                *not_run(
                    adapter,
                    scenario,
                    enum.points,
                    points,
                    only or (),
                    recovery=no_depth_two,
                    power=no_power,
                    power_state=power_state,
                    unpassed=[entry for _, entry in unpassed],
                    silent=silent_rules(enum.clean.trace),
                ),
                *tool_gaps,
                *double_gaps,
            ),
        )
        powered = set(power_points(points)) if not no_power else set()

        def planned(item: CrashCase) -> CrashCase:
            plan.items.append((item.nodeid, item.kind, item.name))
            return item

        yield planned(
            CrashCase.from_parent(
                self, name="clean", scenario=scenario, point=None, kind="clean", enumeration=enum, plan=plan
            )
        )

        def has_recovery_item(point: CrashPoint) -> bool:
            return depth_two and point.boundary in RECOVERY_FIRST and point.occurrence == 1

        shared = first_crashes(config)
        # With snapshots every point's first crash is already made: each item starts there.
        snapshotting = shared is not None and shared.snapshotting(agent_spec, launcher)

        def shares(point: CrashPoint) -> bool:
            # double@P starts from P's first crash too: P then judges the recovery it runs.
            others = has_recovery_item(point) or point in powered or point in doubled
            if snapshotting and not others and shared is not None:
                # Only P's own item starts from P's snapshot: it resumes from it in its own
                # directory, nothing published (``FirstCrashes.point_run``).
                shared.alone(scenario, point, agent=agent_spec)
            return snapshotting or others

        # Every recorded point is an item, reachable or not: a point this agent cannot be
        # killed at is reported "not reachable", never quietly left out or counted as passed.
        for point in points:
            yield planned(
                CrashCase.from_parent(
                    self,
                    name=point.id,
                    scenario=scenario,
                    point=point,
                    kind=point.boundary,
                    reachable=reachable(adapter, point),
                    shares_first_crash=shares(point),
                    plan=plan,
                )
            )
        # power@P: P's crash with the power going too (harness/lives/power.py), judged by P's
        # expectations; from P's first crash, recorded with its fsyncs.
        for point in points:
            if point in powered:
                yield planned(
                    CrashCase.from_parent(
                        self,
                        name=f"power@{point.id}",
                        scenario=scenario,
                        point=point,
                        kind=POWER_COLUMN,
                        reachable=reachable(adapter, point),
                        shares_first_crash=True,
                        plan=plan,
                    )
                )
        for point in doubled:
            yield planned(
                CrashCase.from_parent(
                    self,
                    name=f"{DOUBLE_PREFIX}{point.id}",
                    scenario=scenario,
                    point=point,
                    kind=DOUBLE_COLUMN,
                    shares_first_crash=True,
                    plan=plan,
                )
            )
        # The tool side fails one call of a clean case (harness/core/tool_side.py): judged by the
        # invariants; the agent is never killed, so nothing is shared with a crash.
        for point in tool_side:
            yield planned(
                CrashCase.from_parent(
                    self, name=point.id, scenario=scenario, point=point, kind=point.boundary, plan=plan
                )
            )
        if depth_two:
            for point in points:
                if has_recovery_item(point):
                    yield planned(
                        CrashCase.from_parent(
                            self,
                            name=f"recovery@{point.id}",
                            scenario=scenario,
                            point=point,
                            kind="recovery",
                            reachable=reachable(adapter, point),
                            shares_first_crash=True,
                            plan=plan,
                        )
                    )

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ScenarioError | CrashmatrixError):
            return str(excinfo.value)
        if isinstance(excinfo.value, Exception):
            # The harness failed collecting the scenario: one line naming the file that keeps
            # the traceback, never the traceback (the report shows the scenario as an error).
            log = work_dir(self.config, f"w{os.getpid()}", self.path.stem, HARNESS_ERROR_LOG)
            log.write_text("".join(traceback.format_exception(excinfo.value)), encoding="utf-8")
            return f"{error_cause(excinfo.value)} (details: {log})"
        return str(super().repr_failure(excinfo))


class CaseFailed(Exception):
    def __init__(self, result: CaseResult) -> None:
        self.result = result
        super().__init__(result.point_id)


class CrashCase(pytest.Item):
    is_crash_case = True  # read by the light plugin without importing this module

    def __init__(
        self,
        *,
        scenario: Scenario,
        point: CrashPoint | None,
        kind: str,
        reachable: bool = True,
        enumeration: Enumeration | None = None,
        not_applicable: tuple[str, ...] = (),
        shares_first_crash: bool = False,
        plan: ScenarioPlan | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        # The scenario's plan, shared by its items; the first record of the scenario each
        # process makes carries it (``reports.collector``): whichever items -k selected.
        self.plan = plan
        # The clean item's result: collection already ran and judged the clean case (to
        # enumerate the points), in this process; running it again would only cost a life.
        self.enumeration = enumeration
        # ``P`` and ``recovery@P`` run their common first crash once (harness/lives/first_crash.py).
        self.shares_first_crash = shares_first_crash
        self.point = point
        self.kind = kind
        self.reachable = reachable
        self.not_applicable = not_applicable
        self.result: CaseResult | None = None
        self.report_record: str | None = None  # the case's record for the report, as JSON
        self.add_marker("crashmatrix")
        self.add_marker(kind)
        for cls in scenario.idempotency_classes:
            self.add_marker(cls)
        for tool in scenario.tools:
            self.add_marker(tool_marker(tool))

    def runtest(self) -> None:
        config = self.config
        agent = config.getoption("agent")
        launcher = launcher_for(config)
        case_dir = work_dir(config, f"w{os.getpid()}", self.path.stem, self.name.replace("/", "_"))
        deadline = config.getoption("case_deadline")
        if not self.reachable:
            self._not_reachable(agent, case_dir)
        if self.not_applicable:
            self._skip_as(
                "not_applicable", agent, case_dir, "not applicable: " + "; ".join(self.not_applicable)
            )
        result: CaseResult
        if self.enumeration is not None and self.enumeration.agent == agent:
            result = self.enumeration.clean_case()
        else:
            runner: Any = (
                run_recovery
                if self.kind == "recovery"
                else run_power
                if self.kind == POWER_COLUMN
                else run_tool_fault
                if self.kind in TOOL_SIDE_COLUMNS
                else run_double
                if self.kind == DOUBLE_COLUMN
                else run_point
            )
            # A harness failure in any stage is this case's ``error`` (one line, the traceback
            # in its log file): counted and red in every report, never a traceback beside a
            # matrix that left the case out.
            result = guarded(
                lambda: runner(
                    self.scenario,
                    self.point,
                    launcher,
                    case_dir,
                    agent=agent,
                    deadline=deadline,
                    shared=first_crashes(config) if self.shares_first_crash else None,
                ),
                self.scenario,
                self.name,
                self.kind,
                case_dir,
                agent,
            )
        if not config.getoption("no_report"):
            from crashmatrix.reports.collector import case_record

            sent = config.stash.setdefault(_PLANS_SENT, set())
            plan = self.plan if self.plan is not None and str(self.path) not in sent else None
            if plan is not None:
                sent.add(str(self.path))
            try:
                self.report_record = case_record(
                    result,
                    self.nodeid,
                    reachable=plan.reachable if plan else None,
                    not_run=plan.not_run if plan else (),
                    items=plan.items if plan else (),
                )
            except Exception as error:  # the report is a by-product: it must not fail the case
                self.warn(pytest.PytestWarning(f"crashmatrix: no report record for {self.nodeid}: {error!r}"))
        # The record holds what a report needs; the item outlives the case by the whole
        # session, its observation (session, requests, world) need not.
        self.result = dataclasses.replace(result, observation=None)
        from crashmatrix.reports.collector import junit_properties

        self.user_properties.extend(junit_properties(result))  # JSON, never a Python repr
        if result.verdict.status in ("not_reached", "not_applicable"):
            # Not a verdict on the agent: the fault never happened (the point was not reached,
            # or a between-lives fault did nothing). Shown as such, never passed.
            why = "; ".join(result.verdict.problems) or result.verdict.status.replace("_", " ")
            prefix = "not applicable: " if result.verdict.status == "not_applicable" else ""
            pytest.skip(prefix + why)
        if not result.passed:
            raise CaseFailed(result)

    def error_record(self, text: str, when: str) -> str:
        """The record of this case when pytest failed it outside its verdict (in setup or
        teardown, or its record could not be made): an ``error``, its cause in one line,
        pytest's text in the case's log file."""
        from crashmatrix.reports.collector import case_record, cause_line

        agent = self.config.getoption("agent")
        case_dir = work_dir(self.config, f"w{os.getpid()}", self.path.stem, self.name.replace("/", "_"))
        cause = f"pytest failed the case in its {when}: {cause_line(text)}"
        return case_record(
            harness_error(self.scenario, self.name, self.kind, case_dir, agent, cause, text), self.nodeid
        )

    def _not_reachable(self, agent: str, case_dir: Path) -> None:
        assert self.point is not None
        why = f"not reachable: agent {agent} cannot be killed at {self.point.boundary}"
        self._skip_as("not_reachable", agent, case_dir, why)

    def _skip_as(self, status: str, agent: str, case_dir: Path, why: str) -> None:
        """Record the cell as not reachable or not applicable (the matrix shows it so, with
        the reason) and skip: neither a pass nor a failure."""
        verdict = Verdict(status, None, {}, problems=(why,))
        result = CaseResult(self.scenario, self.name, self.kind, verdict, 0.0, 0, case_dir, agent)
        if not self.config.getoption("no_report"):
            from crashmatrix.reports.collector import case_record

            self.report_record = case_record(result, self.nodeid)
        pytest.skip(why)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, CaseFailed):
            from crashmatrix.harness.verdict.explain import explain

            return explain(excinfo.value.result, self.config.getoption("agent"))
        if isinstance(excinfo.value, Exception):  # raised outside ``guarded``: still one line
            case_dir = work_dir(self.config, f"w{os.getpid()}", self.path.stem, self.name.replace("/", "_"))
            case_dir.mkdir(parents=True, exist_ok=True)
            log = case_dir / HARNESS_ERROR_LOG
            log.write_text("".join(traceback.format_exception(excinfo.value)), encoding="utf-8")
            return f"{error_cause(excinfo.value)} (details: {log})"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        # The domain is shown after the path; pytest reads dots in it as a Python dotted
        # name, so it must not repeat the file name ("email.yaml" would print email::yaml).
        return self.path, 0, self.name
