"""Property-based exploration: Hypothesis writes the conversations the YAML suite did not.

The suite's scenarios are hand-picked. ``explore`` generates whole conversations instead:
one or two user turns, one or two assistant messages per turn, one or several tool calls per
message drawn from the contract catalogue (every mock tool, each ``run_command`` class,
keyed and unkeyed orders, generic YAML tools), approval answers (fresh and again), faults
that are not crashes, and a crash schedule: a point the clean run recorded, optionally a
second crash while the restarted agent recovers, optionally a power loss, or two lives
resuming the crash at once (``double@P``, where the agent's two lives can be told apart).
Each conversation whose calls reached a tool side also gets one tool-side case
(``tool_server_died[c1]``: the tool side fails that call, the agent lives on), picked from
the conversation rather than drawn, so the drawn schedules are those of a run without it.

A generated conversation is built as the same data a scenario file holds, rendered to YAML
and loaded with ``load_scenario``: it passes the very checks a hand-written file passes, so
a generated case is always a valid scenario and a found one can be written out verbatim.
Every case runs for real (forked lives, SIGKILL) and is judged by the invariants; the only
expectations are upper bounds on the world that hold for any correct agent (N sends may
leave at most N emails).

When a case fails, Hypothesis shrinks it, and ``write_found`` writes the shrunk case as
``found_<hash>.yaml``: ``cover:`` names the failing point, tags carry the rest of the
schedule (``second:<point id>``, ``power_loss``, ``double_resume``), and ``crashmatrix run
FILE --crash POINT`` fails the same way.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from crashmatrix.harness.agents.loading import load_adapter
from crashmatrix.harness.core.boundaries import TORN_WRITE, CrashPoint, parse_point
from crashmatrix.harness.core.double_resume import DOUBLE_COLUMN, DOUBLE_PREFIX
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS
from crashmatrix.harness.errors import CrashmatrixError, InputError
from crashmatrix.harness.front.cases import run_double, run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher, run_case
from crashmatrix.harness.plan.enumeration import adapter_double_unreachable, double_points, points_from_trace
from crashmatrix.harness.plan.schedule import repro_command
from crashmatrix.harness.verdict.verdict import Verdict

__all__ = [
    "FILES",
    "CallSpec",
    "Conversation",
    "ExploreResult",
    "Finding",
    "Schedule",
    "conversations",
    "explore",
    "found_document",
    "main_explore",
    "materialise",
    "parse_point",
    "render_yaml",
    "repro_line",
    "reproduce",
    "scenario_document",
    "schedule_of",
    "write_found",
]

FAILING = ("failed", "error", "hung")
PRELOAD = [
    "crashmatrix.harness.agents.reference",
    "crashmatrix.reference_agent.mutants",
    "crashmatrix.mock_tools.toolbox",
]

# The workspace every generated conversation starts from: an existing file to overwrite
# (or rewrite unchanged), a package to publish and sources for ``npm test``. Fixed on
# purpose: varying it buys no coverage and costs shrinking steps.
FILES: Mapping[str, str] = {
    "notes.txt": "old notes\n",
    "package.json": '{"name": "demo", "version": "1.0.0"}\n',
    "src/math.js": "export const add = (a, b) => a + b\n",
}
FAULT_KINDS = ("timeout_before", "response_lost", "permission_denied")
# Tools whose every call may leave one more row: world key -> tools that add to it. The
# bound "at most one per call" is the only outcome a generated case can state safely.
_WORLD_BOUNDS: Mapping[str, tuple[str, ...]] = {
    "emails": ("send_email",),
    "orders": ("create_order", "create_order_unkeyed"),
    "releases": ("run_command:npm publish",),
    "audit_lines": ("run_command:echo",),
}
_ROW_BOUNDS: Mapping[str, tuple[str, ...]] = {
    "refunds": ("refund_payment",),
    "emails": ("send_email_yaml",),
    "orders": ("create_order_yaml",),
}


# ---------------------------------------------------------------- generated data


@dataclass(frozen=True, slots=True)
class CallSpec:
    """One tool call the scripted model makes (its id is given by position)."""

    tool: str
    arguments: Mapping[str, Any]

    @property
    def bound_key(self) -> str:
        """``tool``, or ``run_command:<verb>`` for the commands that add to the world."""
        if self.tool != "run_command":
            return self.tool
        command = str(self.arguments.get("command", ""))
        if "npm publish" in command:  # alone or inside a compound command (``ls && npm publish``)
            return "run_command:npm publish"
        return "run_command:echo" if command.startswith("echo") else f"run_command:{command}"


@dataclass(frozen=True, slots=True)
class Conversation:
    """A whole scenario's worth of generated choices, before it becomes YAML."""

    # turn -> assistant messages -> tool calls; with ``repeat`` the second turn is the first
    # again, same tool_call_ids included (providers reuse ``call_0``).
    turns: tuple[tuple[tuple[CallSpec, ...], ...], ...]
    repeat: bool = False
    approvals: Mapping[str, str] = field(default_factory=dict)
    approvals_again: Mapping[str, str] = field(default_factory=dict)
    faults: tuple[tuple[int, str], ...] = ()  # (index of the call in script order, kind)
    # Done after the first crash, before the restart: someone edits the saved call's
    # arguments (index of the call), or another writer changes notes.txt.
    tamper: int | None = None
    external_write: bool = False


