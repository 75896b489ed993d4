"""The shipped example agents, run through ``harness.front.cases.run_point`` with a real crash:
kind 2 (an unmodified Python agent loaded in the life) and kind 3 (a black box on loopback).

Each test checks the verdict, that the agent's own ledger was normalised onto ours, that the
model was reached over loopback (the request log), and that no agent process outlives its case.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.agents.foreign import load_foreign_adapter
from crashmatrix.harness.agents.loading import load_adapter
from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.records import ExecutionRecord
from crashmatrix.harness.front.cases import run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.lives.tracer import read_trace
from crashmatrix.harness.verdict.result import CaseResult

from ...launchers import warm_launcher
from ...waiting import wait_until

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CASE_DEADLINE = 30.0  # per life


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield warm_launcher(EXAMPLES / "python_agent" / "adapter.yaml")  # openai once, not in each life


def _run(example: str, point: CrashPoint, launcher: LifeLauncher, tmp_path: Path) -> CaseResult:
    agent = str(EXAMPLES / example / "adapter.yaml")
    scenario = load_scenario(EXAMPLES / example / "scenario.yaml")
    return run_point(scenario, point, launcher, tmp_path / "case", agent=agent, deadline=CASE_DEADLINE)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _assert_nothing_outlives(result: CaseResult, *, agent_processes: int) -> None:
    """No life and none of the ``agent_processes`` agent processes the lives started (one
    per life for a black box, none for an agent that runs inside its life) is left."""
    case_dir = result.case_dir
    pids = [event["pid"] for event in read_trace(case_dir) if event.get("event") == "start"]
    assert len(pids) == result.lives, pids
    agents = case_dir / "agent-pids.txt"
    if agent_processes:
        started = agents.read_text().splitlines()  # missing: the agents' pids were never recorded
        assert len(started) == agent_processes, started
        pids += [int(line.split()[1]) for line in started]
    else:
        assert not agents.exists(), agents.read_text()
    # The kernel delivers PR_SET_PDEATHSIG asynchronously; a process that outlives its case
    # is still there after the case deadline.
    gone = wait_until(lambda: not any(_alive(pid) for pid in pids), within=CASE_DEADLINE)
    assert gone, f"a life or agent process outlived its case: {[pid for pid in pids if _alive(pid)]}"


def _statuses(case_dir: Path, example: str, call_id: str) -> list[str]:
    log = load_foreign_adapter(EXAMPLES / example / "adapter.yaml").read_session(case_dir)
    return [e.status for e in log.entries if isinstance(e, ExecutionRecord) and e.tool_call_id == call_id]


@pytest.mark.slow
def test_unmodified_python_agent_recovers_from_a_crash_after_running(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    result = _run("python_agent", CrashPoint("after_running", "call_write"), launcher, tmp_path)
    assert result.verdict.passed, [m.describe() for m in result.verdict.mismatches] + list(
        result.verdict.problems
    )
    assert result.lives == 2
    trace = read_trace(result.case_dir)
    assert any(e.get("event") == "crash" and e["point"] == "after_running[call_write]" for e in trace)
    assert _statuses(result.case_dir, "python_agent", "call_write") == [
        "approved", "running", "unknown", "approved", "running", "succeeded",
    ]  # fmt: skip
    requests = (result.case_dir / "model_requests.jsonl").read_text().splitlines()
    assert len(requests) >= 2  # the openai client's own httpx2 reached the loopback model
    _assert_nothing_outlives(result, agent_processes=0)  # the agent runs inside its life


@pytest.mark.slow
def test_black_box_agent_with_a_seed_004_ledger_keeps_one_order(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    result = _run("blackbox_agent", CrashPoint("after_side_effect", "call_order"), launcher, tmp_path)
    verdict = result.verdict
    assert verdict.passed, [m.describe() for m in verdict.mismatches] + [str(v) for v in verdict.violations]
    assert verdict.observed is not None and verdict.observed.world["orders"] == 1
    # started / uncertain / planned in its file; ours after normalisation.
    raw = (result.case_dir / "world/workspace/.order-desk/session.jsonl").read_text()
    assert '"status":"started"' in raw and '"status":"uncertain"' in raw
    assert _statuses(result.case_dir, "blackbox_agent", "call_order") == [
        "planned", "approved", "running", "unknown", "approved", "running", "succeeded",
    ]  # fmt: skip
    requests = [
        json.loads(line) for line in (result.case_dir / "model_requests.jsonl").read_text().splitlines()
    ]
    assert requests and requests[0]["messages"][0]["content"] == "Order 2 blue widgets"
    _assert_nothing_outlives(result, agent_processes=result.lives)  # one black box per life


@pytest.mark.slow
def test_black_box_agent_killed_after_the_model_answered(launcher: LifeLauncher, tmp_path: Path) -> None:
    result = _run("blackbox_agent", CrashPoint("after_model_reply", "call_order"), launcher, tmp_path)
    assert result.verdict.passed, [m.describe() for m in result.verdict.mismatches]
    assert result.lives == 2
    _assert_nothing_outlives(result, agent_processes=result.lives)


def test_adapters_declare_the_boundaries_they_can_reach() -> None:
    python_agent = load_adapter(str(EXAMPLES / "python_agent" / "adapter.yaml"))
    black_box = load_adapter(str(EXAMPLES / "blackbox_agent" / "adapter.yaml"))
    assert "after_approved" in python_agent.boundaries
    # A black box is only seen from the wire: its approval and its ledger writes are not.
    assert black_box.boundaries == ("after_model_reply", "after_running", "after_side_effect")
    # Every agent that asks the loopback model can be killed right after it answered.
    assert "after_model_reply" in python_agent.boundaries
