"""A kind-2 agent whose tools are intercepted runs crashmatrix's mock tools in its life: the
steps of their effects are crash points (``during_side_effect``), killed like any other."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.agents.loading import fork_preload, load_adapter
from crashmatrix.harness.front.cases import enumerate_points, run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher

ROOT = Path(__file__).resolve().parents[3]
SEED000 = str(ROOT / "examples" / "seed000_agent" / "adapter.yaml")
DESK = str(ROOT / "examples" / "desk_agent" / "adapter.yaml")


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher("fork", preload=fork_preload(SEED000), warm=(SEED000,))


def test_only_an_agent_with_intercepted_tools_reaches_inside_an_effect() -> None:
    assert "during_side_effect" in load_adapter(SEED000).boundaries  # intercept: its four tools
    assert "during_side_effect" not in load_adapter(DESK).boundaries  # its own tools: no hook


@pytest.mark.slow
def test_a_write_is_killed_between_its_temp_file_and_its_rename(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    scenario = load_scenario(ROOT / "scenarios" / "write_file" / "overwrite_existing.yaml")
    enum = enumerate_points(scenario, launcher, tmp_path / "clean", agent=SEED000)
    [point] = [p for p in enum.points if p.boundary == "during_side_effect"]
    result = run_point(scenario, point, launcher, tmp_path / "case", agent=SEED000)
    assert result.lives == 2 and result.observation is not None
    assert result.observation.lives[0].crash == point.id  # the SIGKILL landed inside the effect
    assert result.passed, result.verdict  # the target was still old: rewriting it is safe
