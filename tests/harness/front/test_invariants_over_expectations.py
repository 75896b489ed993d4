"""Invariants over expectations (issue 32): a mutant that only a scenario's expectations
caught is caught by an invariant too, so a team's own scenario that states no expectation
still fails it. Each new invariant is proven on a copy of its scenario with ``expect:``
removed: the mutant fails that copy through the invariant alone, the reference agent passes it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from crashmatrix.harness.front.mutation import run_kill_matrix
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher

ROOT = Path(__file__).resolve().parents[3]
PRELOAD = [
    "crashmatrix.harness.agents.reference",
    "crashmatrix.reference_agent.mutants",
    "crashmatrix.mock_tools.toolbox",
]
# The scenario that reaches each mutant, and the invariant that must kill it there alone.
PROVEN = {
    "retry_swallows_last_error": ("faults/read_file_timeout_twice.yaml", "reads_report_real_content"),
}


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher("fork", preload=PRELOAD)


def _without_expectations(relative: str, into: Path) -> Path:
    data = yaml.safe_load((ROOT / "scenarios" / relative).read_text(encoding="utf-8"))
    assert "expect" in data, f"{relative} has no expectations to remove"
    del data["expect"]
    copy = into / Path(relative).name
    copy.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    assert not load_scenario(copy).expect  # loads, and expects nothing
    return copy


@pytest.mark.slow
@pytest.mark.parametrize("mutant", sorted(PROVEN))
def test_an_expectation_free_copy_of_the_scenario_kills_the_mutant_by_its_invariant(
    mutant: str, launcher: LifeLauncher, tmp_path: Path
) -> None:
    relative, invariant = PROVEN[mutant]
    copy = _without_expectations(relative, tmp_path)
    matrix = run_kill_matrix(
        [copy],
        [f"crashmatrix.reference_agent.mutants:{mutant}"],
        launcher,
        tmp_path / "cases",
        deadline=10.0,
        invariants_only=True,
        workers=1,
    )
    (row,) = matrix.rows
    # A kill counts only where the reference agent passes the same case (mutation.py), so
    # this also proves the invariant holds for the reference on the expectation-free copy.
    assert row.first_kill is not None, matrix.render()
    assert (row.first_kill.by, row.first_kill.reason) == ("invariant", invariant), matrix.render()
    assert not row.unconfirmed, matrix.render()
