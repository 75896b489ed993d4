"""harness.core.double_resume: what each of two lives resuming one session at once did, read
from a hand-written trace and world events (pure), and the invariant it feeds,
``loser_stops_cleanly``, on hand-written evidence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from crashmatrix.harness.core.double_resume import ConcurrentLife, concurrent_lives
from crashmatrix.harness.verdict.invariants import Evidence, check_all, loser_stops_cleanly


@dataclass(frozen=True)
class Effect:
    """A world event, shaped like mock_tools.world.WorldEvent (the fields read here)."""

    seq: int
    kind: str
    pid: int
    tool: str = "send_email"
    tool_call_id: str | None = "call_1"
    execution_id: str | None = None
    idempotency_key: str | None = None
    session_bytes: int = -1
    detail: dict[str, Any] = field(default_factory=dict)


def _trace(*lives: tuple[int, int, list[str]]) -> list[dict[str, Any]]:
    """Life 1's crash, the double-resume event, then each concurrent life's events in order."""
    out: list[dict[str, Any]] = [
        {"life": 1, "event": "start", "pid": 100},
        {"life": 1, "event": "crash", "point": "after_running[call_1]"},
        {"event": "double_resume", "lives": [life for life, _, _ in lives]},
    ]
    for life, pid, events in lives:
        out.append({"life": life, "event": "start", "pid": pid})
        out += [{"life": life, "event": event} for event in events]
    return out


def test_a_case_that_is_no_double_resume_has_no_concurrent_lives() -> None:
    trace = [{"life": 1, "event": "start", "pid": 100}, {"life": 1, "event": "exit"}]
    assert concurrent_lives(trace, [Effect(1, "email_sent", 100)]) == ()


def test_each_concurrent_life_is_credited_with_its_own_lines_and_effects_by_pid() -> None:
    trace = _trace(
        (2, 201, ["gate", "wrote", "wrote", "wrote", "exit"]),
        (3, 202, ["exit"]),
    )
    effects = [Effect(1, "email_sent", 201), Effect(2, "email_sent", 100), Effect(3, "fault_fired", 201)]
    found = concurrent_lives(trace, effects, lambda e: e.kind != "fault_fired")
    assert found == (
        ConcurrentLife(2, 201, "exited", 3, 1, True),
        ConcurrentLife(3, 202, "exited", 0, 0, False),
    )
    assert found[0].acted and not found[1].acted


def test_how_a_concurrent_life_ended_is_the_harness_s_word_when_it_ended_abnormally() -> None:
    trace = _trace((2, 201, ["gate", "wrote", "exit"]), (3, 202, []))
    trace.append({"life": 3, "event": "ended", "status": "hung"})
    assert [life.status for life in concurrent_lives(trace, [])] == ["exited", "hung"]


def _evidence(*lives: ConcurrentLife) -> Evidence:
    return Evidence(entries=(), offsets=(), events=(), requests=(), turns=(), contracts={}, concurrent=lives)


def test_one_life_acting_and_the_other_stopping_cleanly_passes() -> None:
    facts = _evidence(
        ConcurrentLife(2, 201, "exited", 5, 1, True), ConcurrentLife(3, 202, "exited", 0, 0, False)
    )
    assert loser_stops_cleanly(facts) == []
    assert not [v for v in check_all(facts) if v.invariant == "loser_stops_cleanly"]


def test_two_lives_that_both_acted_fail_naming_each_with_what_it_did() -> None:
    facts = _evidence(
        ConcurrentLife(2, 201, "exited", 5, 1, True), ConcurrentLife(3, 202, "exited", 5, 1, True)
    )
    (violation,) = loser_stops_cleanly(facts)
    assert violation.invariant == "loser_stops_cleanly"
    assert "life 2 (pid 201) appended 5 session line(s) and made 1 side effect(s)" in violation.message
    assert "life 3 (pid 202)" in violation.message


def test_an_effect_alone_is_acting_even_without_a_session_line() -> None:
    facts = _evidence(
        ConcurrentLife(2, 201, "exited", 5, 1, True), ConcurrentLife(3, 202, "exited", 0, 1, True)
    )
    assert len(loser_stops_cleanly(facts)) == 1


def test_a_loser_that_left_the_session_alone_but_hung_or_raised_did_not_stop_cleanly() -> None:
    for status in ("hung", "error", "died"):
        facts = _evidence(
            ConcurrentLife(2, 201, "exited", 5, 1, True), ConcurrentLife(3, 202, status, 0, 0, False)
        )
        (violation,) = loser_stops_cleanly(facts)
        assert (
            "life 3, resuming the session beside another, left it alone but did not stop cleanly: "
            f"it ended {status}" in violation.message
        )


def test_no_concurrent_lives_nothing_to_judge() -> None:
    assert loser_stops_cleanly(_evidence()) == []


def test_lines_a_team_s_agent_wrote_to_its_own_session_are_told_to_no_life() -> None:
    # The harness says so in the double-resume event: no ``wrote`` event can exist, and a
    # count of 0 would claim the life wrote nothing. Its model requests are its own.
    trace = _trace((2, 201, ["gate", "exit"]), (3, 202, ["gate", "model_request", "model_request", "exit"]))
    trace[2] = {**trace[2], "lines": "session"}
    found = concurrent_lives(trace, [Effect(1, "email_sent", 202)])
    assert found == (
        ConcurrentLife(2, 201, "exited", None, 0, True, 0),
        ConcurrentLife(3, 202, "exited", None, 1, True, 2),
    )
    assert [life.acted for life in found] == [False, True]


def test_without_lines_a_life_acted_if_it_made_an_effect_or_asked_its_model() -> None:
    both = _evidence(
        ConcurrentLife(2, 201, "exited", None, 1, True, 1), ConcurrentLife(3, 202, "exited", None, 1, True, 1)
    )
    (violation,) = loser_stops_cleanly(both)
    assert "life 2 (pid 201) asked the model 1 time(s) and made 1 side effect(s)" in violation.message
    assert "session line" not in violation.message  # no line count is claimed
    # Recovery that makes no effect (a call closed uncertain): both went on with the turn.
    talked = _evidence(
        ConcurrentLife(2, 201, "exited", None, 0, True, 1), ConcurrentLife(3, 202, "exited", None, 0, True, 1)
    )
    (violation,) = loser_stops_cleanly(talked)
    assert "life 3 (pid 202) asked the model 1 time(s) and made 0 side effect(s)" in violation.message
    one = _evidence(
        ConcurrentLife(2, 201, "exited", None, 1, True, 1),
        ConcurrentLife(3, 202, "exited", None, 0, False, 0),
    )
    assert loser_stops_cleanly(one) == []
    (crashed,) = loser_stops_cleanly(
        _evidence(
            ConcurrentLife(2, 201, "exited", None, 1, True, 1),
            ConcurrentLife(3, 202, "error", None, 0, True, 0),
        )
    )
    assert "did not stop cleanly: it ended error" in crashed.message
