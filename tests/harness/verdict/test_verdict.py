"""The verdict as a pure function of (scenario, observation), including an agent whose
session the adapter cannot read: it is judged on the conversation the model saw, and what
that cannot show is reported as not applicable -- never as passed, never as failed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.categories import SEED004
from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.dialect import Dialect
from crashmatrix.harness.core.records import entry_from_json
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.script import Reply, Rule, When
from crashmatrix.harness.core.session_log import SessionLog
from crashmatrix.harness.core.trace import LifeRecord
from crashmatrix.harness.core.world_events import WorldEvent
from crashmatrix.harness.observation.observation import Observation, WorldView
from crashmatrix.harness.verdict.verdict import Verdict, judge, unjudged_in_every

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
    expect={
        "default": {"world": {"emails": 1}, "ledger": {"call_mail": ["approved", "running", "succeeded"]}}
    },
)


def _request(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "scripted", "messages": list(messages)}


def _result(ok: bool = True) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "call_mail", "content": json.dumps({"ok": ok})}


USER = {"role": "user", "content": "Send it"}
ASKED = {"role": "assistant", "content": "", "tool_calls": [CALL]}


def _email(seq: int) -> WorldEvent:
    """One email the world saw, tied to the call (the world counts what its events say)."""
    return WorldEvent(seq, "email", "send_email", "call_mail", None, None, -1, {}, 0)


def _unreadable(*requests: dict[str, Any], emails: int = 1) -> Observation:
    return Observation(
        case_dir=Path("/nonexistent"),
        lives=(LifeRecord(1, None, "exited", 0, 0.1),),
        trace=(),
        session=None,
        world=WorldView({"emails": emails}, {}, tuple(_email(seq) for seq in range(1, emails + 1))),
        requests=requests,
        keeps_ledger=False,
        session_unavailable="adapter says session: readable: false",
    )


def test_an_unreadable_session_is_judged_on_the_models_requests_and_says_what_it_cannot_check() -> None:
    seen = _unreadable(_request(USER), _request(USER, ASKED, _result()))
    verdict = judge(seen, SCENARIO, None)
    assert verdict.passed, verdict
    assert "ledger" not in verdict.expected
    assert "ledger: the agent's session cannot be read" in verdict.not_applicable
    skipped = {item.split(":")[0] for item in verdict.not_applicable}
    assert {"running_before_side_effect", "executions_closed", "legal_transitions"} <= skipped
    assert any("session: not available" in note for note in verdict.notes)


def test_two_tool_results_the_model_was_sent_are_caught_without_a_session() -> None:
    seen = _unreadable(_request(USER), _request(USER, ASKED, _result(), _result()))
    verdict = judge(seen, SCENARIO, None)
    assert [v.invariant for v in verdict.violations] == ["one_tool_result_per_call"]


def test_a_turn_the_model_never_finished_is_caught_without_a_session() -> None:
    # The agent never came back with the tool result: the model's last answer was a call.
    seen = _unreadable(_request(USER))
    verdict = judge(seen, SCENARIO, None)
    assert "turn_ends_with_final" in {v.invariant for v in verdict.violations}


def test_the_world_still_counts_without_a_session() -> None:
    verdict = judge(_unreadable(_request(USER), _request(USER, ASKED, _result()), emails=2), SCENARIO, None)
    assert [m.field for m in verdict.mismatches] == ["world.emails"]


def _left_unreadable(*requests: dict[str, Any], emails: int = 1) -> Observation:
    """An agent whose session the adapter reads, left unreadable by the agent itself (a line
    appended after a torn one): no session, and where it went wrong."""
    return Observation(
        case_dir=Path("/nonexistent"),
        lives=(LifeRecord(1, None, "exited", 0, 0.1),),
        trace=(),
        session=None,
        world=WorldView({"emails": emails}, {}, tuple(_email(seq) for seq in range(1, emails + 1))),
        requests=requests,
        session_problem="s.jsonl:3 (byte 90): line is not JSON",
    )


def test_a_session_the_agent_left_unreadable_fails_the_case_first_with_where() -> None:
    # Never passed on the requests alone: the agent broke its own session, a verdict on it.
    verdict = judge(_left_unreadable(_request(USER), _request(USER, ASKED, _result())), SCENARIO, None)
    assert verdict.status == "failed"
    assert (
        verdict.problems[0] == "the agent left its session unreadable: s.jsonl:3 (byte 90): line is not JSON"
    )
    assert "ledger: the agent left its session unreadable" in verdict.not_applicable


def test_the_rest_of_a_case_whose_session_is_unreadable_is_still_judged() -> None:
    # Its double send is still seen: the world and what the model was told are judged.
    verdict = judge(
        _left_unreadable(_request(USER), _request(USER, ASKED, _result()), emails=2), SCENARIO, None
    )
    assert verdict.status == "failed"
    assert [m.field for m in verdict.mismatches] == ["world.emails"]


# -- an agent judged without a ledger ----------------------------------------------------------

UNCERTAIN_AFTER_SEND = Scenario(
    path=Path("mail.yaml"),
    name="mail",
    tools=("send_email",),
    contracts={"send_email": ToolContract(name="send_email")},
    turns=("Send it",),
    rules=SCENARIO.rules,
    # What the reference agent must say after the send: its ledger shows running, no more.
    expect={"default": {"code": {"call_mail": "SIDE_EFFECT_UNCERTAIN"}}},
)
SAID_SENT = {"role": "tool", "tool_call_id": "call_mail", "content": json.dumps({"ok": True})}
FINAL = {"role": "assistant", "content": "Sent."}


def _session(*messages: dict[str, Any]) -> SessionLog:
    entries = tuple(
        entry_from_json({"type": "message", "message": m}, line=n) for n, m in enumerate(messages, 1)
    )
    return SessionLog(Path("s.jsonl"), entries, offsets=tuple(100 * n for n in range(1, len(entries) + 1)))


def _sent(*, emails: int, keeps_ledger: bool) -> Observation:
    """The saved call, then the email (after the call was on disk), then what it told."""
    events = tuple(
        WorldEvent(seq, "email", "send_email", "call_mail", None, None, 200, {}, 0)
        for seq in range(1, emails + 1)
    )
    return Observation(
        case_dir=Path("/nonexistent"),
        lives=(LifeRecord(1, None, "exited", 0, 0.1),),
        trace=(),
        session=_session(USER, ASKED, SAID_SENT, FINAL),
        world=WorldView({"emails": emails}, {}, events),
        keeps_ledger=keeps_ledger,
        no_ledger="" if keeps_ledger else "adapter mailer says session.keeps_ledger: false",
        dialect=Dialect(SEED004),  # not crashmatrix's vocabulary: no code compared, its told is
    )


def test_without_a_ledger_telling_that_a_send_which_happened_happened_is_no_mismatch() -> None:
    # Killed after the send or while writing its Tool Result, such an agent finds the same
    # things on restart; told succeeded, the world has the one email: the truth.
    verdict = judge(_sent(emails=1, keeps_ledger=False), UNCERTAIN_AFTER_SEND, None)
    assert verdict.passed, verdict
    assert verdict.expected["told"] == {"call_mail": {"in": ["uncertain", "succeeded", "replayed"]}}
    # The reason reaches the verdict's list: every ledger check, with the adapter's words.
    assert "ledger" not in verdict.expected
    unjudged = [e for e in verdict.not_applicable if e.startswith("running_before_side_effect:")]
    assert unjudged and "adapter mailer says session.keeps_ledger: false" in unjudged[0]


def test_without_a_ledger_telling_success_when_nothing_happened_still_fails() -> None:
    verdict = judge(_sent(emails=0, keeps_ledger=False), UNCERTAIN_AFTER_SEND, None)
    assert [v.invariant for v in verdict.violations] == ["told_the_truth"]


def test_with_a_ledger_the_scenarios_uncertain_stands() -> None:
    verdict = judge(_sent(emails=1, keeps_ledger=True), UNCERTAIN_AFTER_SEND, None)
    assert [m.field for m in verdict.mismatches] == ["told[call_mail]"]


def test_a_depth_2_pass_lists_what_none_of_its_second_crashes_judged() -> None:
    first = Verdict("passed", None, {}, not_applicable=("legal_transitions: no ledger", "no_partial_file: a"))
    second = Verdict("passed", None, {}, not_applicable=("legal_transitions: no ledger (again)",))
    assert unjudged_in_every([first, second]) == ("legal_transitions: no ledger",)
    assert unjudged_in_every([]) == ()