@dataclass(frozen=True, slots=True)
class Schedule:
    """Where the case dies: ``point`` (None: the clean run), then ``second`` while recovering."""

    point: CrashPoint | None
    second: CrashPoint | None = None
    power_loss: bool = False
    # Two lives resume the crash at ``point`` at once (``double@P``; no second crash, no power).
    double: bool = False

    @property
    def case_id(self) -> str:
        if self.point is None:
            return "clean"
        if self.double:
            return f"{DOUBLE_PREFIX}{self.point.id}"
        name = f"power@{self.point.id}" if self.power_loss else self.point.id
        return f"{name}+{self.second.id}" if self.second else name


_WORDS = ("hello", "ship it", "q3 plan", "ünïcode ✓")
_EMAILS = ("ada@example.com", "team@example.com")


def _call(tool: str, **arguments: Any) -> CallSpec:
    return CallSpec(tool, arguments)


def _calls() -> st.SearchStrategy[CallSpec]:
    """Every mock tool of the catalogue, the cheap and common ones first (they shrink there)."""
    text = st.sampled_from(_WORDS)
    email = st.builds(
        lambda to, s, b: _call("send_email", to=to, subject=s, body=b), st.sampled_from(_EMAILS), text, text
    )
    return st.one_of(
        st.sampled_from(
            [
                _call("read_file", path="notes.txt"),
                _call("read_file", path="missing.txt"),
                _call("list_files"),
                _call("list_sent_emails"),
                _call("get_store_status"),
            ]
        ),
        email,
        st.builds(
            lambda p, c: _call("write_file", path=p, content=c),
            st.sampled_from(["notes.txt", "fresh.txt"]),
            st.sampled_from(["old notes\n", "new notes\n"]),
        ),
        st.builds(
            lambda c: _call("run_command", command=c),
            # The compound ones are seed 004's trap for a prefix-regex classifier: each part's
            # effect is recorded, so a misclassified one shows up replayed.
            st.sampled_from(
                [
                    "ls",
                    "npm test",
                    "npm publish",
                    "rm -rf src",
                    "echo done >> audit.log",
                    "ls; rm -rf src",
                    "ls && npm publish",
                    "ls src | wc -l",
                ]
            ),
        ),
        st.builds(
            lambda t, q: _call(t, item="mug", quantity=q),
            st.sampled_from(["create_order", "create_order_unkeyed", "create_order_yaml"]),
            st.integers(1, 3),
        ),
        st.builds(
            lambda a: _call("refund_payment", payment_id="pay_1", amount_cents=a),
            st.sampled_from([500, 1200]),
        ),
        st.builds(
            lambda to, s: _call("send_email_yaml", to=to, subject=s, body="hi"),
            st.sampled_from(_EMAILS),
            text,
        ),
    )


