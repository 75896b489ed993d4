"""The foreign example agents: examples/desk_agent (kind 2, its own outbox and orders
database), examples/http_agent (kind 3, the order and mail services over plain HTTP) and
examples/state_agent (kind 2, a SQLite state database, its tools intercepted; also through
adapter-unreadable.yaml, judged on the model's request log).

Each correct agent passes every case of its scenario's matrix, one test item a case so that
xdist spreads them. Each example plants the same five bugs behind an environment variable,
and each bug fails a case with the check that names it. To keep this file cheap a bug runs
only at the crash point that catches it, picked from full runs of every variant
(``crashmatrix run <scenario> --agent <variant adapter>``).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from crashmatrix.harness.agents.foreign import load_foreign_adapter
from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.core.records import ExecutionRecord
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.front.cases import enumerate_points, run_point, run_recovery
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.first_crash import FirstCrashes
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.verdict.explain import explain
from crashmatrix.harness.verdict.invariants import LEDGER_INVARIANTS
from crashmatrix.harness.verdict.result import CaseResult

from ...launchers import warm_launcher
from ...planted import plant

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
_CALLS = ("call_mail", "call_order")
_STEPS = ("after_approved", "after_running", "after_side_effect", "before_tool_result", "after_tool_result")
# A kind-2 agent that maps all six boundaries, in the clean run's order (the loopback model's
# reply, named by its first call, then the agent saves both tool calls at once, then each call
# runs to its Tool Result).
KIND2_POINTS = (
    "after_model_reply[call_mail]",
    *(f"after_tool_call_saved[{call}]" for call in _CALLS),
    *(f"{step}[{call}]" for call in _CALLS for step in _STEPS),
)
# With a JSONL session the harness also tears the last line the agent wrote where it did
# nothing since (kind 2: at its fsync of the session; kind 3: at its next request), so the
# matrix lists torn_write points too (harness/agents/foreign.py); a SQLite session has none.
DESK_POINTS = (
    "after_model_reply[call_mail]",
    *(f"after_tool_call_saved[{call}]" for call in _CALLS),
    *(
        point
        for call in _CALLS
        for point in (
            f"torn_write[{call}:approved]",
            f"after_approved[{call}]",
            f"torn_write[{call}:running]",
            f"after_running[{call}]",
            f"after_side_effect[{call}]",
            f"torn_write[{call}:succeeded]",
            f"before_tool_result[{call}]",
            f"torn_write[{call}:tool_result]",
            f"after_tool_result[{call}]",
        )
    ),
)
# A black box is seen from the wire: the model's reply, then each service request; its
# line is torn when its next request arrives: each service request follows
# its running line, the last model request follows the order's Tool Result.
HTTP_POINTS = (
    "after_model_reply[call_mail]",
    *(
        point
        for call in _CALLS
        for point in (f"torn_write[{call}:running]", f"after_running[{call}]", f"after_side_effect[{call}]")
    ),
    "torn_write[call_order:tool_result]",
)
# The lost order response: the retry's running line is torn at its request too.
HTTP_LOST_POINTS = (*HTTP_POINTS[:-1], "torn_write[call_order:running#2]", HTTP_POINTS[-1])
# The first crashes a recovery@ case is made of (harness.plan.enumeration.RECOVERY_FIRST).
_RECOVERY_FIRST = ("after_approved", "after_running", "after_side_effect", "before_tool_result")
# Each scenario's YAML parsed and checked once, not for each of its ~25 cases.
_load_scenario = functools.cache(load_scenario)


@dataclass(frozen=True, slots=True)
class Example:
    """One example agent, under one of its adapter files, with one of its scenarios."""

    name: str  # in test ids
    directory: str
    bug_variable: str
    points: tuple[str, ...]  # its matrix's crash points, as the clean run enumerates them
    adapter: str = "adapter.yaml"
    scenario: str = "scenario.yaml"
    # recovery@ items whose restart passes no crash point while recovering (nothing to crash
    # a second time): reported as not reached, with the reason, never as passed.
    unreached: tuple[str, ...] = ()

    @property
    def here(self) -> Path:
        return EXAMPLES / self.directory

    @property
    def adapter_path(self) -> Path:
        return self.here / self.adapter

    @property
    def scenario_path(self) -> Path:
        return self.here / self.scenario

    def loaded(self) -> Scenario:
        """Its scenario, read once for the module (a frozen value), not once a case."""
        return _load_scenario(self.scenario_path)

    def items(self) -> list[str]:
        """The cases ``crashmatrix run`` runs for it: clean, each point, recovery@ each
        point after which recovery has work to do."""
        recovery = [f"recovery@{p}" for p in self.points if p.partition("[")[0] in _RECOVERY_FIRST]
        return ["clean", *self.points, *recovery]


DESK = Example("desk_agent", "desk_agent", "DESK_AGENT_BUG", DESK_POINTS)
# After a crash once its order is placed, the restarted http-agent finds it by key (a GET,
# which is no crash edge) and places nothing: its recovery has nothing to crash.
_HTTP_UNREACHED = ("recovery@after_side_effect[call_order]",)
HTTP = Example("http_agent", "http_agent", "HTTP_AGENT_BUG", HTTP_POINTS, unreached=_HTTP_UNREACHED)
# Both services act and then lose their answer: what makes an http-agent step uncertain
# while it runs.
HTTP_LOST = Example(
    "http_agent_lost_responses",
    "http_agent",
    "HTTP_AGENT_BUG",
    HTTP_LOST_POINTS,
    scenario="scenario-lost-response.yaml",
    unreached=_HTTP_UNREACHED,
)
STATE = Example("state_agent", "state_agent", "STATE_AGENT_BUG", KIND2_POINTS)
STATE_UNREADABLE = Example(
    "state_agent_unreadable",
    "state_agent",
    "STATE_AGENT_BUG",
    KIND2_POINTS,
    adapter="adapter-unreadable.yaml",
)
GREEN = (DESK, HTTP, HTTP_LOST, STATE)


@dataclass(frozen=True, slots=True)
class Catch:
    """Where a planted bug shows and the checks that must name it: invariant names, or the
    fields that mismatched (``world.orders``)."""

    example: Example
    point: str  # "clean" or a crash point id
    checks: frozenset[str]
    second: str | None = None  # a second crash while the agent recovers (depth 2)


_TWICE = frozenset({"world.emails", "non_idempotent_at_most_once"})
_TWO_ORDERS = frozenset({"world.orders", "non_idempotent_at_most_once"})
_EARLY = frozenset({"running_before_side_effect"})
_TWO_RESULTS = frozenset({"one_tool_result_per_call"})
CATCHES: dict[tuple[str, str], Catch] = {}
for _example in (DESK, STATE, HTTP):
    CATCHES |= {
        # A restarted order under a new key is a second order.
        (_example.name, "new_key_per_attempt"): Catch(_example, "after_side_effect[call_order]", _TWO_ORDERS),
        # The effect lands while the ledger says approved: the clean run shows it already.
        (_example.name, "running_after_effect"): Catch(_example, "clean", _EARLY),
        # An email left running is sent again on restart.
        (_example.name, "retry_non_idempotent"): Catch(_example, "after_side_effect[call_mail]", _TWICE),
    }
for _example in (DESK, STATE):
    CATCHES |= {
        # Recovery writes the email's unknown and dies before publishing it (a second crash);
        # the third life finds it unknown and sends it again.
        (_example.name, "blind_retry_after_unknown"): Catch(
            _example, "after_side_effect[call_mail]", _TWICE, second="before_tool_result[call_mail]"
        ),
        # The email's result was published before the crash; recovery publishes it again.
        (_example.name, "duplicate_tool_result"): Catch(
            _example, "after_tool_result[call_mail]", _TWO_RESULTS
        ),
    }
CATCHES |= {
    # A black box has no edge between writing an unknown and publishing it, so its unknown
    # comes from the wire: the mail service's answer is lost and the agent sends again.
    (HTTP.name, "blind_retry_after_unknown"): Catch(HTTP_LOST, "clean", _TWICE),
    # call_mail's result is out when the order's request arrives; the restart republishes it.
    (HTTP.name, "duplicate_tool_result"): Catch(HTTP, "after_running[call_order]", _TWO_RESULTS),
    # Judged on the model's last request: the republished result is in it.
    (STATE_UNREADABLE.name, "duplicate_tool_result"): Catch(
        STATE_UNREADABLE, "after_tool_result[call_mail]", _TWO_RESULTS
    ),
}


# -- running cases ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    # Their imports (openai, sqlite3) and adapters loaded once in the server, not in each life.
    yield warm_launcher(*(example.adapter_path for example in (*GREEN, STATE_UNREADABLE)))


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> FirstCrashes:
    """First crashes shared by P and recovery@P, whichever worker runs them, each from the
    clean life's snapshot where faithful (as the plugin does by default): under the
    session's base directory, which every xdist worker sees."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # a worker's basetemp is <session's>/popen-gwN
    return FirstCrashes(base / "foreign-examples-first-crashes", snapshots=True)


