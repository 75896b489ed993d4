"""Claims about the built-in suite itself (scenarios/), checked against real clean runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.ledger import tool_call_sites
from crashmatrix.harness.core.world_events import NON_SIDE_EFFECT_KINDS
from crashmatrix.harness.front.cases import enumerate_points
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.casedir import session_path_of
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.session_file import read_session
from crashmatrix.mock_tools.world import World

ROOT = Path(__file__).resolve().parents[3] / "scenarios"
SCENARIOS = sorted(p for p in ROOT.rglob("*.yaml") if "contracts" not in p.relative_to(ROOT).parts)
# The four crash points the user's design card names.
NAMED = ("after_tool_call_saved", "after_running", "after_side_effect", "before_tool_result")


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher(
        "fork", preload=["crashmatrix.harness.agents.reference", "crashmatrix.mock_tools.toolbox"]
    )


def test_every_scenario_of_the_suite_loads() -> None:
    # How many there are is stated in scenarios/README.md and checked by tests/test_docs.py.
    assert SCENARIOS
    for path in SCENARIOS:
        load_scenario(path)


@pytest.mark.slow
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_a_scenario_with_a_side_effect_is_crashed_at_the_four_named_boundaries(
    path: Path, launcher: LifeLauncher, tmp_path: Path
) -> None:
    scenario = load_scenario(path)
    enum = enumerate_points(scenario, launcher, tmp_path / "case")
    effects = [e for e in World(tmp_path / "case" / "world").events() if e.kind not in NON_SIDE_EFFECT_KINDS]
    selected = {p.boundary for p in enum.points if scenario.covers(p)}
    if effects:
        assert set(NAMED) <= selected, (
            f"{path.name}: side effects, but never crashed at {set(NAMED) - selected}"
        )
    else:
        # No side effect happened: every call that could have one must have been refused or
        # failed (a successful side-effecting call without a world event would be a lie).
        observed = enum.clean_verdict.observed
        assert observed is not None
        sites = tool_call_sites(read_session(session_path_of(tmp_path / "case")).entries)
        for site in sites:
            if scenario.contracts[site.call.name].for_call(site.call.parsed_arguments()).has_side_effects:
                assert observed.code[site.call.id] is not None, f"{path.name}: {site.call.id} ok, no effect"
