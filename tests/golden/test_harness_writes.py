"""The harness's own writes are never the agent's effects (issue 25, part B).

tests/golden/harness_writes/agent.py is a small correct kind-2 agent with its own world: the
files it writes, its outbox (JSONL) and its orders database (SQLite), all declared under
``effects:``. It writes a file atomically and, recovering a write left ``running``, checks
the file's hash first: the hash it meant to write -> already applied, the one it started
from -> written again, anything else -> CONFLICT, the file left alone.

On ``scenarios/write_file/external_change_conflict.yaml`` a colleague rewrites notes.txt
between the crash and the restart. That edit lands in the agent's own probed world; it is
recorded as the harness's (``effect_harness``, ``by: external_write``), so the agent's next
life is never blamed for it: every case, every power loss and every recovery crash is green.
Its twin (``HARNESS_WRITES_BUG=blind_overwrite``) writes notes.txt again whatever it holds:
it fails exactly where it overwrote the colleague's edit, and only for that -- no invariant.

``harness_writes/scenario.yaml`` is the same edit in a world that holds all three of its
effect sources: one message sends an email, places an order and writes notes.txt. The agent
is green at every crash point; the twin fails only where it overwrote the edit.

Its ``run_command`` runs ``rm -rf`` only, and its adapter probes ``dist/*`` for it: on
``scenarios/run_command/rm_rf_destructive.yaml`` the files going are the effect (a file probe
sees deletions), so the model told "succeeded" is judged true, and every case is green. Probed
elsewhere (``notes/*``), the deletion is not seen: ``told_the_truth`` is not judged for that
call, and the case says why.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.agents.effects import EFFECT_KIND, EXISTING_KIND, HARNESS_KIND
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.front.cases import enumerate_points, run_point, run_power, run_recovery
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.first_crash import FirstCrashes
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.verdict.result import CaseResult
from crashmatrix.mock_tools.world import World

from ..launchers import warm_launcher

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "harness_writes"
CONFLICT = load_scenario(ROOT / "scenarios" / "write_file" / "external_change_conflict.yaml")
RM_RF = load_scenario(ROOT / "scenarios" / "run_command" / "rm_rf_destructive.yaml")
OWN_WORLD = load_scenario(HERE / "scenario.yaml")
# Where a crash leaves the write running: recovery finds the colleague's text in notes.txt.
OVERWRITES = {
    "after_running[call_notes]",
    "after_side_effect[call_notes]",
    "torn_write[call_notes:succeeded]",
}


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield warm_launcher(HERE / "adapter.yaml", HERE / "adapter-twin.yaml")  # openai once, not per life


def _matrix(
    adapter: Path,
    launcher: LifeLauncher,
    work: Path,
    scenario: Scenario = CONFLICT,
    *,
    power: bool = True,
    recovery: bool = True,
) -> dict[str, CaseResult]:
    """The cases ``crashmatrix run`` runs for the scenario: clean, each point, power@ each
    point that is not a torn write, recovery@ the points after_approved and after_running
    (each column but the points' own can be left out, to keep a module cheap). P, power@P
    and recovery@P share P's first crash, taken from the clean life's snapshot where
    faithful, as the pytest plugin runs them by default (``tests/matrices.py``)."""
    agent = str(adapter)
    shared = FirstCrashes(work / "first-crashes", record_syncs=power, snapshots=True)
    enum = enumerate_points(scenario, launcher, work / "clean", agent=agent, shared=shared)
    cases = {"clean": enum.clean_case()}
    for point in enum.points:
        cases[point.id] = run_point(scenario, point, launcher, work / point.id, agent=agent, shared=shared)
        if power and point.boundary != "torn_write":
            cases[f"power@{point.id}"] = run_power(
                scenario, point, launcher, work / f"power-{point.id}", agent=agent, shared=shared
            )
        if recovery and point.boundary in ("after_approved", "after_running"):
            cases[f"recovery@{point.id}"] = run_recovery(
                scenario, point, launcher, work / f"recovery-{point.id}", agent=agent, shared=shared
            )
    return cases


def _checks(case: CaseResult) -> set[str]:
    return {v.invariant for v in case.verdict.violations} | {m.field for m in case.verdict.mismatches}


def test_a_correct_agent_with_its_own_world_is_green_with_a_colleagues_edit_between_lives(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    cases = _matrix(HERE / "adapter.yaml", launcher, tmp_path)
    assert {"after_approved[call_notes]", "power@after_side_effect[call_notes]"} <= set(cases)
    failed = {name: _checks(case) for name, case in cases.items() if not case.passed}
    assert failed == {}
    for name, case in cases.items():
        if name.startswith("recovery@"):
            continue  # its second crashes are judged inside it; its directory holds them
        with World(case.case_dir / "world") as world:
            effects = world.events(EFFECT_KIND)
            harness = world.events(HARNESS_KIND)
            seeded = world.events(EXISTING_KIND)
        # The seeded draft is the world before the agent; the colleague's edit, the
        # harness's; the agent's effects are only its own writes, each seen while it ran.
        assert len(seeded) == 1, name
        assert all(not e.detail["seen_at"].startswith("start of life") for e in effects), (name, effects)
        assert len(effects) <= 1, (name, effects)
        if name != "clean":
            assert {e.detail["by"] for e in harness} == {"external_write"}, name


def test_its_twin_that_overwrites_the_edit_fails_exactly_where_it_overwrote_it(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    cases = _matrix(HERE / "adapter-twin.yaml", launcher, tmp_path, power=False, recovery=False)
    failed = {name: _checks(case) for name, case in cases.items() if not case.passed}
    # Told success over the colleague's text, which is gone: never an invariant about effects.
    assert failed == {name: {"told[call_notes]", "world.files[notes.txt]"} for name in OVERWRITES}


@pytest.mark.parametrize(
    ("adapter", "red"), [("adapter.yaml", set()), ("adapter-twin.yaml", OVERWRITES)], ids=["correct", "twin"]
)
def test_with_its_outbox_orders_and_files_it_fails_only_where_it_overwrote_the_edit(
    launcher: LifeLauncher, tmp_path: Path, adapter: str, red: set[str]
) -> None:
    cases = _matrix(HERE / adapter, launcher, tmp_path, OWN_WORLD, power=False, recovery=False)
    assert {
        "after_side_effect[call_mail]",
        "after_running[call_order]",
        "after_running[call_notes]",
    } <= set(cases)
    failed = {name: _checks(case) for name, case in cases.items() if not case.passed}
    assert failed == {name: {"told[call_notes]", "world.files[notes.txt]"} for name in red}
    with World(cases["after_side_effect[call_mail]"].case_dir / "world") as world:
        kinds = [(e.kind, e.tool) for e in world.events() if e.kind in (EFFECT_KIND, HARNESS_KIND)]
    # One email, one order, one write: the agent's; the colleague's edit: the harness's.
    assert sorted(kinds) == sorted(
        [
            (EFFECT_KIND, "send_email"),
            (EFFECT_KIND, "create_order"),
            (EFFECT_KIND, "write_file"),
            (HARNESS_KIND, "write_file"),
            (HARNESS_KIND, "write_file"),
        ]
    )


def test_a_deletion_its_probe_watches_is_the_effect_of_rm_rf(launcher: LifeLauncher, tmp_path: Path) -> None:
    cases = _matrix(HERE / "adapter.yaml", launcher, tmp_path, RM_RF, power=False, recovery=False)
    failed = {name: _checks(case) for name, case in cases.items() if not case.passed}
    assert failed == {}
    with World(cases["clean"].case_dir / "world") as world:
        [deleted] = world.events(EFFECT_KIND)
    assert (deleted.tool, deleted.detail["change"]) == ("run_command", "deleted")
    assert deleted.detail["identity"].startswith("dist/app.js:")
    # Judged, not passed for want of a judge: nothing is said to be not applicable about it.
    assert not [n for n in cases["clean"].verdict.not_applicable if n.startswith("told_the_truth")]


def test_a_deletion_outside_what_its_probe_watches_is_not_judged_and_says_why(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    text = (HERE / "adapter.yaml").read_text(encoding="utf-8")
    text = text.replace("script: agent.py", f"script: {HERE / 'agent.py'}")
    watched = 'files: "dist/*"            # its rm -rf of dist: each file going is the effect'
    assert watched in text
    adapter = tmp_path / "adapter.yaml"
    adapter.write_text(text.replace(watched, 'files: "notes/*"'), encoding="utf-8")
    case = run_point(RM_RF, None, launcher, tmp_path / "clean", agent=str(adapter))
    assert case.passed, _checks(case)
    assert [n for n in case.verdict.not_applicable if n.startswith("told_the_truth")] == [
        "told_the_truth: call_rm (run_command) names dist, outside the files its effects: probes "
        "watch (notes/*): a write or a deletion there is not seen"
    ]
