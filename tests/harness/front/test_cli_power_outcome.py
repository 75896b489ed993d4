"""``crashmatrix run --crash power@P --power-outcome N``: another legal state of a power
loss than the pessimistic one (``harness.lives.power``, ``docs/persistence.md``)."""

from __future__ import annotations

import pytest

from crashmatrix.harness.front.cli import main

SCENARIO = "scenarios/write_file/overwrite_existing.yaml"
MUTANT = "crashmatrix.reference_agent.mutants:unsynced_rename"


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["run", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1  # one line, nothing ran
    return err


def test_an_outcome_without_a_power_loss_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, SCENARIO, "--crash", "after_side_effect[call_bump]", "--power-outcome", "1")
    assert "--power-outcome 1 needs --crash power@POINT" in err


def test_a_negative_outcome_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    err = _refused(capsys, SCENARIO, "--crash", "power@after_side_effect[call_bump]", "--power-outcome", "-1")
    assert "write 0 (the pessimistic outcome) or more" in err


@pytest.mark.slow
@pytest.mark.parametrize(("outcome", "status"), [("0", 1), ("1", 0)])
def test_the_mutant_fails_the_pessimistic_outcome_and_passes_the_sigkill_s(
    capsys: pytest.CaptureFixture[str], outcome: str, status: int
) -> None:
    # Outcome 0: config.ini's rename persisted, its bytes did not (empty). Outcome 1, the
    # last: everything written reached the disk, as after a plain SIGKILL.
    argv = ["run", SCENARIO, "--crash", "power@after_side_effect[call_bump]", "--agent", MUTANT]
    assert main([*argv, "--power-outcome", outcome]) == status
    out = capsys.readouterr().out
    assert f"outcome {outcome} of 2" in out
    assert ("config.ini emptied" in out) is (outcome == "0")
