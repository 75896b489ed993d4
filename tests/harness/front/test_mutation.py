"""The kill matrix: its table, its ordering, its command line, and the CI gate that every
mutant of the reference agent is killed by the built-in suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS
from crashmatrix.harness.front.cases import (
    enumerate_points,
    run_double,
    run_point,
    run_recovery,
    run_tool_fault,
)
from crashmatrix.harness.front.mutation import (
    Kill,
    KillMatrix,
    MutantRow,
    killed_by,
    main_mutants,
    mutant_spec,
    run_kill_matrix,
    scenario_files,
    scenario_score,
)
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.verdict.expectations import Mismatch
from crashmatrix.harness.verdict.invariants import Violation
from crashmatrix.harness.verdict.verdict import Verdict
from crashmatrix.reference_agent.mutants import MUTANTS

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "scenarios"
PRELOAD = [
    "crashmatrix.harness.agents.reference",
    "crashmatrix.reference_agent.mutants",
    "crashmatrix.mock_tools.toolbox",
]


def _matrix() -> KillMatrix:
    return KillMatrix(
        scenarios=("send_email/send_once.yaml", "create_order/keyed_once.yaml"),
        rows=(
            MutantRow(
                "blind_retry",
                {"send_email/send_once.yaml": "K"},
                Kill("send_email/send_once.yaml", "after_side_effect[call_mail]", "failed", "double email"),
                2,
                1.5,
            ),
            MutantRow(
                "stubborn",
                {"send_email/send_once.yaml": ".", "create_order/keyed_once.yaml": "."},
                None,
                20,
                9.0,
            ),
        ),
        seconds=10.5,
    )


def test_the_table_shows_k_for_killed_dot_for_survived_and_dash_for_not_run() -> None:
    lines = _matrix().render().splitlines()
    blind = next(line for line in lines if line.startswith("blind_retry"))
    stubborn = next(line for line in lines if line.startswith("stubborn"))
    assert " K -  " in blind
    assert " . .  " in stubborn


def test_the_table_names_the_case_that_killed_each_mutant_and_the_survivors() -> None:
    text = _matrix().render()
    assert (
        "send_email/send_once.yaml::after_side_effect[call_mail] (failed: double email; by invariant)" in text
    )
    assert "SURVIVED" in text
    assert "1/2 mutants killed; survivors: stubborn" in text
    assert "  1 send_email/send_once.yaml" in text and "  2 create_order/keyed_once.yaml" in text


def test_to_json_carries_cells_first_kill_and_survivors() -> None:
    data = _matrix().to_json()
    assert data["survivors"] == ["stubborn"]
    first = data["mutants"][0]
    assert first["killed"] and first["first_kill"]["case"] == "after_side_effect[call_mail]"
    assert data["mutants"][1]["first_kill"] is None


def _verdict(status: str, *, violations: int = 0, mismatches: int = 0) -> Verdict:
    return Verdict(
        status,
        None,
        {},
        mismatches=tuple(Mismatch(f"world.orders{i}", 1, 2) for i in range(mismatches)),
        violations=tuple(Violation("non_idempotent_at_most_once", "two orders") for _ in range(violations)),
    )


def test_a_kill_says_whether_an_invariant_or_only_the_expectations_failed_the_case() -> None:
    assert killed_by(_verdict("failed", violations=1, mismatches=1)) == "invariant"
    assert killed_by(_verdict("failed", mismatches=1)) == "expectation"
    # A hung case fails whatever the scenario expects, even with violations of a cut session.
    assert killed_by(_verdict("hung", violations=1)) == "hung"


def _row(mutant: str, *bys: str) -> MutantRow:
    kills = tuple(Kill(f"s{i}.yaml", "clean", "failed", "why", by) for i, by in enumerate(bys))
    return MutantRow(mutant, {k.scenario: "K" for k in kills}, kills[0] if kills else None, 1, 0.1, (), kills)


def test_the_figure_counts_mutants_killed_without_expectations_and_names_the_others() -> None:
    matrix = KillMatrix(
        ("s0.yaml", "s1.yaml"),
        (
            _row("by_invariant", "invariant"),
            _row("by_hang", "hung"),
            _row("by_expectation", "expectation"),
            _row("by_both", "expectation", "invariant"),
            _row("survivor"),
        ),
        invariants_only=True,
    )
    assert matrix.by_expectations_only == ("by_expectation",)
    figure = matrix.figure()
    assert figure.startswith("3/5 mutants killed without expectations (2 by an invariant, 1 hung or errored)")
    assert figure.endswith("by expectations only: by_expectation")
    text = matrix.render()
    assert "killed by expectations only (E):" in text
    assert "  by_expectation: s0.yaml::clean (failed: why; by expectation)" in text
    data = matrix.to_json()
    assert data["by_expectations_only"] == ["by_expectation"] and data["invariants_only"] is True
    both = next(m for m in data["mutants"] if m["mutant"] == "by_both")
    assert both["without_expectations"] and [k["by"] for k in both["kills"]] == ["expectation", "invariant"]


def test_without_invariants_only_the_figure_says_it_counts_first_kills_only() -> None:
    assert "--invariants searches on" in KillMatrix(("s0.yaml",), (_row("m", "expectation"),)).figure()


def test_scenarios_whose_tags_or_tools_match_the_hints_score_higher() -> None:
    email = load_scenario(SCENARIOS / "send_email" / "send_once.yaml")
    order = load_scenario(SCENARIOS / "create_order" / "keyed_once.yaml")
    hints = ("create_order", "keyed")
    assert scenario_score(order, hints) > scenario_score(email, hints) == 0


def test_the_torn_recovery_hint_ranks_scenarios_that_tear_recovery_and_their_recovery_cases_first() -> None:
    from crashmatrix.harness.core.boundaries import CrashPoint
    from crashmatrix.harness.front.mutation import TORN_HINT, _Case, case_score

    email = load_scenario(SCENARIOS / "send_email" / "send_once.yaml")
    listing = load_scenario(SCENARIOS / "send_email" / "send_then_list.yaml")
    assert email.recovery_torn_writes and not listing.recovery_torn_writes
    hints = (TORN_HINT, "send_email")
    assert scenario_score(email, hints) > scenario_score(listing, hints)
    point = CrashPoint("after_running", "call_mail")
    recovery, crash = _Case(f"recovery@{point.id}", "recovery", point), _Case(point.id, "crash", point)
    assert case_score(recovery, hints) > case_score(crash, hints) == 0
    assert case_score(recovery, ("send_email",)) == 0  # not hinted: run last (mutant_row's last pass)


def test_a_bare_mutant_name_means_the_reference_agents_mutant() -> None:
    assert mutant_spec("blind_retry") == "crashmatrix.reference_agent.mutants:blind_retry"
    assert mutant_spec("pkg.mod:factory") == "pkg.mod:factory"


def test_scenario_files_skip_contract_folders() -> None:
    files = scenario_files(SCENARIOS)
    assert files and not any("contracts" in p.parts for p in files)


def test_an_unknown_mutant_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main_mutants(["--mutant", "no_such_bug"]) == 2
    assert "no such mutant" in capsys.readouterr().err


def test_a_missing_scenarios_directory_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main_mutants(["--scenarios", str(tmp_path / "absent")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


# ---------------------------------------------------------------- the CI gate (forked lives)


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher("fork", preload=PRELOAD)


@pytest.fixture(scope="module")
def gate(launcher: LifeLauncher, tmp_path_factory: pytest.TempPathFactory) -> KillMatrix:
    return run_kill_matrix(
        scenario_files(SCENARIOS),
        [mutant_spec(name) for name in MUTANTS],
        launcher,
        tmp_path_factory.mktemp("kill-matrix"),
        power=True,
        deadline=10.0,  # a hung mutant costs its deadline; a healthy life takes well under 1 s
        # A case failed by a scenario's expectations alone is noted and the search goes on (as
        # `crashmatrix mutants --invariants`): each first kill is then one that needs none.
        invariants_only=True,
    )


@pytest.mark.slow
def test_every_mutant_is_killed_by_a_built_in_scenario(gate: KillMatrix) -> None:
    assert not gate.survivors, gate.render()


@pytest.mark.slow
def test_no_mutant_is_killed_by_a_scenarios_expectations_alone(gate: KillMatrix) -> None:
    # Issue 32: a team's own scenario states few expectations, if any; each bug the suite
    # catches must fail an invariant (or hang), so that scenario catches it too. The gate
    # searches past kills by expectations alone (invariants_only): a mutant listed here is one
    # only expectations catch anywhere in the suite; write the invariant that states the rule.
    assert not gate.by_expectations_only, gate.render()


@pytest.mark.slow
def test_no_kill_rests_on_a_case_the_reference_agent_fails_too(gate: KillMatrix) -> None:
    # run_kill_matrix counts a kill only when the reference passes that case; a case both
    # fail is recorded as unconfirmed, which would mean a broken scenario.
    assert all(not row.unconfirmed for row in gate.rows), gate.to_json()


@pytest.mark.slow
def test_the_reference_agent_passes_every_case_that_killed_a_mutant(
    gate: KillMatrix, launcher: LifeLauncher, tmp_path: Path
) -> None:
    for row in gate.rows:
        assert row.first_kill is not None
        scenario = load_scenario(SCENARIOS / row.first_kill.scenario)
        case_dir = tmp_path / row.mutant
        enum = enumerate_points(scenario, launcher, case_dir / "clean")
        kind, _, point_id = row.first_kill.case.rpartition("@")
        if point_id == "clean":
            assert enum.clean_verdict.passed, (row.mutant, enum.clean_verdict)
            continue
        if point_id.partition("[")[0] in TOOL_SIDE_KINDS:  # the tool side failed that call
            fault = next(p for p in enum.tool_side if p.id == point_id)
            assert run_tool_fault(scenario, fault, launcher, case_dir / "case").passed, (row.mutant, fault)
            continue
        point = next(p for p in enum.points if p.id == point_id)
        if kind == "double":  # two lives resuming that crash at once
            result = run_double(scenario, point, launcher, case_dir / "case")
        elif kind == "recovery":  # its second crashes too (a torn recovery record: closed_mark_first)
            result = run_recovery(scenario, point, launcher, case_dir / "case")
        else:
            result = run_point(scenario, point, launcher, case_dir / "case", power_loss=kind == "power")
        assert result.passed, (row.mutant, row.first_kill, result.verdict)


# Mutants whose bug only a power loss can show (a SIGKILL keeps the page cache).
POWER_ONLY = ("no_fsync", "fsync_before_write", "no_directory_fsync", "unsynced_rename")


@pytest.mark.slow
@pytest.mark.parametrize("mutant", POWER_ONLY)
def test_a_power_only_mutant_is_killed_by_a_power_loss_and_survives_every_plain_crash_there(
    gate: KillMatrix, launcher: LifeLauncher, tmp_path: Path, mutant: str
) -> None:
    row = next(r for r in gate.rows if r.mutant == mutant)
    assert row.first_kill is not None and row.first_kill.case.startswith("power@"), row
    # The same scenario without its power@ cases, recovery@ included: nothing kills it.
    plain = run_kill_matrix(
        [SCENARIOS / row.first_kill.scenario],
        [mutant_spec(mutant)],
        launcher,
        tmp_path,
        recovery=True,
        power=False,
        deadline=10.0,
    )
    assert plain.survivors == (mutant,), plain.render()


def _other_first_crashes(
    mutant: str, scenario_file: str, boundary: str, launcher: LifeLauncher, tmp_path: Path
) -> tuple[int, list[str]]:
    """Run the mutant at every first crash of the scenario but ``boundary``'s (its clean run
    must pass): how many ran, and the ids of those that failed."""
    scenario = load_scenario(SCENARIOS / scenario_file)
    agent = mutant_spec(mutant)
    enum = enumerate_points(scenario, launcher, tmp_path / "clean", agent=agent)
    assert enum.clean_verdict.passed, enum.clean_verdict
    others = [p for p in enum.points if p.boundary != boundary and scenario.covers(p)]
    failed = [
        p.id
        for n, p in enumerate(others)
        if not run_point(scenario, p, launcher, tmp_path / f"case{n}", agent=agent).passed
    ]
    return len(others), failed


# Mutants whose bug only a crash inside a multi-step effect can show: every boundary between
# the steps of a tool call finds the file whole.
DURING_ONLY = ("non_atomic_write_file",)


@pytest.mark.slow
@pytest.mark.parametrize("mutant", DURING_ONLY)
def test_a_during_only_mutant_is_killed_inside_an_effect_and_survives_every_other_crash_there(
    gate: KillMatrix, launcher: LifeLauncher, tmp_path: Path, mutant: str
) -> None:
    row = next(r for r in gate.rows if r.mutant == mutant)
    assert row.first_kill is not None and row.first_kill.case.startswith("during_side_effect["), row
    assert row.first_kill.reason == "no_partial_file", row.first_kill
    # The same scenario's other first crashes (between the steps, torn writes) all pass.
    ran, failed = _other_first_crashes(
        mutant, row.first_kill.scenario, "during_side_effect", launcher, tmp_path
    )
    assert ran > 5 and failed == []


# Mutants whose bug only a crash between the model's reply and its saving can show: every
# other crash point leaves a tool call or a result to resume from.
MODEL_REPLY_ONLY = ("unanswered_turn_done",)


@pytest.mark.slow
@pytest.mark.parametrize("mutant", MODEL_REPLY_ONLY)
def test_a_model_reply_only_mutant_is_killed_after_the_reply_and_survives_every_other_crash_there(
    gate: KillMatrix, launcher: LifeLauncher, tmp_path: Path, mutant: str
) -> None:
    row = next(r for r in gate.rows if r.mutant == mutant)
    assert row.first_kill is not None, row
    assert row.first_kill.case.removeprefix("power@").startswith("after_model_reply["), row
    assert row.first_kill.reason == "turn_ends_with_final", row.first_kill
    ran, failed = _other_first_crashes(
        mutant, row.first_kill.scenario, "after_model_reply", launcher, tmp_path
    )
    assert ran >= 4 and failed == []  # the first kill may be a read-only scenario: no ledger points
