"""A death on a tool-side fault (issue 32): an agent that raises when its tool server dies
mid-call is restarted, as a supervisor restarts a crash-only agent, and judged on what the
restarted agent did. Red means a wrong recovery (here: a blind resend, a second email), not
one exit on a failed tool; an agent that raises before any fault acted is still an error.

The agents are the reference agent with a tool client that fails fast: what the tool side's
failure raised (httpx's ``RemoteProtocolError``, a reset connection) propagates out of the
life instead of being worded as ``SIDE_EFFECT_UNCERTAIN``. They are defined here and loaded by
the lives as ``tests...test_tool_fault_death:Factory``. The tests that run lives are slow
(one fork server for the module, two lives a case); the rules that need no process come first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.agents.protocol import LifeContext
from crashmatrix.harness.agents.reference import ReferenceAdapter
from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.trace import LifeRecord
from crashmatrix.harness.front.cases import run_tool_fault
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher, died_on_fault
from crashmatrix.harness.verdict.explain import explain
from crashmatrix.mock_tools import calls as tool_calls
from crashmatrix.reference_agent.agent import Agent
from crashmatrix.reference_agent.mutants import BlindRetry

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
AGENT = f"{__name__}:{{}}"

# -- the rule, on traces (no process) ----------------------------------------------------------


def _error(life: int) -> LifeRecord:
    return LifeRecord(life, None, "error", 1, 0.1, "")


def _fault(life: int) -> dict[str, Any]:
    return {"life": life, "event": "fault", "fault": "tool_server_died", "call": "call_mail", "acted": True}


def _raised(life: int, text: str = "RemoteProtocolError: Server disconnected") -> dict[str, Any]:
    return {"life": life, "event": "error", "error": text}


def test_an_error_after_the_fault_acted_in_that_life_is_a_death_on_the_fault_with_its_error_kept() -> None:
    trace = [{"life": 1, "event": "start"}, _fault(1), _raised(1)]
    record = died_on_fault(_error(1), trace)
    assert record.status == "died"
    assert record.error == (
        "on the tool-side fault tool_server_died[call_mail], restarted as a supervisor would: "
        "RemoteProtocolError: Server disconnected"
    )
    assert dataclasses.replace(record, status="error", error="") == _error(1)  # nothing else changed


def test_a_command_agents_exit_with_its_stderr_tail_is_said_in_one_line() -> None:
    tail = 'File "agent.py", line 9, in post\n    raise\nhttp.client.RemoteDisconnected: Remote end closed'
    text = f"crashmatrix.harness.errors.HarnessError: agent desk exited with 1: Traceback:\n{tail}"
    trace = [{"life": 1, "event": "start"}, _fault(1), _raised(1, text)]
    assert died_on_fault(_error(1), trace).error.endswith(
        "would: agent desk exited with 1: http.client.RemoteDisconnected: Remote end closed"
    )


def test_an_error_before_any_fault_acted_stays_an_error() -> None:
    trace = [{"life": 1, "event": "start"}, _raised(1, "RuntimeError: my own bug")]
    assert died_on_fault(_error(1), trace) == _error(1)
    # A fault that did not act (armed, never fired) is no fault either.
    idle = {**_fault(1), "acted": False}
    assert died_on_fault(_error(1), [{"life": 1, "event": "start"}, idle, _raised(1)]) == _error(1)


def test_an_error_in_a_later_life_than_the_fault_is_the_agents_own() -> None:
    # The fault fires once: life 2 met a healthy tool side, so its error is not the fault's.
    trace = [{"life": 1, "event": "start"}, _fault(1), _raised(1), {"life": 2, "event": "start"}, _raised(2)]
    assert died_on_fault(_error(2), trace) == _error(2)
    assert died_on_fault(_error(1), trace).status == "died"


def test_only_a_life_that_ended_in_error_is_read_again() -> None:
    trace = [{"life": 1, "event": "start"}, _fault(1)]
    for status in ("exited", "crashed", "hung", "died"):
        record = dataclasses.replace(_error(1), status=status)
        assert died_on_fault(record, trace) == record
    # A life that never started (the harness's own error) is left as it is.
    assert died_on_fault(_error(1), [_fault(1)]) == _error(1)


# -- the agents -------------------------------------------------------------------------------


def _fail_fast(call: tool_calls.Call, error: Exception, *, side_effecting: bool) -> Any:
    raise error  # no readable answer: the client gives up on the whole process


class _FailFastToolbox:
    """The agent's toolbox with ``answer_lost`` (where the mock tools word a request sent
    without a readable answer) swapped for one that raises, while a call runs."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def execute(self, name: str, arguments: Mapping[str, Any], ctx: Any) -> Any:
        original = tool_calls.answer_lost
        tool_calls.answer_lost = _fail_fast
        try:
            return self._inner.execute(name, arguments, ctx)
        finally:
            tool_calls.answer_lost = original

    def __getattr__(self, attribute: str) -> Any:  # plan, check_precondition, ...
        return getattr(self._inner, attribute)


