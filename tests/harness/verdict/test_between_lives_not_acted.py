"""No silent green: a case whose between-lives fault did nothing is not applicable, never
passed -- unless the agent failed anyway, which stays a failure (a real finding)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.trace import LifeRecord
from crashmatrix.harness.core.world_events import WorldEvent
from crashmatrix.harness.observation.observation import AppliedFault, BetweenLives, Observation, WorldView
from crashmatrix.harness.verdict.verdict import judge

from .test_verdict import ASKED, USER
from .test_verdict import SCENARIO as MAIL

# test_verdict's mail scenario, judged on the world alone (a foreign agent keeps no ledger).
SCENARIO = replace(MAIL, expect={"default": {"world": {"emails": 1}}})
RESULT = {"role": "tool", "tool_call_id": "call_mail", "content": json.dumps({"ok": True})}
DETAIL = "the agent keeps its own session; crashmatrix edits only its own copy"


def _seen(*, acted: bool, emails: int = 1) -> Observation:
    """A foreign agent (session read from the model's requests) after a tamper between lives."""
    return Observation(
        case_dir=Path("/nonexistent"),
        lives=(LifeRecord(1, None, "exited", 0, 0.1),),
        trace=(),
        session=None,
        world=WorldView(
            {"emails": emails},
            {},
            tuple(
                WorldEvent(seq, "email", "send_email", "call_mail", None, None, -1, {}, 0)
                for seq in range(1, emails + 1)
            ),
        ),
        requests=(_request(USER), _request(USER, ASKED, RESULT)),
        between_lives=BetweenLives(applied=(AppliedFault("tamper_arguments", acted, DETAIL),)),
        keeps_ledger=False,
        session_unavailable="adapter says session: readable: false",
    )


def _request(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "scripted", "messages": list(messages)}


def test_a_case_that_would_pass_but_whose_fault_did_not_act_is_not_applicable_with_the_reason() -> None:
    verdict = judge(_seen(acted=False), SCENARIO, None)
    assert verdict.status == "not_applicable"
    assert not verdict.passed
    assert verdict.problems == (
        f"tamper_arguments did not act: {DETAIL}; the fault this case tests never happened",
    )
    assert any(
        item.startswith("between_lives.tamper_arguments did not act") for item in verdict.not_applicable
    )
    assert not verdict.indeterminate


def test_a_case_that_fails_stays_failed_even_when_its_fault_did_not_act() -> None:
    verdict = judge(_seen(acted=False, emails=2), SCENARIO, None)
    assert verdict.status == "failed"
    assert [m.field for m in verdict.mismatches] == ["world.emails"]
    assert not any("did not act" in problem for problem in verdict.problems)


def test_a_case_whose_fault_acted_still_passes() -> None:
    verdict = judge(_seen(acted=True), SCENARIO, None)
    assert verdict.status == "passed", verdict
    assert not any("did not act" in item for item in verdict.not_applicable)
