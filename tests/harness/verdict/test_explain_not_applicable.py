"""A failure text says each reason a check was not judged once: the checks an agent without a
ledger cannot be judged on come under one line naming why, not one repeated line each."""

from __future__ import annotations

from crashmatrix.harness.verdict.explain import _not_applicable_lines

WHY = "the agent keeps no ledger the adapter maps (adapter shop says session.keeps_ledger: false)"
VOCABULARY = "crashmatrix's reference vocabulary; this agent's is results: adapter"


def test_checks_with_one_reason_share_a_line_and_reasons_with_one_head_share_a_heading() -> None:
    items = (
        f"outcome: {VOCABULARY}",
        f"code: {VOCABULARY}",
        f"ledger: {VOCABULARY}",
        f"legal_transitions: {WHY}: no execution statuses to follow",
        f"executions_closed: {WHY}: no execution to close",
        "the agent has no read_file",
    )
    assert _not_applicable_lines(items, "  ") == [
        "  not applicable: the agent has no read_file",
        f"  not applicable: outcome, code, ledger: {VOCABULARY}",
        f"  not applicable, {WHY}:",
        "    legal_transitions: no execution statuses to follow",
        "    executions_closed: no execution to close",
    ]


def test_a_reason_of_its_own_stays_one_line_as_written() -> None:
    item = f"executions_closed: {WHY}: no execution to close"
    assert _not_applicable_lines((item,), "  ") == [f"  not applicable: {item}"]


def test_nothing_is_lost_every_check_and_every_reason_is_in_the_text() -> None:
    items = (*(f"check_{n}: {WHY}: part {n}" for n in range(5)), f"other: {VOCABULARY}")
    text = "\n".join(_not_applicable_lines(items, ""))
    for n in range(5):
        assert f"check_{n}: part {n}" in text
    assert WHY in text and VOCABULARY in text and "other" in text