@st.composite
def conversations(draw: st.DrawFn) -> Conversation:
    """One or two turns of one or two assistant messages of one to three tool calls."""
    message = st.lists(_calls(), min_size=1, max_size=3).map(tuple)
    turn = st.lists(message, min_size=1, max_size=2).map(tuple)
    first = draw(turn)
    shape = draw(st.sampled_from(["one", "repeat", "two"]))
    turns = (first,) if shape == "one" else (first, draw(turn)) if shape == "two" else (first,)
    tools = sorted({c.tool for t in turns for m in t for c in m})
    answer = st.sampled_from(["yes", "no"])
    approvals = draw(st.dictionaries(st.sampled_from(tools), answer, max_size=2))
    again = draw(st.dictionaries(st.sampled_from(tools), answer, max_size=2))
    n_calls = sum(len(m) for t in turns for m in t)
    faults = draw(
        st.lists(
            st.tuples(st.integers(0, n_calls - 1), st.sampled_from(FAULT_KINDS)),
            max_size=2,
            unique_by=lambda f: f[0],
        )
    )
    tamperable = [
        i for i, c in enumerate(c for t in turns for m in t for c in m) if set(c.arguments) & set(_TAMPER)
    ]
    # Not with a repeated turn: the harness's tamper edits every saved call with that id,
    # the finished first turn's too, which no agent could answer truthfully.
    tamper = draw(st.none() | st.sampled_from(tamperable)) if tamperable and shape != "repeat" else None
    external = draw(st.booleans())
    return Conversation(turns, shape == "repeat", approvals, again, tuple(faults), tamper, external)


# How a tampered argument changes: same type, so the arguments still fit the contract.
_TAMPER: Mapping[str, Callable[[Any], Any]] = {
    "quantity": lambda v: int(v) + 1,
    "amount_cents": lambda v: int(v) + 1,
    "content": lambda v: "tampered\n",
    "body": lambda v: "tampered",
}


def _tampered(arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _TAMPER[k](v) if k in _TAMPER else v for k, v in arguments.items()}


# ---------------------------------------------------------------- scenario documents


def _ids(conversation: Conversation) -> list[list[list[str]]]:
    counter = 0
    out: list[list[list[str]]] = []
    for turn in conversation.turns:
        ids_turn: list[list[str]] = []
        for message in turn:
            ids_message = []
            for _ in message:
                counter += 1
                ids_message.append(f"c{counter}")
            ids_turn.append(ids_message)
        out.append(ids_turn)
    return out


def scenario_document(conversation: Conversation, name: str = "explored") -> dict[str, Any]:
    """The scenario file's data (what ``yaml.safe_load`` of a hand-written file returns)."""
    ids = _ids(conversation)
    all_calls = [
        (call_id, call)
        for turn, turn_ids in zip(conversation.turns, ids, strict=True)
        for message, message_ids in zip(turn, turn_ids, strict=True)
        for call_id, call in zip(message_ids, message, strict=True)
    ]
    tools = list(dict.fromkeys(call.tool for _, call in all_calls))
    n_turns = 2 if conversation.repeat else len(conversation.turns)
    turns = [f"[t{i + 1}] please do the task" for i in range(n_turns)]
    rules: list[dict[str, Any]] = []
    for number, (turn, turn_ids) in enumerate(zip(conversation.turns, ids, strict=True), start=1):
        for index, (message, message_ids) in enumerate(zip(turn, turn_ids, strict=True)):
            if index == 0:
                # A repeated turn is answered by the same rule, so it makes the same ids again.
                when: dict[str, Any] = {"role": "user"}
                if not conversation.repeat:
                    when["contains"] = f"[t{number}]"
            else:
                when = {"call": turn_ids[index - 1][-1]}
            calls = [
                {"id": call_id, "name": call.tool, "arguments": dict(call.arguments)}
                for call_id, call in zip(message_ids, message, strict=True)
            ]
            rules.append({"when": when, "reply": {"tool_calls": calls}})
        rules.append({"when": {"call": turn_ids[-1][-1]}, "reply": {"content": f"Turn {number} is done."}})
    # Recovery may publish results in an order the script did not foresee; any answer ends it.
    rules.append({"when": {"role": "tool"}, "reply": {"content": "Done (see the tool results)."}})
    doc: dict[str, Any] = {
        "name": name,
        "description": "Generated by crashmatrix explore.",
        "tags": ["explored"],
        "tools": tools,
        "files": dict(FILES),
        "turns": turns,
        "model": rules,
    }
    if conversation.approvals:
        doc["approvals"] = {"*": "yes", **conversation.approvals}
    if conversation.approvals_again:
        doc["approvals_again"] = {"*": "yes", **conversation.approvals_again}
    if conversation.faults:
        doc["faults"] = [
            {"tool": all_calls[index][1].tool, "kind": kind, "call": all_calls[index][0]}
            for index, kind in conversation.faults
        ]
    between: list[dict[str, Any]] = []
    if conversation.tamper is not None:
        call_id, call = all_calls[conversation.tamper]
        between.append({"tamper_arguments": {"call": call_id, "arguments": _tampered(call.arguments)}})
    if conversation.external_write:
        between.append({"external_write": {"path": "notes.txt", "content": "edited elsewhere\n"}})
    if between:
        doc["between_lives"] = between
    made = [call for _, call in all_calls]
    times = 2 if conversation.repeat else 1
    expect: dict[str, Any] = {}
    bounds = _world_bounds(made, times)
    if bounds:
        expect["default"] = {"world": bounds}
    exact = _clean_counts(made, times, conversation)
    if exact:
        expect["clean"] = {"world": exact}
    if expect:
        doc["expect"] = expect
    return doc


