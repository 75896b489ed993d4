"""Crash cases through real processes: forked lives, SIGKILL, restart, judge.

Most are slow (each case forks two or three lives); they prove the injector and the judge
against the reference agent and against deliberately broken agents. The two at the end
need no process.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.trace import CaseRun
from crashmatrix.harness.errors import HarnessError
from crashmatrix.harness.front.cases import run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.casedir import prepare_case, session_path_of
from crashmatrix.harness.lives.injector import LifeLauncher, run_case
from crashmatrix.harness.lives.tracer import read_trace
from crashmatrix.harness.observation.reading import read_observation
from crashmatrix.harness.plan.enumeration import points_from_trace, recovery_window
from crashmatrix.harness.verdict.verdict import judge
from crashmatrix.mock_tools.fileops import sha256_text
from crashmatrix.mock_tools.world import World

from ...scenario_data import email_once

ROOT = Path(__file__).resolve().parents[3]
SEED_SCENARIO = ROOT / "scenarios" / "write_file" / "write_file_recovery.yaml"


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


@pytest.fixture
def email_scenario(tmp_path: Path) -> Scenario:
    path = tmp_path / "email_once.yaml"
    path.write_text(email_once(), encoding="utf-8")
    return load_scenario(path)


def _shape(session: Path) -> list[str]:
    shape = []
    for line in session.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["type"] == "message":
            shape.append(f"message/{record['message']['role']}")
        else:
            shape.append(f"ledger/{record['status']}")
    return shape


@pytest.mark.slow
def test_crash_after_running_reproduces_seed_000_twelve_record_recovery(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    scenario = load_scenario(SEED_SCENARIO)
    run = run_case(
        tmp_path / "case", scenario, launcher, point=CrashPoint("after_running", "call_recovery_demo")
    )
    assert [life.status for life in run.lives] == ["crashed", "exited"]
    session = session_path_of(run.case_dir)
    assert _shape(session) == [
        "message/user",
        "message/assistant",
        "ledger/approved",
        "ledger/running",
        "ledger/unknown",
        "ledger/approved",
        "ledger/running",
        "ledger/succeeded",
        "message/tool",
        "message/assistant",
        "message/tool",
        "message/assistant",
    ]
    records = [json.loads(line) for line in session.read_text(encoding="utf-8").splitlines()]
    old, new = records[2]["execution_id"], records[5]["execution_id"]
    assert old != new
    assert records[4]["execution_id"] == old and records[7]["execution_id"] == new
    assert {r["tool_call_id"] for r in records[2:8]} == {"call_recovery_demo"}
    assert len({r["idempotency_key"] for r in records[2:8]}) == 1
    assert json.loads(records[8]["message"]["content"])["execution_id"] == new
    assert judge(read_observation(run), scenario, CrashPoint("after_running", "call_recovery_demo")).passed


@pytest.mark.slow
def test_the_crash_is_a_real_sigkill_of_the_agent_process(launcher: LifeLauncher, tmp_path: Path) -> None:
    scenario = load_scenario(SEED_SCENARIO)
    run = run_case(
        tmp_path / "case", scenario, launcher, point=CrashPoint("after_side_effect", "call_recovery_demo")
    )
    first = run.lives[0]
    assert first.exitcode == -signal.SIGKILL
    starts = [e for e in run.trace if e["event"] == "start"]
    crash = [e for e in run.trace if e["event"] == "crash"]
    assert crash == [{"life": 1, "event": "crash", "point": "after_side_effect[call_recovery_demo]"}]
    # No code ran in life 1 after the kill: its last trace line is the crash itself.
    assert [e for e in run.trace if e["life"] == 1][-1]["event"] == "crash"
    assert len({e["pid"] for e in starts}) == 2
    for event in starts:
        with pytest.raises(ProcessLookupError):
            os.kill(event["pid"], 0)


@pytest.mark.slow
def test_torn_write_leaves_a_partial_line_that_recovery_sets_aside(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    scenario = load_scenario(SEED_SCENARIO)
    point = CrashPoint("torn_write", "call_recovery_demo", 1, "running")
    result = run_point(scenario, point, launcher, tmp_path / "case")
    assert result.passed, result.verdict
    torn = list(session_path_of(result.case_dir).parent.glob("*.torn-*"))
    assert len(torn) == 1
    fragment = torn[0].read_bytes()
    # The fragment is the first half of the `running` line the dead writer was appending.
    session = session_path_of(result.case_dir).read_bytes()
    running_line = next(line for line in session.splitlines(keepends=True) if b'"status":"running"' in line)
    assert not fragment.endswith(b"\n")
    assert running_line.startswith(fragment) and 0 < len(fragment) < len(running_line)


@pytest.mark.slow
def test_a_clean_case_is_judged_passed_with_every_invariant(
    launcher: LifeLauncher, email_scenario: Scenario, tmp_path: Path
) -> None:
    result = run_point(email_scenario, None, launcher, tmp_path / "case")
    assert result.passed
    assert result.verdict.observed is not None
    assert result.verdict.observed.world["emails"] == 1


# ---------------------------------------------------------------- teeth: broken agents are caught


def _violations(result: object) -> set[str]:
    verdict = result.verdict  # type: ignore[attr-defined]
    return {v.invariant for v in verdict.violations}


@pytest.mark.slow
def test_blind_retry_of_a_sent_email_is_caught_as_a_double_side_effect(
    launcher: LifeLauncher, email_scenario: Scenario, tmp_path: Path
) -> None:
    point = CrashPoint("after_side_effect", "call_1")
    good = run_point(email_scenario, point, launcher, tmp_path / "good")
    assert good.passed and good.verdict.observed is not None
    assert good.verdict.observed.world["emails"] == 1
    bad = run_point(
        email_scenario,
        point,
        launcher,
        tmp_path / "bad",
        agent="crashmatrix.reference_agent.mutants:blind_retry",
    )
    assert not bad.passed
    assert bad.verdict.observed is not None and bad.verdict.observed.world["emails"] == 2
    assert "non_idempotent_at_most_once" in _violations(bad)


@pytest.mark.slow
def test_running_written_after_the_side_effect_is_caught(
    launcher: LifeLauncher, email_scenario: Scenario, tmp_path: Path
) -> None:
    bad = run_point(
        email_scenario,
        None,
        launcher,
        tmp_path / "bad",
        agent="crashmatrix.reference_agent.mutants:running_after_side_effect",
    )
    assert "running_before_side_effect" in _violations(bad)


@pytest.mark.slow
def test_ledger_records_in_the_prompt_are_caught(
    launcher: LifeLauncher, email_scenario: Scenario, tmp_path: Path
) -> None:
    bad = run_point(
        email_scenario,
        None,
        launcher,
        tmp_path / "bad",
        agent="crashmatrix.reference_agent.mutants:ledger_in_prompt",
    )
    assert "no_ledger_in_prompt" in _violations(bad)


@pytest.mark.slow
def test_recovery_that_appends_a_user_message_is_caught(
    launcher: LifeLauncher, email_scenario: Scenario, tmp_path: Path
) -> None:
    point = CrashPoint("after_tool_result", "call_1")
    bad = run_point(
        email_scenario,
        point,
        launcher,
        tmp_path / "bad",
        agent="crashmatrix.reference_agent.mutants:recovery_appends_user",
    )
    assert "no_user_message_from_recovery" in _violations(bad)


@pytest.mark.slow
def test_an_agent_that_hangs_is_killed_at_its_deadline_and_reported_hung(
    launcher: LifeLauncher, email_scenario: Scenario, tmp_path: Path
) -> None:
    point = CrashPoint("torn_write", "call_1", 1, "running")
    bad = run_point(
        email_scenario,
        point,
        launcher,
        tmp_path / "bad",
        agent="crashmatrix.reference_agent.mutants:torn_tail_blocks_forever",
        deadline=3.0,
    )
    assert bad.verdict.status == "hung"
    starts = [json.loads(line) for line in (bad.case_dir / "trace.jsonl").read_text().splitlines()]
    for event in (e for e in starts if e["event"] == "start"):
        with pytest.raises(ProcessLookupError):
            os.kill(event["pid"], 0)


@pytest.mark.slow
def test_spawn_isolation_gives_the_same_verdict_as_forked_lives(
    launcher: LifeLauncher, email_scenario: Scenario, tmp_path: Path
) -> None:
    point = CrashPoint("after_side_effect", "call_1")
    forked = run_point(email_scenario, point, launcher, tmp_path / "fork")
    spawned = run_point(email_scenario, point, LifeLauncher("spawn"), tmp_path / "spawn")
    assert forked.passed and spawned.passed
    a, b = forked.verdict.observed, spawned.verdict.observed
    assert a is not None and b is not None
    assert (a.ledger, a.outcome, a.code) == (b.ledger, b.outcome, b.code)
    # Execution ids are random, so the session file itself (in the world's files) differs.
    assert {k: v for k, v in a.world.items() if k != "files"} == {
        k: v for k, v in b.world.items() if k != "files"
    }
    assert [
        life.status
        for life in run_case(tmp_path / "again", email_scenario, LifeLauncher("spawn"), point=point).lives
    ] == [
        "crashed",
        "exited",
    ]


@pytest.mark.slow
def test_ledger_expectations_are_not_applicable_to_an_agent_that_keeps_no_ledger(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    path = tmp_path / "wrong_ledger.yaml"
    path.write_text(email_once(expect={"default": {"ledger": {"call_1": ["succeeded"]}}}), encoding="utf-8")
    scenario = load_scenario(path)
    run = run_case(tmp_path / "case", scenario, launcher)
    with_ledger = judge(read_observation(run), scenario, None)
    assert [m.field for m in with_ledger.mismatches] == ["ledger[call_1]"]
    without = judge(read_observation(run, keeps_ledger=False), scenario, None)
    assert without.mismatches == () and without.passed
    assert without.notes == ("ledger: not applicable (the agent keeps no ledger)",)


def _observed(run: CaseRun, scenario: Scenario, point: CrashPoint) -> tuple[object, ...]:
    verdict = judge(read_observation(run), scenario, point, recovery=True, check_ledger=False)
    seen = verdict.observed
    assert seen is not None
    counts = {k: v for k, v in seen.world.items() if k != "files"}
    return (verdict.status, [life.status for life in run.lives], seen.ledger, seen.outcome, counts)


@pytest.mark.slow
def test_a_case_resumed_from_a_copied_first_crash_is_the_case_run_from_the_start(
    launcher: LifeLauncher, email_scenario: Scenario, tmp_path: Path
) -> None:
    # Crashed before running: recovery asks approval again and sends, passing every boundary.
    point = CrashPoint("after_approved", "call_1")
    crashed = run_case(tmp_path / "crashed", email_scenario, launcher, point=point, max_lives=1)
    assert [life.status for life in crashed.lives] == ["crashed"]
    seconds = recovery_window(run_case(tmp_path / "first", email_scenario, launcher, point=point).trace)
    assert len(seconds) >= 4
    for index, second in enumerate(seconds):
        fresh = run_case(tmp_path / f"fresh-{index}", email_scenario, launcher, point=point, second=second)
        resumed = run_case(
            tmp_path / f"resumed-{index}",
            email_scenario,
            launcher,
            point=point,
            second=second,
            resume=crashed,
        )
        assert resumed.lives[0] == crashed.lives[0] and len(resumed.lives) == 3
        assert _observed(resumed, email_scenario, point) == _observed(fresh, email_scenario, point)
    # The copy is a case of its own: the original crashed directory is left as it was.
    assert {e["life"] for e in read_trace(crashed.case_dir)} == {1}


@pytest.mark.slow
def test_resume_takes_only_a_case_stopped_after_a_crash_at_the_same_point(
    launcher: LifeLauncher, email_scenario: Scenario, tmp_path: Path
) -> None:
    point = CrashPoint("after_running", "call_1")
    crashed = run_case(tmp_path / "crashed", email_scenario, launcher, point=point, max_lives=1)
    finished = run_case(tmp_path / "finished", email_scenario, launcher, point=point)
    with pytest.raises(HarnessError, match="crashed at after_running"):
        run_case(
            tmp_path / "x",
            email_scenario,
            launcher,
            point=CrashPoint("after_approved", "call_1"),
            resume=crashed,
        )
    with pytest.raises(HarnessError, match="stopped after a first life"):
        run_case(tmp_path / "y", email_scenario, launcher, point=point, resume=finished)


@pytest.mark.slow
def test_the_recovery_window_ends_where_the_restarted_agent_asks_the_model_again(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    # Turn 1 orders, turn 2 emails: recovering the order is the window; the email is a later
    # conversation, with its own first-crash items.
    scenario = load_scenario(ROOT / "scenarios" / "multi_call" / "order_then_email_two_turns.yaml")
    run = run_case(tmp_path / "two_turns", scenario, launcher, point=CrashPoint("after_running", "call_kbd"))
    window = recovery_window(run.trace)
    assert {p.tool_call_id for p in points_from_trace(run.trace, 2)} == {"call_kbd", "call_erin"}
    assert {p.tool_call_id for p in window} == {"call_kbd"}
    assert window[-1] == CrashPoint("after_tool_result", "call_kbd")
    # Two calls in one message: the second one, run by recovery itself, is inside the window.
    scenario = load_scenario(ROOT / "scenarios" / "multi_call" / "two_calls_one_message.yaml")
    run = run_case(
        tmp_path / "one_message", scenario, launcher, point=CrashPoint("after_running", "call_minutes")
    )
    assert {p.tool_call_id for p in recovery_window(run.trace)} == {"call_minutes", "call_team"}


def test_a_recovering_life_that_never_asks_the_model_is_all_window() -> None:
    boundary = {"life": 2, "event": "boundary", "call": "c", "occurrence": 1}
    trace = [
        {"life": 1, "event": "model_request"},
        boundary | {"boundary": "after_approved"},
        boundary | {"boundary": "after_running"},
    ]
    assert [p.boundary for p in recovery_window(trace)] == ["after_approved", "after_running"]
    # Asked before any boundary (an agent that talks to the model first): all of it, too.
    asked_first = [{"life": 2, "event": "model_request"}, *trace[1:]]
    assert [p.boundary for p in recovery_window(asked_first)] == ["after_approved", "after_running"]
    cut = [*trace[:2], {"life": 2, "event": "model_request"}, trace[2]]
    assert [p.boundary for p in recovery_window(cut)] == ["after_approved"]


def test_prepared_cases_are_independent_copies_of_their_scenarios_world(
    email_scenario: Scenario, tmp_path: Path
) -> None:
    seeded = load_scenario(ROOT / "scenarios" / "write_file" / "overwrite_existing.yaml")  # seeds a file
    prepare_case(tmp_path / "a", seeded)
    prepare_case(tmp_path / "b", seeded)
    prepare_case(tmp_path / "c", email_scenario)
    a, b, c = (World(tmp_path / name / "world") for name in "abc")
    assert a.snapshot().files == b.snapshot().files != c.snapshot().files
    assert a.snapshot().files == {k: sha256_text(v) for k, v in seeded.files.items()}
    with a.transaction() as conn:
        conn.execute("DELETE FROM events")
    (a.workspace / "only_in_a.txt").write_text("a")
    assert not (b.workspace / "only_in_a.txt").exists()
    assert a.session_path == session_path_of(tmp_path / "a")  # each guards its own session
    assert b.session_path == session_path_of(tmp_path / "b")
