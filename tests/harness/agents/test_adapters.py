"""The shipped example agents, run through ``harness.front.cases.run_point`` with a real crash:
kind 2 (an unmodified Python agent loaded in the life) and kind 3 (a black box on loopback).

Each test checks the verdict, that the agent's own ledger was normalised onto ours, that the
model was reached over loopback (the request log), and that no agent process outlives its case.
"""

from __future__ import annotations

import json
import time
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

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher("fork")


def _run(example: str, point: CrashPoint, launcher: LifeLauncher, tmp_path: Path) -> CaseResult:
    agent = str(EXAMPLES / example / "adapter.yaml")
    scenario = load_scenario(EXAMPLES / example / "scenario.yaml")
    return run_point(scenario, point, launcher, tmp_path / "case", agent=agent, deadline=30)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _assert_nothing_outlives(case_dir: Path) -> None:
    pids = [event["pid"] for event in read_trace(case_dir) if event.get("event") == "start"]
    agents = case_dir / "agent-pids.txt"
    if agents.exists():
        pids += [int(line.split()[1]) for line in agents.read_text().splitlines()]
    deadline = time.monotonic() + 5  # the kernel delivers PR_SET_PDEATHSIG asynchronously
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in pids if _alive(pid)], "a life or agent process outlived its case"


def _statuses(case_dir: Path, example: str, call_id: str) -> list[str]:
    log = load_foreign_adapter(EXAMPLES / example / "adapter.yaml").read_session(case_dir)
    return [e.status for e in log.entries if isinstance(e, ExecutionRecord) and e.tool_call_id == call_id]


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
    _assert_nothing_outlives(result.case_dir)


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
    _assert_nothing_outlives(result.case_dir)


def test_black_box_agent_killed_after_the_model_answered(launcher: LifeLauncher, tmp_path: Path) -> None:
    result = _run("blackbox_agent", CrashPoint("after_tool_call_saved", "call_order"), launcher, tmp_path)
    assert result.verdict.passed, [m.describe() for m in result.verdict.mismatches]
    assert result.lives == 2
    _assert_nothing_outlives(result.case_dir)


def test_adapters_declare_the_boundaries_they_can_reach() -> None:
    python_agent = load_adapter(str(EXAMPLES / "python_agent" / "adapter.yaml"))
    black_box = load_adapter(str(EXAMPLES / "blackbox_agent" / "adapter.yaml"))
    assert "after_approved" in python_agent.boundaries
    # A black box is only seen from the wire: its approval and its ledger writes are not.
    assert black_box.boundaries == ("after_tool_call_saved", "after_running", "after_side_effect")