# Tools whose clean run adds exactly one row per call when nothing refuses or breaks them:
# each call has its own idempotency key, so N calls are N business actions.
_EXACT: Mapping[str, tuple[str, str | None]] = {
    "send_email": ("emails", None),
    "create_order": ("orders", None),
    "create_order_unkeyed": ("orders", None),
    "refund_payment": ("rows", "refunds"),
    "send_email_yaml": ("rows", "emails"),
    "create_order_yaml": ("rows", "orders"),
}


def _clean_counts(calls: Sequence[CallSpec], times: int, conversation: Conversation) -> dict[str, Any]:
    """The world after the CLEAN run, where it is determinable: no faults, and nobody says no."""
    if conversation.faults or "no" in conversation.approvals.values():
        return {}
    counts: dict[str, Any] = {}
    for call in calls:
        if call.tool not in _EXACT:
            continue
        name, table = _EXACT[call.tool]
        if table is None:
            counts[name] = counts.get(name, 0) + times
        else:
            rows = counts.setdefault("rows", {})
            rows[table] = rows.get(table, 0) + times
    return counts


def _world_bounds(calls: Sequence[CallSpec], times: int) -> dict[str, Any]:
    """``{in: [0..N]}`` for every world count N calls can add to: safe for any correct agent."""
    keys = [call.bound_key for call in calls]
    world: dict[str, Any] = {}
    for name, adders in _WORLD_BOUNDS.items():
        n = times * sum(keys.count(adder) for adder in adders)
        if n:
            world[name] = {"in": list(range(n + 1))}
    rows = {}
    for table, adders in _ROW_BOUNDS.items():
        n = times * sum(keys.count(adder) for adder in adders)
        if n:
            rows[table] = {"in": list(range(n + 1))}
    if rows:
        world["rows"] = rows
    return world


def render_yaml(doc: Mapping[str, Any], header: str = "") -> str:
    body = yaml.safe_dump(dict(doc), sort_keys=False, allow_unicode=True, width=1000)
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return (
        "# yaml-language-server: $schema=../../harness/input/schemas/scenario.schema.json\n" + comment + body
    )