def _variant(example: Example, bug: str, where: Path) -> Path:
    """``example``'s adapter file with ``bug`` planted, written under ``where``."""
    return plant(example.here, example.adapter, example.bug_variable, bug, where)


def _case(
    example: Example,
    item: str,
    launcher: LifeLauncher,
    work: Path,
    *,
    agent: Path | None = None,
    second: str | None = None,
    shared: FirstCrashes | None = None,
) -> CaseResult:
    """One case of ``example``'s matrix: "clean", a point id, or "recovery@<point id>"."""
    scenario = example.loaded()
    adapter = str(agent or example.adapter_path)
    if item.startswith("recovery@"):
        point = parse_point(item.removeprefix("recovery@"))
        return run_recovery(scenario, point, launcher, work, agent=adapter, shared=shared)
    return run_point(
        scenario,
        None if item == "clean" else parse_point(item),
        launcher,
        work,
        agent=adapter,
        second=parse_point(second) if second else None,
        shared=shared if second is None and item != "clean" else None,
    )


def _checks(result: CaseResult) -> set[str]:
    """The names a failed case gives for failing: invariants, and mismatched fields."""
    verdict = result.verdict
    return {v.invariant for v in verdict.violations} | {m.field for m in verdict.mismatches}


# -- the correct agents ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("example", "item"),
    [(example, item) for example in GREEN for item in example.items()],
    ids=[f"{example.name}-{item}" for example in GREEN for item in example.items()],
)
def test_correct_agent_passes_every_case_of_its_matrix(
    example: Example, item: str, launcher: LifeLauncher, shared: FirstCrashes, tmp_path: Path
) -> None:
    if item == "clean":
        # The enumeration run is the clean case; its points are the matrix this test lists.
        enumeration = enumerate_points(
            example.loaded(),
            launcher,
            tmp_path / "enumerate",
            agent=str(example.adapter_path),
        )
        assert [p.id for p in enumeration.points] == list(example.points)
        result = enumeration.clean_case()
    else:
        result = _case(example, item, launcher, tmp_path / "case", shared=shared)
    if item in example.unreached:
        assert result.verdict.status == "not_reached", explain(result, str(example.adapter_path))
        assert "passed no crash point while it recovered" in result.verdict.problems[0]
        return
    assert result.passed, explain(result, str(example.adapter_path))
    assert result.verdict.not_applicable == ()  # everything was judged, nothing skipped


