"""An approval the scenario does not answer for its tool (a foreign agent's prompt tied to no
tool while the answers differ by tool) ends the case: it is not applicable, with the prompt
and the fix, whatever the life looked like -- never red, never green."""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.core.trace import UNANSWERED_APPROVAL, LifeRecord
from crashmatrix.harness.observation.observation import Observation, WorldView
from crashmatrix.harness.verdict.verdict import judge

from .test_verdict import SCENARIO

WHY = "the agent asked '允许写入？[y/N]', which names no tool, ...; tie the prompt to its tool"
ERROR = "UnansweredApproval: " + WHY


def _seen(*events: dict[str, object]) -> Observation:
    """The life that met the prompt ended with the error the conversation raised."""
    return Observation(
        case_dir=Path("/nonexistent"),
        lives=(LifeRecord(1, None, "error", 3, 0.1, ERROR),),
        trace=({"life": 1, "event": "start"}, *events, {"life": 1, "event": "error", "error": ERROR}),
        session=None,
        world=WorldView(),
        session_problem="no session",
    )


def test_a_case_ended_by_an_unanswered_approval_is_not_applicable_with_why() -> None:
    event = {"life": 1, "event": UNANSWERED_APPROVAL, "prompt": "允许写入？[y/N]", "why": WHY}
    verdict = judge(_seen(event, event), SCENARIO, None)
    assert (verdict.status, verdict.passed) == ("not_applicable", False)
    assert verdict.problems == (WHY,)  # once, however many lives met it
    assert verdict.not_applicable == (f"approvals: {WHY}",)


def test_the_same_life_error_without_the_event_is_an_error() -> None:
    assert judge(_seen(), SCENARIO, None).status == "error"
