"""Exploration: Hypothesis-generated conversations and crash schedules, run for real.

The CI profile (fixed seeds, small N, no shrinking except in the round-trip test):

* the reference agent survives a bounded exploration (no invariant broken);
* exploration ALONE, without the YAML suite, kills exactly the mutants docs/exploration.md
  lists (11 of the 12);
* a shrunk finding is written as ``found_<hash>.yaml``, loads with ``load_scenario``, fails
  again against the mutant and passes against the reference.

Which mutants exploration kills (seed 0, 12 conversations x up to 3 schedules each) is
printed by ``test_exploration_alone_kills_the_mutants_its_doc_lists`` and kept in
docs/exploration.md, whose "CI profile" describes this file (checked here).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from crashmatrix.harness.front.explore import (
    PRELOAD,
    Conversation,
    ExploreResult,
    explore,
    main_explore,
    materialise,
    parse_point,
    reproduce,
    scenario_document,
    schedule_of,
    write_found,
)
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.reference_agent.mutants import MUTANTS

MUTANT_EXAMPLES = 12
MUTANT_SEED = 0
REFERENCE_EXAMPLES = 15
REFERENCE_SEED = 1
DEADLINE = 4.0  # per life: a hung mutant (torn_tail_blocks_forever) costs this much
DOC = Path(__file__).resolve().parents[3] / "docs" / "exploration.md"


def _documented_kills() -> set[str]:
    found = re.search(r"Killed: ([\w,\s]+)\.", DOC.read_text(encoding="utf-8"))
    assert found, "docs/exploration.md no longer lists the killed mutants after 'Killed: '"
    return {name.strip() for name in found.group(1).split(",")}


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher("fork", preload=PRELOAD)


# ---------------------------------------------------------------- fast: the data path


def test_a_generated_conversation_is_a_valid_scenario(tmp_path: Path) -> None:
    from crashmatrix.harness.front.explore import CallSpec

    conversation = Conversation(
        turns=(
            (
                (CallSpec("send_email", {"to": "a@example.com", "subject": "s", "body": "b"}),),
                (CallSpec("run_command", {"command": "npm publish"}), CallSpec("read_file", {"path": "x"})),
            ),
        ),
        repeat=True,
        approvals={"send_email": "no"},
        faults=((1, "response_lost"),),
        external_write=True,
    )
    scenario = materialise(scenario_document(conversation), tmp_path / "s.yaml")
    assert scenario.turns == ("[t1] please do the task", "[t2] please do the task")
    assert scenario.faults[0]["call"] == "c2"
    # N sends leave at most N emails; a repeated turn sends twice.
    assert scenario.expect["default"]["world"]["emails"] == {"in": [0, 1, 2]}
    assert "clean" not in scenario.expect  # a refusal makes the clean count undeterminable


def test_the_ci_profile_in_the_doc_is_this_files() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert f"reference agent, {REFERENCE_EXAMPLES} conversations (seed {REFERENCE_SEED})" in text
    assert f"each mutant, {MUTANT_EXAMPLES} conversations (seed {MUTANT_SEED}, no shrinking)" in text
    assert _documented_kills() <= set(MUTANTS)


def test_the_strategy_draws_compound_commands_that_fool_a_prefix_regex() -> None:
    from hypothesis import find

    from crashmatrix.harness.core.classifier import classify_command
    from crashmatrix.harness.front.explore import CallSpec, conversations

    def commands(conversation: Conversation) -> list[str]:
        calls = [c for turn in conversation.turns for message in turn for c in message]
        return [str(c.arguments["command"]) for c in calls if c.tool == "run_command"]

    def fools_the_regex(command: str) -> bool:
        starts_read_only = re.match(r"^(pwd|ls|find|rg|cat|sed|wc)\b", command) is not None
        return starts_read_only and classify_command(command).kind == "destructive"

    found = find(conversations(), lambda c: any(fools_the_regex(cmd) for cmd in commands(c)))
    assert any(fools_the_regex(cmd) for cmd in commands(found))
    # A publish inside a compound command is bounded like one alone: at most one release a call.
    assert CallSpec("run_command", {"command": "ls && npm publish"}).bound_key == "run_command:npm publish"


def test_point_ids_parse_back() -> None:
    for text in ("after_running[c1]", "torn_write[c2:tool_result]", "after_approved[c3#2]"):
        assert parse_point(text).id == text


def test_bad_input_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main_explore(["--agent", "no_such_mutant"]) == 2
    assert main_explore(["--examples", "0"]) == 2
    assert "no_such_mutant" in capsys.readouterr().err


# ---------------------------------------------------------------- slow: real crashes


@pytest.mark.slow
def test_the_reference_agent_survives_exploration(launcher: LifeLauncher, tmp_path: Path) -> None:
    result = explore(
        examples=REFERENCE_EXAMPLES,
        seed=REFERENCE_SEED,
        work_dir=tmp_path,
        launcher=launcher,
        deadline=10.0,
        shrink=False,
    )
    assert result.finding is None, f"{result.finding.schedule.case_id}: {result.finding.reason}"
    assert result.examples == REFERENCE_EXAMPLES


def _explore_mutant(name: str, launcher: LifeLauncher, work_dir: Path) -> ExploreResult:
    return explore(
        agent=f"crashmatrix.reference_agent.mutants:{name}",
        examples=MUTANT_EXAMPLES,
        seed=MUTANT_SEED,
        work_dir=work_dir / name,
        launcher=launcher,
        deadline=DEADLINE,
        shrink=False,
    )


@pytest.mark.slow
def test_exploration_alone_kills_the_mutants_its_doc_lists(launcher: LifeLauncher, tmp_path: Path) -> None:
    """No YAML suite: generated conversations only. A kill is a failing case the reference
    passes (as in the kill matrix). The seeds are fixed, so the kills are exact: a change
    (a new mutant, another Hypothesis version) fails until docs/exploration.md says so."""
    with ThreadPoolExecutor(max_workers=2) as pool:  # each case is its own processes
        results = dict(
            zip(MUTANTS, pool.map(lambda n: _explore_mutant(n, launcher, tmp_path), MUTANTS), strict=True)
        )
    killed = {n for n, r in results.items() if r.finding is not None and r.finding.reference_passes}
    report = [
        f"{name}: "
        + (
            f"KILLED by {r.finding.schedule.case_id} ({r.finding.reason[:80]})"
            if name in killed
            else "survived"
        )
        for name, r in results.items()
    ]
    print("\n".join(report))
    assert killed == _documented_kills(), "\n".join(report)


@pytest.mark.slow
def test_a_found_case_is_written_as_yaml_that_reproduces(launcher: LifeLauncher, tmp_path: Path) -> None:
    mutant = "crashmatrix.reference_agent.mutants:recovery_appends_user"
    result = explore(
        agent=mutant,
        examples=10,
        seed=MUTANT_SEED,
        work_dir=tmp_path / "explore",
        launcher=launcher,
        deadline=DEADLINE,
        budget=40,
    )
    finding = result.finding
    assert finding is not None and finding.reference_passes
    path = write_found(finding, tmp_path / "found")
    assert path.name == f"found_{finding.digest}.yaml"
    scenario = load_scenario(path)
    assert schedule_of(scenario) == finding.schedule
    assert scenario.cover == ((finding.schedule.point.id,) if finding.schedule.point else ())
    assert "rerun: crashmatrix run" in path.read_text(encoding="utf-8")
    yaml.safe_load(path.read_text(encoding="utf-8"))
    again = reproduce(path, mutant, tmp_path / "again", launcher=launcher, deadline=DEADLINE)
    assert (
        again.status == finding.verdict.status
    )  # "error": the scripted model has no rule for "Please continue."
    assert {v.invariant for v in again.violations} & {v.invariant for v in finding.verdict.violations}
    assert reproduce(path, "reference", tmp_path / "ref", launcher=launcher, deadline=DEADLINE).passed
