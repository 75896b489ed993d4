"""harness.verdict.expectations: a scenario's ledger sequence against a seed 004 ledger.

Seed 004's ``planned`` (recorded, nobody approved it yet) is our "no ledger yet": the built-in
suite's sequences, written in our vocabulary, are compared without an agent's ``planned``
steps (examples/blackbox_agent writes one before every approval and was red on every ledger
expectation of the suite); a sequence that names ``planned`` is compared as observed, and a
real difference is still one.
"""

from __future__ import annotations

from typing import Any

from crashmatrix.harness.verdict.expectations import Observed, compare


def _ledger(statuses: list[str]) -> Observed:
    return Observed(ledger={"call_1": statuses}, outcome={}, code={}, world={})


def _mismatches(want: Any, statuses: list[str]) -> list[str]:
    found, _ = compare({"ledger": {"call_1": want}}, _ledger(statuses))
    return [m.describe() for m in found]


def test_a_sequence_in_our_vocabulary_matches_a_ledger_that_planned_first() -> None:
    assert (
        _mismatches(["approved", "running", "succeeded"], ["planned", "approved", "running", "succeeded"])
        == []
    )
    retried = ["planned", "approved", "running", "unknown", "approved", "running", "succeeded"]
    assert _mismatches(["approved", "running", "unknown", "approved", "running", "succeeded"], retried) == []
    assert _mismatches({"in": [["approved", "rejected"], ["rejected"]]}, ["planned", "rejected"]) == []


def test_a_real_difference_behind_planned_is_still_a_mismatch_showing_the_whole_ledger() -> None:
    (found,) = _mismatches(
        ["approved", "running", "unknown"], ["planned", "approved", "running", "succeeded"]
    )
    assert found.endswith('observed ["planned", "approved", "running", "succeeded"]'), found
    assert _mismatches([], ["planned", "approved"]) != []


def test_a_sequence_that_names_planned_is_compared_as_observed() -> None:
    assert (
        _mismatches(
            ["planned", "approved", "running", "succeeded"], ["planned", "approved", "running", "succeeded"]
        )
        == []
    )
    (found,) = _mismatches(
        ["planned", "approved", "running", "succeeded"], ["approved", "running", "succeeded"]
    )
    assert "expected" in found
    assert _mismatches({"in": [["planned", "rejected"]]}, ["rejected"]) != []