class _RaisingToolbox(_FailFastToolbox):
    """Raises before any request goes out: the agent's own bug, nothing the tool side did."""

    def execute(self, name: str, arguments: Mapping[str, Any], ctx: Any) -> Any:
        raise RuntimeError(f"{name}: the agent's own bug, before the request went out")


class DiesOnFault(ReferenceAdapter):
    """Dies on a tool server gone mid-call, then recovers as the reference agent does: the
    order is looked up by its key, the email told uncertain."""

    name = "dies-on-fault"
    toolbox: type[_FailFastToolbox] = _FailFastToolbox

    def build(self, ctx: LifeContext) -> Agent:
        agent = super().build(ctx)
        agent.toolbox = self.toolbox(agent.toolbox)
        return agent


class DiesOnFaultThenResends(DiesOnFault):
    """Dies the same way, and on restart retries the interrupted call blindly (a new
    execution, whatever its contract says): the email goes out twice."""

    name = "dies-on-fault-then-resends"
    agent_class = BlindRetry


class RaisesBeforeTheToolSide(DiesOnFault):
    name = "raises-before-the-tool-side"
    toolbox = _RaisingToolbox


# -- the lives --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher(
        "fork",
        preload=[
            "crashmatrix.harness.agents.reference",
            "crashmatrix.reference_agent.mutants",
            "crashmatrix.mock_tools.toolbox",
        ],
    )


def _case(launcher: LifeLauncher, scenario: str, call: str, factory: str, where: Path) -> Any:
    return run_tool_fault(
        load_scenario(SCENARIOS / scenario),
        CrashPoint("tool_server_died", call),
        launcher,
        where / factory,
        agent=AGENT.format(factory),
    )


@pytest.mark.slow
def test_an_agent_that_dies_on_the_fault_and_reconciles_on_restart_passes_with_the_death_in_a_note(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    result = _case(launcher, "create_order/keyed_once.yaml", "call_order", "DiesOnFault", tmp_path)
    assert result.passed, explain(result)
    assert result.observation is not None
    lives = result.observation.lives
    assert [life.status for life in lives] == ["died", "exited"]
    death = lives[0].error
    assert death == (
        "on the tool-side fault tool_server_died[call_order], restarted as a supervisor would: "
        "httpx.RemoteProtocolError: Server disconnected without sending a response."
    )
    assert f"life 1 died: {death}" in result.verdict.notes  # reports show notes of passed cases
    # One order, found by its key after the restart: the lookup reached the tool side.
    observed = result.verdict.observed
    assert observed is not None and observed.world["orders"] == 1
    ended = [e for e in result.observation.trace if e.get("event") == "ended"]
    assert [(e["life"], e["status"], e["error"]) for e in ended] == [(1, "died", death)]


@pytest.mark.slow
def test_crashmatrix_run_says_a_case_passed_after_dying_on_the_fault(
    launcher: LifeLauncher, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from crashmatrix.harness.front.cli import main

    scenario = str(SCENARIOS / "create_order" / "keyed_once.yaml")
    agent = AGENT.format("DiesOnFault")
    code = main(["run", scenario, "--crash", "tool_server_died[call_order]", "--agent", agent])
    out = capsys.readouterr().out
    assert code == 0, out
    assert (
        "keyed_once.yaml::tool_server_died[call_order] passed after dying on the fault: life 1 died: "
        "on the tool-side fault tool_server_died[call_order], restarted as a supervisor would: "
        "httpx.RemoteProtocolError: " in out
    ), out


@pytest.mark.slow
def test_an_agent_that_dies_on_the_fault_and_resends_blindly_on_restart_fails_on_the_second_email(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    result = _case(launcher, "send_email/send_once.yaml", "call_mail", "DiesOnFaultThenResends", tmp_path)
    assert result.verdict.status == "failed", explain(result)  # judged, not an error
    assert "non_idempotent_at_most_once" in {v.invariant for v in result.verdict.violations}
    observed = result.verdict.observed
    assert observed is not None and observed.world["emails"] == 2
    text = explain(result)
    assert "  problem: life 1 died: on the tool-side fault tool_server_died[call_mail]" in text


@pytest.mark.slow
def test_an_agent_that_raises_before_any_fault_acted_is_still_an_error(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    result = _case(launcher, "send_email/send_once.yaml", "call_mail", "RaisesBeforeTheToolSide", tmp_path)
    assert result.verdict.status == "error"
    assert result.lives == 1  # not restarted
    assert result.verdict.problems == (
        "life 1 error: RuntimeError: send_email: the agent's own bug, before the request went out",
    )
