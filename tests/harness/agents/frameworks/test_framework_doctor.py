"""``crashmatrix doctor`` on framework agents: the faults are planted where each framework
keeps its conversation (the SDK's session table, LangGraph's latest checkpoint), the same
place the adapter reads, so the checks fire there instead of being blind (a final answer's
write cut short is, in SQLite, its row never committed)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("agents")
pytest.importorskip("langgraph")

from crashmatrix.harness.front.doctor import run_doctor

from ....launchers import warm_launcher

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[4]
AGENTS = (
    "openai-agents:examples.openai_agents_agent.agent:build",
    "langgraph:examples.langgraph_agent.agent:build",
)


@pytest.fixture(scope="module")
def on_path() -> Iterator[None]:
    # The examples are imported by their dotted names from the repository root, in the lives
    # too (the fork server gets this process's sys.path with every life).
    added = str(ROOT) not in sys.path
    if added:
        sys.path.insert(0, str(ROOT))
    yield
    if added:
        sys.path.remove(str(ROOT))


@pytest.mark.parametrize("agent", AGENTS, ids=["openai-agents", "langgraph"])
def test_the_doctors_faults_land_in_the_frameworks_own_store(
    agent: str, on_path: None, tmp_path: Path
) -> None:
    # The server ``pytest --agent`` would start: the SDK imported and the agent loaded once,
    # not again in every life of the doctor's runs (a bare server's lives import them each).
    coverage = run_doctor(agent, launcher=warm_launcher(agent), work=tmp_path)
    states = {result.check: result.state for result in coverage.results}
    assert coverage.blind == (), coverage.table()
    assert states["one_tool_result_per_call"] == "fires", coverage.table()
    assert states["non_idempotent_at_most_once"] == "fires", coverage.table()
    # A write cut short in SQLite is the final answer never committed: the check sees it.
    assert states["turn_ends_with_final"] == "fires", coverage.table()