# -- the planted bugs --------------------------------------------------------------------------


@pytest.mark.parametrize(("example", "bug"), list(CATCHES), ids=[f"{e}-{b}" for e, b in CATCHES])
def test_planted_bug_fails_a_case_with_the_check_that_names_it(
    example: str, bug: str, launcher: LifeLauncher, tmp_path: Path
) -> None:
    catch = CATCHES[(example, bug)]
    agent = _variant(catch.example, bug, tmp_path / "adapters")
    result = _case(catch.example, catch.point, launcher, tmp_path / "case", agent=agent, second=catch.second)
    # Not caught: the case's own account (its lives, what each saw and did) says why.
    assert not result.passed, f"{bug} was not caught at {catch.point}\n{explain(result, str(agent))}"
    assert catch.checks <= _checks(result), explain(result, str(agent))


def test_every_example_plants_the_same_five_bugs() -> None:
    bugs = {
        "new_key_per_attempt",
        "blind_retry_after_unknown",
        "running_after_effect",
        "retry_non_idempotent",
        "duplicate_tool_result",
    }
    for example in (DESK, HTTP, STATE):
        assert {bug for name, bug in CATCHES if name == example.name} == bugs
        source = (example.here / "agent.py").read_text(encoding="utf-8")
        assert example.bug_variable in source and all(f'"{bug}"' in source for bug in bugs)
        # Foreign means foreign: nothing of the harness is imported.
        imported = {
            name
            for node in ast.walk(ast.parse(source))
            for name in (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
        }
        assert not [name for name in imported if name.split(".")[0] == "crashmatrix"]


# -- state-agent: intercept and an unreadable session ------------------------------------------


def _digests(directory: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()
    }


def test_intercept_leaves_the_state_agent_untouched_and_counts_its_effects(
    launcher: LifeLauncher, shared: FirstCrashes, tmp_path: Path
) -> None:
    before = _digests(STATE.here)
    # A crash after the order committed: both tools ran through the mock tools, one of them
    # in each life, and the restarted life placed the order again under the same key. Its
    # lives are the matrix item's (state_agent-after_side_effect[call_order]), run once for
    # both, judged here in a copy.
    result = _case(STATE, "after_side_effect[call_order]", launcher, tmp_path / "case", shared=shared)
    assert result.passed, explain(result, str(STATE.adapter_path))
    assert _digests(STATE.here) == before  # not a byte of the agent's files changed
    observation = result.observation
    assert observation is not None and observation.session is not None
    assert observation.world.counts["emails"] == 1 and observation.world.counts["orders"] == 1
    # Each effect is tied to the execution the agent's own ledger says was running.
    running = {
        e.execution_id: e.tool_call_id
        for e in observation.session.entries
        if isinstance(e, ExecutionRecord) and e.status == "running"
    }
    effects = [e for e in observation.world.events if e.kind in ("email", "order")]
    assert [(e.kind, e.tool_call_id) for e in effects] == [("email", "call_mail"), ("order", "call_order")]
    assert all(running.get(e.execution_id or "") == e.tool_call_id for e in effects)
    # The session was read from the agent's database, not from a JSONL file of its own.
    workspace = result.case_dir / "world" / "workspace"
    assert (workspace / ".state" / "state.db").is_file()
    assert not [p for p in workspace.rglob("*.jsonl") if ".agent_state" not in p.parts]


def test_unreadable_session_is_judged_on_the_model_requests(launcher: LifeLauncher, tmp_path: Path) -> None:
    enumeration = enumerate_points(
        STATE_UNREADABLE.loaded(),
        launcher,
        tmp_path / "enumerate",
        agent=str(STATE_UNREADABLE.adapter_path),
    )
    result = enumeration.clean_case()
    verdict = result.verdict
    assert result.passed, explain(result, str(STATE_UNREADABLE.adapter_path))
    # Same boundaries as the readable adapter: only the reading differs.
    assert [p.id for p in enumeration.points] == list(STATE_UNREADABLE.points)
    skipped = {line.partition(":")[0] for line in verdict.not_applicable}
    # The scenario states what the model is told (portable), no ledger: only the ledger
    # invariants are left unjudged, each with its reason.
    assert skipped == set(LEDGER_INVARIANTS), verdict.not_applicable
    assert any(line.startswith("session: not available") for line in verdict.notes)
    assert result.observation is not None and result.observation.session is None
    # What was judged instead: the conversation the model saw, both results in it.
    assert verdict.observed is not None
    assert verdict.observed.code == {"call_mail": None, "call_order": None}
    assert verdict.observed.world["emails"] == 1 and verdict.observed.world["orders"] == 1


def test_unreadable_session_still_catches_a_duplicate_result_the_correct_agent_does_not_give(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    """The planted-bug item above shows the duplicate is caught; here, that the correct agent
    at the same point gives no such violation."""
    result = _case(STATE_UNREADABLE, "after_tool_result[call_mail]", launcher, tmp_path / "case")
    assert "one_tool_result_per_call" not in _checks(result), explain(
        result, str(STATE_UNREADABLE.adapter_path)
    )


def test_unreadable_state_agent_recovers_from_a_crash(launcher: LifeLauncher, tmp_path: Path) -> None:
    result = _case(STATE_UNREADABLE, "after_tool_result[call_order]", launcher, tmp_path / "case")
    assert result.passed, explain(result, str(STATE_UNREADABLE.adapter_path))


def test_black_box_with_its_own_services_can_be_crashed_at_their_requests(tmp_path: Path) -> None:
    data = yaml.safe_load(HTTP.adapter_path.read_text(encoding="utf-8"))
    data["tools"] = "agent"
    data["command"] = [part.replace("{here}", str(HTTP.here)) for part in data["command"]]
    path = tmp_path / "adapter.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    boundaries = load_foreign_adapter(path).boundaries
    assert {"after_running", "after_side_effect"} <= set(boundaries)