def materialise(doc: Mapping[str, Any], path: Path, header: str = "") -> Scenario:
    """Write the document and load it through ``load_scenario``: the path every file takes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_yaml(doc, header), encoding="utf-8")
    return load_scenario(path)


# ---------------------------------------------------------------- running one case


@dataclass(frozen=True)
class Finding:
    """A failing case after shrinking: what to write out and what to say about it."""

    doc: Mapping[str, Any]
    schedule: Schedule
    verdict: Verdict
    agent: str
    reference_passes: bool | None = None  # None: the agent IS the reference

    @property
    def reason(self) -> str:
        verdict = self.verdict
        if verdict.violations:
            return f"{verdict.violations[0].invariant}: {verdict.violations[0].message}"
        if verdict.mismatches:
            return verdict.mismatches[0].describe()
        return verdict.problems[0] if verdict.problems else verdict.status

    @property
    def digest(self) -> str:
        text = json.dumps([self.doc, self.schedule.case_id], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


@dataclass
class _Runner:
    agent: str
    launcher: LifeLauncher
    work_dir: Path
    deadline: float
    progress: Callable[[str], None]
    budget: int  # cases; past it, unseen examples are not run (shrinking stops improving)
    cases: int = 0
    _points: dict[str, tuple[Scenario, tuple[CrashPoint, ...], Verdict]] = field(default_factory=dict)
    _verdicts: dict[tuple[str, str], Verdict] = field(default_factory=dict)
    _seconds: dict[str, tuple[CrashPoint, ...]] = field(default_factory=dict)
    # Per conversation: the tool-side cases its clean run can take (each kind, each call).
    tool_sides: dict[str, tuple[CrashPoint, ...]] = field(default_factory=dict)

    def _dir(self, label: str) -> Path:
        self.cases += 1
        return self.work_dir / f"case-{self.cases:05d}-{re.sub(r'[^A-Za-z0-9_.@-]+', '_', label)[:60]}"

    def enumerate(self, doc: Mapping[str, Any], key: str) -> tuple[Scenario, tuple[CrashPoint, ...], Verdict]:
        """The clean run, once per distinct conversation (shrinking revisits many)."""
        if key not in self._points:
            case_dir = self._dir("clean")
            scenario = materialise(doc, case_dir / "scenario.yaml")
            adapter = load_adapter(self.agent)
            result = run_point(
                scenario,
                None,
                self.launcher,
                case_dir / "case",
                agent=self.agent,
                deadline=self.deadline,
            )
            from crashmatrix.harness.lives.tracer import read_trace

            points = tuple(
                p
                for p in points_from_trace(read_trace(case_dir / "case"), 1)
                if p.boundary in adapter.boundaries or p.boundary == TORN_WRITE
            )
            self._points[key] = (scenario, points, result.verdict)
            self.tool_sides[key] = _tool_side_cases(self.agent, read_trace(case_dir / "case"), points)
        return self._points[key]

    def doubles(self) -> bool:
        """Whether this agent gets ``double@P`` cases (``enumeration.double_unreachable``)."""
        return adapter_double_unreachable(self.agent, load_adapter(self.agent)) is None

    def second_points(
        self, scenario: Scenario, key: str, point: CrashPoint, power_loss: bool
    ) -> tuple[CrashPoint, ...]:
        """Boundaries the restarted agent passes while recovering from ``point``."""
        cache = f"{key}|{point.id}|{power_loss}"
        if cache not in self._seconds:
            run = run_case(
                self._dir(f"first-{point.id}"),
                scenario,
                self.launcher,
                agent=self.agent,
                point=point,
                deadline=self.deadline,
                power_loss=power_loss,
            )
            self._seconds[cache] = tuple(
                p for p in points_from_trace(run.trace, 2) if p.boundary != TORN_WRITE
            )
        return self._seconds[cache]

    def verdict(self, scenario: Scenario, key: str, schedule: Schedule, clean: Verdict) -> Verdict | None:
        """None when the budget is spent and this case was never run (treated as passing)."""
        cache = (key, schedule.case_id)
        if cache in self._verdicts:
            return self._verdicts[cache]
        if self.cases >= self.budget:
            return None
        self._verdicts[cache] = self.run(scenario, schedule, clean, self.agent)
        return self._verdicts[cache]

    def run(self, scenario: Scenario, schedule: Schedule, clean: Verdict | None, agent: str) -> Verdict:
        if schedule.point is None and clean is not None:
            return clean
        case_dir = self._dir(schedule.case_id)
        if schedule.point is not None and schedule.point.boundary in TOOL_SIDE_KINDS:
            from crashmatrix.harness.front.cases import run_tool_fault

            return run_tool_fault(
                scenario, schedule.point, self.launcher, case_dir, agent=agent, deadline=self.deadline
            ).verdict
        if schedule.double and schedule.point is not None:
            return run_double(
                scenario, schedule.point, self.launcher, case_dir, agent=agent, deadline=self.deadline
            ).verdict
        # With a second crash, run_point judges as cases.run_recovery does: the ledger
        # sequence of a double crash is not scripted.
        return run_point(
            scenario,
            schedule.point,
            self.launcher,
            case_dir,
            agent=agent,
            deadline=self.deadline,
            power_loss=schedule.power_loss,
            second=schedule.second,
        ).verdict


# ---------------------------------------------------------------- exploring


@dataclass(frozen=True)
class ExploreResult:
    agent: str
    examples: int  # examples Hypothesis ran (shrinking included)
    cases: int  # agent cases actually run (cache hits excluded)
    seconds: float
    finding: Finding | None


def explore(
    *,
    agent: str = "reference",
    examples: int = 25,
    seed: int = 0,
    work_dir: Path,
    launcher: LifeLauncher | None = None,
    deadline: float = 10.0,
    shrink: bool = True,
    per_example: int = 3,
    budget: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> ExploreResult:
    """Generate ``examples`` conversations with crash schedules and run each against ``agent``.

    Each conversation gets up to ``per_example`` crash schedules. Stops at the first failing
    case and shrinks it (``budget`` bounds how many agent cases
    shrinking may run; default 6 per example). Deterministic for a given ``seed``: no
    example database, derandomised generation."""
    say = progress or (lambda _: None)
    launcher = launcher or LifeLauncher("fork", preload=PRELOAD)
    runner = _Runner(
        agent, launcher, work_dir, deadline, say, budget if budget is not None else 6 * examples + 60
    )
    last: list[Finding] = []
    count = [0]

    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        derandomize=False,
        phases=[Phase.explicit, Phase.generate, *([Phase.shrink] if shrink else [])],
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        print_blob=False,
    )
    @given(conversations(), st.data())
    def case(conversation: Conversation, data: st.DataObject) -> None:
        count[0] += 1
        doc = scenario_document(conversation)
        key = json.dumps(doc, sort_keys=True, ensure_ascii=False)
        scenario, points, clean = runner.enumerate(doc, key)
        crashable = _crashable(doc, points)
        schedules = [Schedule(None)]
        if clean.status not in FAILING and crashable:
            # Several crash schedules per conversation: the clean run is paid once, and a
            # bug that needs one boundary of one tool is found in fewer conversations.
            # (Shrinking brings a failure down to one schedule.)
            schedules = [
                _draw_schedule(data, runner, scenario, key, crashable)
                for _ in range(data.draw(st.integers(1, per_example), label="schedules"))
            ]
        side = runner.tool_sides.get(key, ())
        if clean.status not in FAILING and side:
            # The tool side failing one call (a tool-side column's case): picked from the
            # conversation itself, not drawn, so the crash schedules Hypothesis draws stay what
            # they were; run after them.
            pick = int(hashlib.sha256(key.encode("utf-8")).hexdigest(), 16) % len(side)
            schedules.append(Schedule(side[pick]))
        tools = ", ".join(scenario.tools)
        for schedule in schedules:
            verdict = runner.verdict(scenario, key, schedule, clean)
            status = "skipped (budget)" if verdict is None else verdict.status
            say(
                f"example {count[0]}: {len(scenario.turns)} turn(s), tools {tools}; "
                f"{schedule.case_id}: {status}"
            )
            if verdict is not None and verdict.status in FAILING:
                last.append(Finding(doc, schedule, verdict, agent))
                raise AssertionError(schedule.case_id)

    started = time.monotonic()
    # Hypothesis re-raises the failure of the shrunk example, which it ran last: ``last[-1]``.
    with contextlib.suppress(AssertionError):
        hypothesis_seed(seed)(case)()
    finding = last[-1] if last else None
    if finding is not None and agent != "reference":
        # As in the kill matrix: a case the reference fails too is a harness problem, not a kill.
        scenario = runner.enumerate(finding.doc, _key(finding.doc))[0]
        reference = runner.run(scenario, finding.schedule, None, "reference")
        finding = Finding(
            finding.doc, finding.schedule, finding.verdict, agent, reference.status not in FAILING
        )
    return ExploreResult(agent, count[0], runner.cases, time.monotonic() - started, finding)


def _draw_schedule(
    data: st.DataObject, runner: _Runner, scenario: Scenario, key: str, crashable: Sequence[CrashPoint]
) -> Schedule:
    # Boundary first, then one of its points: torn writes and late boundaries are many, and
    # a uniform pick over points would rarely crash right after an approval.
    boundary = data.draw(st.sampled_from(sorted({p.boundary for p in crashable})), label="boundary")
    point = data.draw(st.sampled_from([p for p in crashable if p.boundary == boundary]), label="point")
    power = data.draw(st.booleans(), label="power loss") if point.boundary != TORN_WRITE else False
    # Two lives resuming the crash at once, where the agent's two lives can be told apart:
    # drawn only without a power loss, so the draws of every other schedule stay as they were.
    doubled = not power and point in double_points([point]) and runner.doubles()
    if doubled and data.draw(st.booleans(), label="double resume"):
        return Schedule(point, double=True)
    if data.draw(st.booleans(), label="second crash"):
        seconds = runner.second_points(scenario, key, point, power)
        if seconds:
            return Schedule(point, data.draw(st.sampled_from(seconds), label="second point"), power)
    return Schedule(point, None, power)


# A found file's tag naming its tool-side case (``tool_side:tool_server_died[c1]``).
TOOL_SIDE_TAG = "tool_side:"


def _tool_side_cases(
    agent: str, trace: Sequence[Mapping[str, Any]], points: Sequence[CrashPoint]
) -> tuple[CrashPoint, ...]:
    """The tool-side cases a clean run offers this agent: each kind for each call that
    reached its tool side, where the kind can act on it (``enumeration.tool_side_unreachable``)."""
    from crashmatrix.harness.plan.enumeration import adapter_tool_side_unreachable, tool_side_points

    spec = getattr(load_adapter(agent), "spec", None)
    cannot = adapter_tool_side_unreachable(agent, spec)
    return tuple(p for p in tool_side_points(trace, points) if p.boundary not in cannot)


def _crashable(doc: Mapping[str, Any], points: Sequence[CrashPoint]) -> list[CrashPoint]:
    """With a tampered call, only crashes before its Tool Result: editing a call whose result
    is already published makes that result wrong, which no agent could prevent (the suite's
    tamper scenarios cover the same points)."""
    tampered = [
        step["tamper_arguments"]["call"]
        for step in doc.get("between_lives", ())
        if "tamper_arguments" in step
    ]
    if not tampered:
        return list(points)
    return [
        p
        for p in points
        if p.tool_call_id in tampered
        and p.boundary != "after_tool_result"
        and not (p.boundary == TORN_WRITE and p.label == "tool_result")
    ]


def _key(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, sort_keys=True, ensure_ascii=False)


# ---------------------------------------------------------------- found cases as files


def found_document(finding: Finding) -> dict[str, Any]:
    """The finding as a scenario: ``cover`` names the failing point, tags the rest of the
    schedule; the only expectations are the world bounds every generated case carries
    (what the failure broke is an invariant, which every run checks anyway)."""
    doc = dict(finding.doc)
    doc["name"] = f"found_{finding.digest}"
    schedule = finding.schedule
    tags = ["explored", "found"]
    if schedule.point is not None and schedule.point.boundary in TOOL_SIDE_KINDS:
        tags.append(f"{TOOL_SIDE_TAG}{schedule.point.id}")  # cover takes crash points only
    elif schedule.point is not None:
        doc["cover"] = [schedule.point.id]
    if schedule.second is not None:
        tags.append(f"second:{schedule.second.id}")
    if schedule.power_loss:
        tags.append("power_loss")
    if schedule.double:
        tags.append(DOUBLE_COLUMN)
    doc["tags"] = tags
    doc["description"] = f"Found by crashmatrix explore against {finding.agent}: {finding.reason}"[:500]
    # Keep the key order of a hand-written file: name, description, tags first.
    order = [
        "name",
        "description",
        "tags",
        "tools",
        "files",
        "approvals",
        "approvals_again",
        "faults",
        "turns",
        "model",
        "cover",
        "expect",
    ]
    return {k: doc[k] for k in order if k in doc}


def repro_line(path: Path, finding: Finding) -> str:
    """The whole schedule, as ``crashmatrix run`` takes it: the point (``power@`` for a
    power loss), the second crash while recovering, and the agent."""
    schedule = finding.schedule
    if schedule.point is None:
        return repro_command(path, "clean", keep=None, agent=finding.agent)
    point = f"power@{schedule.point.id}" if schedule.power_loss else schedule.point.id
    point = schedule.case_id if schedule.double else point
    second = schedule.second.id if schedule.second is not None else None
    return repro_command(path, point, keep=None, agent=finding.agent, second=second)


def write_found(finding: Finding, out_dir: Path) -> Path:
    """Write ``found_<hash>.yaml`` and check that it loads; returns its path."""
    path = out_dir / f"found_{finding.digest}.yaml"
    schedule = finding.schedule
    header = [
        f"Found by crashmatrix explore (agent {finding.agent}), shrunk by Hypothesis.",
        f"case: {schedule.case_id}",
        f"why: {finding.reason}"[:300],
        f"rerun: {repro_line(path, finding)}",
    ]
    if schedule.double:
        header.append(f"The schedule: two lives resume the crash at once (tag {DOUBLE_COLUMN}).")
    if schedule.second is not None or schedule.power_loss:
        header.append(
            "The schedule also has "
            + " and ".join(
                ([f"a second crash at {schedule.second.id} while recovering"] if schedule.second else [])
                + (["a power loss at each crash"] if schedule.power_loss else [])
            )
            + " (tags second:/power_loss);"
            + " crashmatrix.harness.front.explore.reproduce(FILE, AGENT) replays all of it."
        )
    materialise(found_document(finding), path, "\n".join(header))
    return path


def schedule_of(scenario: Scenario) -> Schedule:
    """The crash schedule a found file records (``cover`` + ``second:``/``power_loss`` tags)."""
    point = parse_point(scenario.cover[0]) if scenario.cover else None
    named = [t.removeprefix(TOOL_SIDE_TAG) for t in scenario.tags if t.startswith(TOOL_SIDE_TAG)]
    point = parse_point(named[0]) if named else point  # a tool-side finding's case
    second = next((parse_point(t.partition(":")[2]) for t in scenario.tags if t.startswith("second:")), None)
    return Schedule(point, second, "power_loss" in scenario.tags, DOUBLE_COLUMN in scenario.tags)


def reproduce(
    path: Path,
    agent: str,
    work_dir: Path,
    *,
    launcher: LifeLauncher | None = None,
    deadline: float = 10.0,
) -> Verdict:
    """Run a found file's whole schedule against ``agent``, judged as explore judged it."""
    scenario = load_scenario(path)
    runner = _Runner(
        agent, launcher or LifeLauncher("fork", preload=PRELOAD), work_dir, deadline, lambda _: None, 1 << 30
    )
    return runner.run(scenario, schedule_of(scenario), None, agent)


