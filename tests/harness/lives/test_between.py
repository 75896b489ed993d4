"""Faults between lives (harness.lives.between): a colleague's edit is the harness's write,
never an effect of the agent whose own world it lands in."""

from __future__ import annotations

import json
from pathlib import Path

from crashmatrix.harness.agents.effects import EFFECT_KIND, EXISTING_KIND, HARNESS_KIND, EffectProbe
from crashmatrix.harness.agents.foreign import load_foreign_adapter
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.between import apply_between_lives
from crashmatrix.harness.lives.casedir import fresh_case
from crashmatrix.mock_tools.world import World

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "golden" / "harness_writes" / "adapter.yaml"
CONFLICT = ROOT / "scenarios" / "write_file" / "external_change_conflict.yaml"


def test_a_colleagues_edit_is_recorded_as_the_harnesss_and_the_next_life_sees_nothing_new(
    tmp_path: Path,
) -> None:
    adapter = load_foreign_adapter(GOLDEN)  # effects: files "*.txt" as write_file, ...
    scenario = load_scenario(CONFLICT)  # seeds notes.txt; between lives a colleague rewrites it
    case = tmp_path / "case"
    fresh_case(case, scenario)
    workspace = adapter.workspace(case)

    def probe(where: str, *, baseline: bool = False) -> None:
        with World(case / "world") as world:
            EffectProbe(adapter.spec.effects, workspace, world, lambda: 0).probe(where, baseline=baseline)

    probe("start of life 1", baseline=True)  # the seeded notes.txt: the world before the agent
    apply_between_lives(case, scenario, session_editable=False, agent=str(GOLDEN))
    probe("start of life 2")
    with World(case / "world") as world:
        assert world.events(EFFECT_KIND) == []
        [seeded] = world.events(EXISTING_KIND)
        harness = [(e.detail["change"], e.detail["by"]) for e in world.events(HARNESS_KIND)]
    assert json.loads(seeded.detail["record"])["path"] == "notes.txt"
    # The seeded draft went and the colleague's text came: both the harness's doing.
    assert sorted(harness) == [("added", "external_write"), ("removed", "external_write")]
    assert (workspace / "notes.txt").read_text() == "edited by a colleague\n"


def test_without_an_agent_that_probes_its_world_the_edit_is_only_the_worlds_event(tmp_path: Path) -> None:
    scenario = load_scenario(CONFLICT)
    fresh_case(tmp_path / "case", scenario)
    apply_between_lives(tmp_path / "case", scenario, agent="reference")
    with World(tmp_path / "case" / "world") as world:
        assert [e.kind for e in world.events()] == ["external_write"]
