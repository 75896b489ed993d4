"""A real SIGKILL inside an effect (``during_side_effect``): what the world holds then.

The correct write_file (temp file, fsync, rename) leaves the old target and its synced temp
file; the non_atomic_write_file mutant leaves half the new content where the old one was."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher, run_case
from crashmatrix.harness.plan.enumeration import points_from_trace

pytestmark = pytest.mark.slow

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
OVERWRITE = SCENARIOS / "write_file" / "overwrite_existing.yaml"
MUTANT = "crashmatrix.reference_agent.mutants:non_atomic_write_file"


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


def _killed_inside_the_write(launcher: LifeLauncher, case_dir: Path, agent: str) -> dict[str, str]:
    scenario = load_scenario(OVERWRITE)
    point = CrashPoint("during_side_effect", "call_bump")
    run = run_case(case_dir, scenario, launcher, agent=agent, point=point, max_lives=1)
    assert [life.status for life in run.lives] == ["crashed"]
    assert run.lives[0].crash == point.id
    workspace = case_dir / "world" / "workspace"
    return {p.name: p.read_text() for p in workspace.iterdir() if p.is_file()}


def test_the_clean_run_passes_one_step_inside_write_file(launcher: LifeLauncher, tmp_path: Path) -> None:
    run = run_case(tmp_path / "clean", load_scenario(OVERWRITE), launcher)
    ids = [p.id for p in points_from_trace(run.trace)]
    assert ids.index("after_running[call_bump]") + 1 == ids.index("during_side_effect[call_bump]")
    assert "during_side_effect[call_bump#2]" not in ids


def test_a_kill_inside_the_correct_write_leaves_the_old_target_and_the_synced_temp_file(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    files = _killed_inside_the_write(launcher, tmp_path / "reference", "reference")
    assert files.pop("config.ini") == "version=1\n"
    [(temp, content)] = files.items()
    assert temp.startswith(".config.ini.") and temp.endswith(".tmp")
    assert content == "version=2\n"


def test_a_kill_inside_the_non_atomic_write_leaves_half_a_file(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    files = _killed_inside_the_write(launcher, tmp_path / "mutant", MUTANT)
    assert files == {"config.ini": "versi"}  # neither version=1 nor version=2: the old is gone
