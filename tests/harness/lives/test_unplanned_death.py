"""Unplanned deaths: a life that dies where nothing planned a crash (a tool that kills its own
agent) is restarted like any crash, named in the verdict and the failure text, and a life
that dies so every time still ends, as an error that says why. Each life keeps its stderr.

The agents are the reference agent with a tool that kills its own process, defined here and
loaded by the lives as ``tests...test_unplanned_death:Factory``. The tests that run lives are
slow; the rules that need no process come last."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.agents.protocol import LifeContext
from crashmatrix.harness.agents.reference import ReferenceAdapter
from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.trace import LifeRecord, case_status
from crashmatrix.harness.front.cases import run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher, life_record, run_case
from crashmatrix.harness.lives.life import LifeSpec
from crashmatrix.harness.verdict.explain import explain
from crashmatrix.reference_agent.agent import Agent

from ...scenario_data import email_once

WRITE_FILE = Path(__file__).resolve().parents[3] / "scenarios" / "write_file" / "write_file_recovery.yaml"

MARKER = "tool-killed-its-agent"  # in the case directory: the tool already killed once


class _DyingToolbox:
    """The agent's toolbox, except that running a tool first kills the agent's process the
    way ``die`` says: on every life, or only until the marker says it already did."""

    def __init__(self, inner: Any, case_dir: Path, die: str, every_life: bool) -> None:
        self._inner = inner
        self._marker = case_dir / MARKER
        self._die = die
        self._every_life = every_life

    def execute(self, name: str, arguments: Mapping[str, Any], ctx: Any) -> Any:
        if self._every_life or not self._marker.exists():
            self._marker.touch()
            print(f"tool {name}: killing my own agent ({self._die})", file=sys.stderr, flush=True)
            if self._die == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(3)
        return self._inner.execute(name, arguments, ctx)

    def __getattr__(self, attribute: str) -> Any:  # plan, check_precondition, ...
        return getattr(self._inner, attribute)


class _Dying(ReferenceAdapter):
    name = "dying"
    die = "sigkill"
    every_life = False

    def build(self, ctx: LifeContext) -> Agent:
        agent = super().build(ctx)
        agent.toolbox = _DyingToolbox(agent.toolbox, ctx.case_dir, self.die, self.every_life)
        return agent


class KilledOnce(_Dying):
    """SIGKILLs itself in its first tool call of the case, then never again."""


class ExitsOnce(_Dying):
    """``os._exit(3)`` in its first tool call of the case, then never again."""

    die = "exit"


class ExitsEveryLife(_Dying):
    """``os._exit(3)`` in the first tool call of every life: it never gets anywhere (given
    a tool that recovery runs again, as write_file after ``running``)."""

    die = "exit"
    every_life = True


AGENT = f"{__name__}:{{}}"


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher(
        "fork", preload=["crashmatrix.harness.agents.reference", "crashmatrix.mock_tools.toolbox"]
    )


@pytest.fixture
def email_scenario(tmp_path: Path) -> Scenario:
    path = tmp_path / "email_once.yaml"
    path.write_text(email_once(), encoding="utf-8")
    return load_scenario(path)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("factory", "how"), [("KilledOnce", "SIGKILL"), ("ExitsOnce", "exit status 3")], ids=["sigkill", "exit"]
)
def test_a_tool_that_kills_its_agent_once_is_restarted_and_the_recovered_case_passes_naming_the_death(
    launcher: LifeLauncher, email_scenario: Scenario, tmp_path: Path, factory: str, how: str
) -> None:
    result = run_point(email_scenario, None, launcher, tmp_path / "case", agent=AGENT.format(factory))
    assert result.observation is not None
    lives = result.observation.lives
    assert [life.status for life in lives] == ["died", "exited"]
    death = f"unplanned death ({how}) after after_running[call_1]"
    assert lives[0].error == death
    assert lives[0].exitcode == (-signal.SIGKILL if how == "SIGKILL" else 3)
    # Judged normally: the restarted agent found call_1 running with no result and told the
    # model so; nothing was sent (the tool died before acting), and no invariant broke.
    assert result.passed, explain(result)
    assert result.verdict.observed is not None and result.verdict.observed.world["emails"] == 0
    assert result.verdict.problems == (f"life 1 died: {death}",)
    assert f"life 1 died: {death}" in result.verdict.notes  # shown for a passed case too
    ended = [e for e in result.observation.trace if e.get("event") == "ended"]
    assert ended == [
        {
            "life": 1,
            "event": "ended",
            "status": "died",
            "exitcode": lives[0].exitcode,
            "after": "after_running[call_1]",
            **({"signal": "SIGKILL"} if how == "SIGKILL" else {}),
            "error": death,
        }
    ]
    stderr = (result.case_dir / "life-1.stderr").read_text()
    assert stderr == f"tool send_email: killing my own agent ({'sigkill' if how == 'SIGKILL' else 'exit'})\n"
    assert lives[0].stderr == stderr
    assert (result.case_dir / "life-2.stderr").read_text() == ""


@pytest.mark.slow
def test_an_agent_that_dies_unplanned_every_life_ends_after_max_lives_as_an_error_that_says_why(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    # Recovery runs write_file again after "running" (its precondition holds), so every
    # life reaches the tool and dies in it.
    scenario = load_scenario(WRITE_FILE)
    agent = AGENT.format("ExitsEveryLife")
    run = run_case(tmp_path / "bounded", scenario, launcher, agent=agent, max_lives=3)
    assert [life.status for life in run.lives] == ["died", "died", "died"]
    assert run.status == "died"
    died = "unplanned death (exit status 3) after after_running[call_recovery_demo]"
    assert [life.error for life in run.lives] == [died, died, f"{died}; not restarted: all 3 lives used"]

    result = run_point(scenario, None, launcher, tmp_path / "case", agent=agent)
    assert result.lives == 4  # run_case's default bound
    assert result.verdict.status == "error"
    assert result.verdict.problems[-1] == f"life 4 died: {died}; not restarted: all 4 lives used"
    text = explain(result)
    assert f"  problem: life 1 died: {died}\n" in text
    assert "  life 4 ended: exit status 3; last lines of its stderr (life-4.stderr):" in text
    assert "    | tool write_file: killing my own agent (exit)" in text


@pytest.mark.slow
def test_a_planned_crash_then_an_unplanned_death_while_recovering_is_restarted_again(
    launcher: LifeLauncher, email_scenario: Scenario, tmp_path: Path
) -> None:
    # Life 1 is killed by the harness before the tool runs; life 2, recovering, runs the
    # tool again (send_email is retried when it never started), which kills it: life 3 ends it.
    point = CrashPoint("after_approved", "call_1")
    run = run_case(tmp_path / "case", email_scenario, launcher, agent=AGENT.format("KilledOnce"), point=point)
    assert [(life.status, life.crash) for life in run.lives] == [
        ("crashed", point.id),
        ("died", None),
        ("exited", None),
    ]
    assert run.lives[1].error.startswith("unplanned death (SIGKILL) after ")
    assert run.status == "ok"


@pytest.mark.slow
def test_a_failed_case_shows_each_abnormal_life_with_its_exit_status_and_stderr(
    launcher: LifeLauncher, email_scenario: Scenario, tmp_path: Path
) -> None:
    # The clean expectation says the email was sent once; the agent that killed itself
    # before sending recovered to "unknown" and sent nothing: a failure, explained.
    path = tmp_path / "expects_one_email.yaml"
    path.write_text(email_once(expect={"clean": {"world": {"emails": 1}}}), encoding="utf-8")
    result = run_point(
        load_scenario(path), None, launcher, tmp_path / "case", agent=AGENT.format("KilledOnce")
    )
    assert result.verdict.status == "failed"
    text = explain(result)
    assert "  problem: life 1 died: unplanned death (SIGKILL) after after_running[call_1]" in text
    assert "  life 1 ended: killed by SIGKILL; last lines of its stderr (life-1.stderr):" in text
    assert "    | tool send_email: killing my own agent (sigkill)" in text
    assert "life 2 ended" not in text  # it exited normally: nothing to explain


# ---------------------------------------------------------------- rules, no process


def _life(status: str, error: str = "") -> LifeRecord:
    return LifeRecord(1, None, status, 0, 0.1, error)


def test_a_case_whose_unplanned_death_was_followed_by_a_normal_life_is_ok_and_one_that_ran_out_died() -> None:
    assert case_status([_life("died"), _life("exited")]) == "ok"
    assert case_status([_life("crashed"), _life("died"), _life("exited")]) == "ok"
    assert case_status([_life("crashed"), _life("died")]) == "died"
    assert case_status([_life("died"), _life("error")]) == "error"


def test_a_life_that_exits_zero_without_returning_from_the_agent_died_unplanned(tmp_path: Path) -> None:
    # os._exit(0) inside a tool: a clean exit status, but the life never wrote "exit".
    spec = LifeSpec(str(tmp_path), load_scenario(WRITE_FILE), "reference", 2)
    boundary = {
        "life": 2,
        "event": "boundary",
        "boundary": "after_approved",
        "call": "call_9",
        "occurrence": 2,
    }
    trace = [
        {"life": 1, "event": "start"},
        {"life": 1, "event": "exit"},
        {"life": 2, "event": "start"},
        boundary,
    ]
    record = life_record(spec, 0, False, 0.1, 30.0, trace)
    assert (record.status, record.error) == (
        "died",
        "unplanned death (exit status 0) after after_approved[call_9#2]",
    )
    exited = life_record(spec, 0, False, 0.1, 30.0, [*trace, {"life": 2, "event": "exit"}])
    assert (exited.status, exited.error) == ("exited", "")
    never_started = life_record(spec, 1, False, 0.1, 30.0, trace[:2])
    assert (never_started.status, never_started.error) == (
        "error",
        "the life ended (exit status 1) before it started",
    )