# ---------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crashmatrix explore",
        description="Generate conversations and crash schedules with Hypothesis; shrink and save failures.",
    )
    parser.add_argument("--examples", type=int, default=25, help="conversations to generate (default 25)")
    parser.add_argument(
        "--seed", type=int, default=0, help="Hypothesis seed (default 0: the same run every time)"
    )
    parser.add_argument("--agent", default="reference", help="reference, a mutant name, or module:factory")
    parser.add_argument("--out", type=Path, help="write the shrunk failure here as found_<hash>.yaml")
    parser.add_argument("--keep", type=Path, help="keep case directories here")
    parser.add_argument("--case-deadline", type=float, default=10.0, help="seconds per life (default 10)")
    parser.add_argument("--no-shrink", action="store_true", help="report the first failure as found")
    return parser


def main_explore(argv: Sequence[str]) -> int:
    """``crashmatrix explore``: exit 1 when a failure was found, 0 when none, 2 on bad input."""
    parser = _parser()
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exit_:
        return 0 if exit_.code == 0 else 2
    try:
        if args.examples < 1:
            raise InputError(f"--examples {args.examples}: give at least 1")
        agent = _agent_spec(args.agent)
        load_adapter(agent)
        base = args.keep or Path(tempfile.mkdtemp(prefix="crashmatrix-explore-"))
        print(
            f"exploring {args.examples} conversations against {agent} (seed {args.seed}); cases under {base}",
            flush=True,
        )
        result = explore(
            agent=agent,
            examples=args.examples,
            seed=args.seed,
            work_dir=base,
            deadline=args.case_deadline,
            shrink=not args.no_shrink,
            progress=lambda line: print(f"  {line}", flush=True),
        )
    except CrashmatrixError as error:
        print(f"crashmatrix: {error}", file=sys.stderr)
        return 2
    summary = f"{result.examples} examples, {result.cases} cases, {result.seconds:.0f}s"
    finding = result.finding
    if finding is None:
        print(f"no failure found ({summary})")
        return 0
    print(f"FAILURE ({summary}): {finding.schedule.case_id}: {finding.reason}")
    if finding.reference_passes is False:
        print("  note: the reference agent fails this case too: suspect the harness, not the agent")
    if args.out:
        path = write_found(finding, args.out)
        print(f"wrote {path}")
        print(f"rerun: {repro_line(path, finding)}")
    else:
        print(render_yaml(found_document(finding)))
    return 1


def _agent_spec(name: str) -> str:
    """``reference``, ``module:factory``, or a bare mutant name of ``reference_agent.mutants``."""
    if name == "reference" or ":" in name:
        return name
    from crashmatrix.reference_agent.mutants import MUTANTS

    if name not in MUTANTS:
        raise InputError(
            f"--agent {name!r}: write reference, module:factory or a mutant ({', '.join(MUTANTS)})"
        )
    return f"crashmatrix.reference_agent.mutants:{name}"
