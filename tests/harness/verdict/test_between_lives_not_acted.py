"""No silent green: a case whose between-lives fault did nothing is not applicable, never
passed -- unless the agent failed anyway, which stays a failure (a real finding)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.script import Reply, Rule, When
from crashmatrix.harness.core.trace import LifeRecord
from crashmatrix.harness.core.world_events import WorldEvent
from crashmatrix.harness.observation.observation import AppliedFault, BetweenLives, Observation, WorldView
from crashmatrix.harness.verdict.verdict import judge

CALL = {"id": "call_mail", "type": "function", "function": {"name": "send_email", "arguments": "{}"}}
SCENARIO = Scenario(
    path=Path("mail.yaml"),
    name="mail",
    tools=("send_email",),
    contracts={"send_email": ToolContract(name="send_email")},
    turns=("Send it",),
    rules=(
        Rule(When(role="user"), Reply(tool_calls=(("call_mail", "send_email", {}),))),
        Rule(When(role="tool"), Reply(content="Sent.")),
    ),
    expect={"default": {"world": {"emails": 1}}},
)
USER = {"role": "user", "content": "Send it"}
ASKED = {"role": "assistant", "content": "", "tool_calls": [CALL]}
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
