"""Double resume for a team's agent that writes its own session (issue 32): two forked lives
of ``double_mailer`` (kind 2: a conversation JSONL of its own, mail over HTTP to its life's
loopback service) resume one SIGKILLed session at once. Its lines cannot be told to a life;
its effects can (each life serves its own mail service), and so the case is judged: without a
lease both lives send the pending email and save its Tool Result (red by both counts, each
life holding its own email); with an ``flock`` on the session the second process stops, exits
0, and the case is green, its note saying the lines were judged as one session.

The same program run as a process of its own (kind 3) is red the same way: its first request
to its life's loopback server holds it. And two lives whose recovery makes no effect, of an
agent that writes before it asks anything (so the gate holds neither before its writes, and
the file need not show two Tool Results: each re-reads it before it writes), are red because
each asked its own model: both went on with the turn.

Slow: real lives. One fork server for the module, 4 cases of 3 lives each.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.double_resume import concurrent_lives
from crashmatrix.harness.front.cases import run_double
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.verdict.result import CaseResult

from ...launchers import warm_launcher

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
DATA = Path(__file__).resolve().parent / "data" / "double_mailer"
NO_LEASE = str(DATA / "adapter.yaml")
LEASE = str(DATA / "adapter_lease.yaml")
PROCESS = str(DATA / "adapter_process.yaml")  # the same program as a process of its own (kind 3)
# A kind-2 agent holding no lease whose recovery of a tampered call makes no effect: it closes
# the call uncertain, answers it and the turn, writing before its first request.
PLANNED = str(ROOT / "tests" / "golden" / "planned_first" / "adapter.yaml")
TAMPERED = ROOT / "scenarios" / "faults" / "create_order_arguments_tampered.yaml"


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield warm_launcher(NO_LEASE, LEASE, PROCESS, PLANNED)


def _case(launcher: LifeLauncher, tmp: Path, agent: str, boundary: str) -> CaseResult:
    scenario = load_scenario(ROOT / "tests" / "data" / "email_once.yaml")
    point = CrashPoint(boundary, "call_1")
    return run_double(scenario, point, launcher, tmp / Path(agent).stem, agent=agent, deadline=60.0)


def _emails(result: CaseResult) -> object:
    assert result.observation is not None
    return dict(result.observation.world.as_expected())["emails"]


@pytest.mark.parametrize(
    ("agent", "boundary"),
    [(NO_LEASE, "after_tool_call_saved"), (PROCESS, "after_running")],
    ids=["kind2", "kind3"],
)
def test_without_a_lease_both_processes_send_the_email_each_its_own(
    launcher: LifeLauncher, tmp_path: Path, agent: str, boundary: str
) -> None:
    # Kind 2 held at its first request in the life's process; kind 3 in its own process.
    result = _case(launcher, tmp_path, agent, boundary)
    assert result.verdict.status == "failed"
    broken = {v.invariant for v in result.verdict.violations}
    assert {"loser_stops_cleanly", "non_idempotent_at_most_once", "one_tool_result_per_call"} <= broken
    assert _emails(result) == 2
    assert result.observation is not None
    lives = concurrent_lives(result.observation.trace, result.observation.world.events)
    # Each life's email is its own (its pid), its lines no life's: judged as one session.
    assert [(life.effects, life.lines, life.gated) for life in lives] == [(1, None, True), (1, None, True)]
    notes = " ".join(result.verdict.notes)
    assert "released together: every concurrent life reached its first step" in notes
    assert "lines are not told to the life that wrote them" in notes


def test_with_a_lease_the_second_process_stops_and_exits_cleanly(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    result = _case(launcher, tmp_path, LEASE, "after_running")
    assert result.passed, result.verdict
    assert _emails(result) == 1
    assert result.observation is not None
    lives = concurrent_lives(result.observation.trace, result.observation.world.events)
    (winner,) = [life for life in lives if life.acted]
    (loser,) = [life for life in lives if not life.acted]
    assert winner.gated and loser.status == "exited" and loser.effects == 0 and loser.lines is None
    stderr = (result.case_dir / f"life-{loser.life}.stderr").read_text(encoding="utf-8")
    assert "another process is resuming this session" in stderr
    assert "lines are not told to the life that wrote them" in " ".join(result.verdict.notes)


def test_two_processes_that_make_no_effect_but_both_go_on_with_the_turn_are_red(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    point = CrashPoint("after_running", "call_chair")
    result = run_double(
        load_scenario(TAMPERED), point, launcher, tmp_path / "planned", agent=PLANNED, deadline=60.0
    )
    assert result.verdict.status == "failed"
    broken = {v.invariant for v in result.verdict.violations}
    assert "loser_stops_cleanly" in broken and "non_idempotent_at_most_once" not in broken
    assert result.observation is not None
    lives = concurrent_lives(result.observation.trace, result.observation.world.events)
    assert [life.effects for life in lives] == [0, 0] and all(life.requests >= 1 for life in lives)
