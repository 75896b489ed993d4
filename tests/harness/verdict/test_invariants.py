"""harness.verdict.invariants: each invariant passes seed 000's real traces and fails exactly when
its own rule is broken, naming the id involved.

Sessions are written here as lists of dicts in seed 000's JSONL shape; offsets come from
``encode_line`` exactly as ``read_session`` would measure them, and world events are a small
frozen dataclass shaped like ``mock_tools.world.WorldEvent``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.ledger import arguments_sha256
from crashmatrix.harness.core.records import Entry, MessageEntry, entry_from_json
from crashmatrix.harness.core.session_log import encode_line, prompt_view
from crashmatrix.harness.core.toolmap import ToolMap, ToolName
from crashmatrix.harness.core.tools import ToolObservation
from crashmatrix.harness.errors import InputError
from crashmatrix.harness.verdict.invariants import (
    INVARIANTS,
    LEDGER_INVARIANTS,
    WITHOUT_LEDGER,
    Evidence,
    Violation,
    check_all,
    not_applicable,
    undecided_effects,
)

DATA = Path(__file__).parents[1] / "data" / "invariants"

Raw = dict[str, Any]

# ---------------------------------------------------------------------------- builders


@dataclass(frozen=True)
class Event:
    """A world event, shaped like mock_tools.world.WorldEvent."""

    seq: int
    kind: str
    tool: str
    tool_call_id: str | None
    execution_id: str | None
    session_bytes: int
    idempotency_key: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)


CONTRACTS: Mapping[str, ToolContract] = {
    "write_file": ToolContract(name="write_file", idempotency="conditional", replay_policy="ask"),
    "read_file": ToolContract(name="read_file", idempotency="idempotent", replay_policy="auto", ledger=False),
    "run_command": ToolContract(name="run_command", classify="run_command"),
    # send_email deliberately has no contract: the default is non_idempotent (seed 004).
}


def user(text: str) -> Raw:
    return {"type": "message", "message": {"role": "user", "content": text}}


def call(call_id: str, name: str, arguments: Mapping[str, Any]) -> Raw:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(dict(arguments), ensure_ascii=False)},
    }


def assistant(*calls: Raw, content: str = "") -> Raw:
    message: Raw = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return {"type": "message", "message": message}


def final(text: str = "done") -> Raw:
    return assistant(content=text)


def tool_result(call_id: str, content: Mapping[str, Any]) -> Raw:
    return {
        "type": "message",
        "message": {"role": "tool", "tool_call_id": call_id, "content": json.dumps(dict(content))},
    }


def ledger(
    execution_id: str,
    call_id: str,
    status: str,
    tool: str,
    arguments: Mapping[str, Any],
    result: Mapping[str, Any] | None = None,
) -> Raw:
    sha = arguments_sha256(arguments)
    out: Raw = {
        "type": "tool_execution",
        "execution_id": execution_id,
        "tool_call_id": call_id,
        "status": status,
    }
    if result is not None:
        out["result"] = dict(result)
    out |= {"tool_name": tool, "idempotency_key": f"{tool}:{sha}", "arguments_sha256": sha}
    return out


def ok_result(execution_id: str) -> Raw:
    return {"ok": True, "status": "succeeded", "execution_id": execution_id}


def size(lines: Sequence[Raw], count: int) -> int:
    """Bytes of the first ``count`` lines: the session size right after line ``count``."""
    return sum(len(encode_line(line)) for line in lines[:count])


def parse(lines: Sequence[Raw]) -> tuple[list[Entry], list[int]]:
    entries = [entry_from_json(raw, line=n) for n, raw in enumerate(lines, start=1)]
    offsets: list[int] = []
    total = 0
    for raw in lines:
        total += len(encode_line(raw))
        offsets.append(total)
    return entries, offsets


def model_requests(entries: Sequence[Entry]) -> list[Raw]:
    """What an honest agent sent: the prompt view of the session before each reply."""
    return [
        {"model": "scripted", "messages": prompt_view(entries[:index])}
        for index, entry in enumerate(entries)
        if isinstance(entry, MessageEntry) and entry.message.role == "assistant"
    ]


def evidence(
    lines: Sequence[Raw],
    events: Sequence[Event] = (),
    *,
    turns: Sequence[str] | None = None,
    requests: Sequence[Mapping[str, Any]] | None = None,
    has_ledger: bool = True,
) -> Evidence:
    """Evidence for a session; by default the turns are its user messages and the requests
    are what an honest agent would have sent, so only the broken part of a case differs."""
    entries, offsets = parse(lines)
    if turns is None:
        turns = [
            raw["message"]["content"]
            for raw in lines
            if raw["type"] == "message" and raw["message"]["role"] == "user"
        ]
    return Evidence(
        entries=entries,
        offsets=offsets,
        events=list(events),
        requests=model_requests(entries) if requests is None else list(requests),
        turns=list(turns),
        contracts=CONTRACTS,
        has_ledger=has_ledger,
    )


def names(violations: Iterable[Violation]) -> set[str]:
    return {v.invariant for v in violations}


def only_violation(ev: Evidence, invariant: str, *, naming: str) -> Violation:
    """Assert that ``invariant`` is the one invariant broken, and that it names ``naming``."""
    violations = check_all(ev)
    assert names(violations) == {invariant}, violations
    mine = [v for v in violations if naming in v.message]
    assert mine, f"no {invariant} message names {naming!r}: {violations}"
    return mine[0]


# ---------------------------------------------------------------------------- seed 000 traces


def load(name: str) -> list[Raw]:
    text = (DATA / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


NORMAL = load("seed000_normal_write.jsonl")  # seed 000, 7.1 (7 lines)
RECOVERY = load("seed000_crash_recovery.jsonl")  # seed 000, 7.2 (12 lines)
NORMAL_CALL = "call_7d0dea1500df4e77ad998b2d"
NORMAL_EXEC = "exec_ef1a380b3439469ea9677bbd74c2e8a3"
NORMAL_TURN = NORMAL[0]["message"]["content"]
RECOVERY_CALL = "call_recovery_demo"
RECOVERY_EXEC = "exec_abe36d1afcf74bcaaf736105eec7f9f1"
INTERRUPTED_EXEC = "exec_interrupted_demo"


def normal_events(lines: Sequence[Raw] = NORMAL, *, after_line: int = 4) -> list[Event]:
    """The one file write of 7.1, made after the running line (line 4) was on disk."""
    return [Event(1, "file_write", "write_file", NORMAL_CALL, NORMAL_EXEC, size(lines, after_line))]


def recovery_events() -> list[Event]:
    # 7.2: the interrupted attempt never wrote the file; a fault fired once; the retry wrote
    # it after its running line (line 7); the verification read is not a side effect.
    return [
        Event(1, "fault", "write_file", RECOVERY_CALL, INTERRUPTED_EXEC, size(RECOVERY, 4)),
        Event(2, "file_write", "write_file", RECOVERY_CALL, RECOVERY_EXEC, size(RECOVERY, 7)),
        Event(3, "read", "read_file", "call_831bbb27cf6f496b9526c757", None, size(RECOVERY, 10)),
    ]


def test_the_seed_traces_are_seed_000_verbatim() -> None:
    assert len(NORMAL) == 7 and len(RECOVERY) == 12
    assert [line["type"] for line in NORMAL].count("tool_execution") == 3
    assert [line["type"] for line in RECOVERY].count("tool_execution") == 6
    # encode_line reproduces the seed's bytes, so the offsets are the real file's offsets.
    for name in ("seed000_normal_write.jsonl", "seed000_crash_recovery.jsonl"):
        data = (DATA / name).read_bytes()
        assert b"".join(encode_line(line) for line in load(name)) == data


@pytest.mark.parametrize("invariant", list(INVARIANTS))
def test_seed_000_normal_write_satisfies(invariant: str) -> None:
    ev = evidence(NORMAL, normal_events(), turns=[NORMAL_TURN])
    assert check_all(ev, only=[invariant]) == []


@pytest.mark.parametrize("invariant", list(INVARIANTS))
def test_seed_000_crash_recovery_satisfies(invariant: str) -> None:
    ev = evidence(RECOVERY, recovery_events(), turns=[RECOVERY[0]["message"]["content"]])
    assert check_all(ev, only=[invariant]) == []


def test_registry_names_and_order_are_the_documented_ones() -> None:
    assert list(INVARIANTS) == [
        "one_tool_result_per_call",
        "legal_transitions",
        "executions_closed",
        "running_before_side_effect",
        "non_idempotent_at_most_once",
        "told_the_truth",
        "no_success_without_answer",
        "no_result_for_other_arguments",
        "no_user_message_from_recovery",
        "turn_ends_with_final",
        "no_ledger_in_prompt",
        "unknown_never_succeeded",
        "no_effect_after_death",
        "no_partial_file",
        "reads_report_real_content",
        "loser_stops_cleanly",
        "torn_fragments_accounted",
    ]
    assert {
        "legal_transitions",
        "executions_closed",
        "running_before_side_effect",
        "no_result_for_other_arguments",
        "unknown_never_succeeded",
    } == LEDGER_INVARIANTS
    for check in INVARIANTS.values():
        assert check.__doc__ and "Why" in check.__doc__


# ---------------------------------------------------------------------------- 1. one result per call


def test_two_tool_results_for_one_call_is_a_violation() -> None:
    lines = [*NORMAL[:6], NORMAL[5], NORMAL[6]]
    v = only_violation(evidence(lines, normal_events()), "one_tool_result_per_call", naming=NORMAL_CALL)
    assert v.tool_call_id == NORMAL_CALL
    assert "2 Tool Results" in v.message


def test_a_call_without_tool_result_is_a_violation() -> None:
    lines = [*NORMAL[:5], NORMAL[6]]
    v = only_violation(evidence(lines, normal_events()), "one_tool_result_per_call", naming=NORMAL_CALL)
    assert "0 Tool Results" in v.message


def test_a_tool_result_for_a_call_nobody_made_is_a_violation() -> None:
    lines = [*NORMAL[:6], tool_result("call_ghost", {"ok": True}), NORMAL[6]]
    only_violation(evidence(lines, normal_events()), "one_tool_result_per_call", naming="call_ghost")


def reused_id_session(*, second_result: bool) -> list[Raw]:
    """Two turns whose providers both named their call ``call_0``."""
    args = {"path": "a.txt"}
    lines = [
        user("read a"),
        assistant(call("call_0", "read_file", args)),
        tool_result("call_0", {"ok": True, "status": "succeeded", "content": "A"}),
        final("A"),
        user("read a again"),
        assistant(call("call_0", "read_file", args)),
    ]
    if second_result:
        lines.append(tool_result("call_0", {"ok": True, "status": "succeeded", "content": "A"}))
    lines.append(final("A again"))
    return lines


def test_a_reused_tool_call_id_is_matched_within_its_turn() -> None:
    assert check_all(evidence(reused_id_session(second_result=True))) == []
    # The first turn's result must not count for the second turn's call_0.
    v = only_violation(
        evidence(reused_id_session(second_result=False)), "one_tool_result_per_call", naming="call_0"
    )
    assert "line 6" in v.message


# ---------------------------------------------------------------------------- 2. legal transitions


def test_running_again_after_succeeded_is_a_violation() -> None:
    # approved, running, succeeded, running, succeeded: re-executed under the old id.
    lines = [*NORMAL[:5], NORMAL[3], NORMAL[4], *NORMAL[5:]]
    v = only_violation(evidence(lines, normal_events()), "legal_transitions", naming=NORMAL_EXEC)
    assert "after terminal 'succeeded'" in v.message
    assert v.tool_call_id == NORMAL_CALL


def test_succeeded_without_running_is_a_violation() -> None:
    lines = [NORMAL[0], NORMAL[1], NORMAL[2], NORMAL[4], NORMAL[5], NORMAL[6]]
    v = only_violation(evidence(lines), "legal_transitions", naming=NORMAL_EXEC)
    assert "'approved' -> 'succeeded'" in v.message


def test_a_ledger_line_for_a_call_nobody_made_is_a_violation() -> None:
    stray = ledger("exec_stray", "call_elsewhere", "rejected", "send_email", {})
    lines = [*NORMAL[:5], stray, *NORMAL[5:]]
    v = only_violation(evidence(lines, normal_events()), "legal_transitions", naming="exec_stray")
    assert "call_elsewhere" in v.message


# ---------------------------------------------------------------------------- 3. executions closed


def test_running_left_open_is_a_violation_even_when_a_later_execution_ran() -> None:
    args = {"path": "ledger-demo.txt", "content": "hello ledger"}
    abandoned = [
        ledger("exec_abandoned", NORMAL_CALL, s, "write_file", args) for s in ("approved", "running")
    ]
    lines = [*NORMAL[:2], *abandoned, *NORMAL[2:]]
    events = normal_events(lines, after_line=6)
    v = only_violation(evidence(lines, events), "executions_closed", naming="exec_abandoned")
    assert "ends 'running'" in v.message


def test_an_approval_that_nothing_superseded_is_a_violation() -> None:
    # The call succeeded, then an approval was written for it and left: nothing ever closed
    # or replaced it, so a later restart could act on it.
    args = {"path": "ledger-demo.txt", "content": "hello ledger"}
    lines = [*NORMAL[:5], ledger("exec_abandoned", NORMAL_CALL, "approved", "write_file", args), *NORMAL[5:]]
    v = only_violation(evidence(lines, normal_events()), "executions_closed", naming="exec_abandoned")
    assert "ends 'approved'" in v.message


@pytest.mark.parametrize("status", ["approved", "planned"])
def test_an_approval_a_later_execution_superseded_is_seed_000s_recovery(status: str) -> None:
    # Seed 000: "approved -> 重新进入 Router": the call is routed again under a new execution
    # id; the old one never started.
    args = {"path": "ledger-demo.txt", "content": "hello ledger"}
    lines = [*NORMAL[:2], ledger("exec_old", NORMAL_CALL, status, "write_file", args), *NORMAL[2:]]
    assert names(check_all(evidence(lines, normal_events(lines, after_line=5)))) == set()


def test_a_crash_after_approved_rerouted_as_seed_000_does_is_fine() -> None:
    # Seed 000 7.2, crashed one boundary earlier: the interrupted execution got no further
    # than `approved`, and recovery routed the call again under a new execution id.
    lines = [*RECOVERY[:3], *RECOVERY[5:]]
    assert [line.get("status") for line in lines[2:6]] == ["approved", "approved", "running", "succeeded"]
    events = [
        Event(1, "file_write", "write_file", RECOVERY_CALL, RECOVERY_EXEC, size(lines, 5)),
        Event(2, "read", "read_file", "call_831bbb27cf6f496b9526c757", None, size(lines, 8)),
    ]
    assert check_all(evidence(lines, events)) == []


def reapproval_session(*, rerouted: bool) -> list[Raw]:
    """A crash after `approved`; on restart the user refuses the call when asked again. Seed
    000 asks under a new execution (rerouted); the bug answers for the old one and leaves it."""
    args = {"path": "ledger-demo.txt", "content": "hello ledger"}
    refused = "exec_new" if rerouted else "exec_old"
    lines = [*NORMAL[:2], ledger("exec_old", NORMAL_CALL, "approved", "write_file", args)]
    if rerouted:
        lines.append(ledger("exec_new", NORMAL_CALL, "rejected", "write_file", args))
    rejection = {"ok": False, "status": "rejected", "execution_id": refused, "code": "REJECTED"}
    return [*lines, tool_result(NORMAL_CALL, rejection), final("not written")]


def test_an_approval_superseded_by_an_execution_the_user_then_rejected_is_fine() -> None:
    assert check_all(evidence(reapproval_session(rerouted=True))) == []


def test_an_approval_answered_by_a_refusal_but_never_closed_is_a_violation() -> None:
    v = only_violation(evidence(reapproval_session(rerouted=False)), "executions_closed", naming="exec_old")
    assert "ends 'approved'" in v.message and "superseded" in v.message


def test_an_execution_that_reached_running_is_not_excused_by_a_later_one() -> None:
    # approved, running, approved: it started, so a later execution does not make it moot.
    args = {"path": "ledger-demo.txt", "content": "hello ledger"}
    started = [
        ledger("exec_started", NORMAL_CALL, s, "write_file", args)
        for s in ("approved", "running", "approved")
    ]
    lines = [*NORMAL[:2], *started, *NORMAL[2:]]
    violations = check_all(evidence(lines, normal_events(lines, after_line=7)))
    assert names(violations) == {"legal_transitions", "executions_closed"}, violations
    [v] = [v for v in violations if v.invariant == "executions_closed"]
    assert "exec_started" in v.message and "ends 'approved'" in v.message


def renamed(lines: Sequence[Raw], old: str, new: str) -> list[Raw]:
    """``lines`` with tool_call_id ``old`` spelled ``new`` everywhere."""
    return [json.loads(json.dumps(line).replace(json.dumps(old), json.dumps(new))) for line in lines]


def test_an_execution_under_a_reused_call_id_in_a_later_turn_supersedes_nothing() -> None:
    # Turn 1 leaves call_0's approval open; turn 2's provider names its call call_0 too and
    # runs it: that is another call, so turn 1's approval is still open.
    first = renamed(reapproval_session(rerouted=False), NORMAL_CALL, "call_0")
    second = renamed([user("write it again"), *NORMAL[1:]], NORMAL_CALL, "call_0")
    lines = first + second
    events = [Event(1, "file_write", "write_file", "call_0", NORMAL_EXEC, size(lines, len(first) + 4))]
    v = only_violation(evidence(lines, events), "executions_closed", naming="exec_old")
    assert v.tool_call_id == "call_0" and "line 3" in v.message
    # The same execution inside turn 1's call would have superseded it.
    same_call = first[:3] + second[2:]
    events = [Event(1, "file_write", "write_file", "call_0", NORMAL_EXEC, size(same_call, 5))]
    assert check_all(evidence(same_call, events)) == []


# ---------------------------------------------------------------------------- 4. running before effect


def test_a_side_effect_before_running_was_on_disk_is_a_violation() -> None:
    events = normal_events(after_line=3)  # the file changed when only `approved` was on disk
    v = only_violation(evidence(NORMAL, events), "running_before_side_effect", naming="seq 1")
    assert NORMAL_EXEC in v.message
    assert v.tool_call_id == NORMAL_CALL


def test_a_side_effect_at_exactly_the_end_of_running_is_fine() -> None:
    assert check_all(evidence(NORMAL, normal_events(after_line=4))) == []


def test_a_side_effect_of_an_execution_without_running_is_a_violation() -> None:
    events = [Event(9, "file_write", "write_file", NORMAL_CALL, "exec_phantom", size(NORMAL, 6))]
    v = only_violation(evidence(NORMAL, events), "running_before_side_effect", naming="exec_phantom")
    assert "seq 9" in v.message


def test_an_unknown_session_size_proves_nothing() -> None:
    events = [Event(4, "file_write", "write_file", NORMAL_CALL, NORMAL_EXEC, -1)]
    only_violation(evidence(NORMAL, events), "running_before_side_effect", naming="seq 4")


def test_faults_external_writes_and_reads_are_not_side_effects() -> None:
    events = [
        Event(1, "fault", "write_file", NORMAL_CALL, NORMAL_EXEC, 0),
        Event(2, "external_write", "(external)", None, None, 0),
        Event(3, "read", "write_file", NORMAL_CALL, NORMAL_EXEC, 0),
        *normal_events(),
    ]
    assert check_all(evidence(NORMAL, events)) == []


# Effects of the agent's own world (adapter ``effects:``): found by probes, known only between
# the session size at the previous probe (session_bytes) and at the probe that saw them.


def probed(seq: int, tool: str, *, at_least: int, at_most: int, **ids: str | None) -> Event:
    return Event(
        seq,
        "effect",
        tool,
        ids.get("tool_call_id"),
        ids.get("execution_id"),
        at_least,
        ids.get("idempotency_key"),
        {"seen_at_bytes": at_most},
    )


def test_a_probed_effect_after_its_running_line_is_fine() -> None:
    event = probed(
        1, "write_file", at_least=size(NORMAL, 4), at_most=size(NORMAL, 5), tool_call_id=NORMAL_CALL
    )
    facts = evidence(NORMAL, [event])
    assert check_all(facts) == [] and undecided_effects(facts) == []


def test_a_probed_effect_seen_before_running_was_written_is_a_violation() -> None:
    # Probed at `approved` (nothing) and right after the effect: running was not there yet.
    event = probed(
        1, "write_file", at_least=size(NORMAL, 3), at_most=size(NORMAL, 3), tool_call_id=NORMAL_CALL
    )
    v = only_violation(evidence(NORMAL, [event]), "running_before_side_effect", naming="seq 1")
    assert f"call {NORMAL_CALL!r}" in v.message


def test_a_probed_effect_whose_bounds_straddle_running_is_undecided_not_judged() -> None:
    event = probed(
        1, "write_file", at_least=size(NORMAL, 3), at_most=size(NORMAL, 5), tool_call_id=NORMAL_CALL
    )
    facts = evidence(NORMAL, [event])
    assert check_all(facts) == []
    (why,) = undecided_effects(facts)
    assert "first seen between session bytes" in why and "seq 1" in why


def test_a_probed_effect_that_names_nothing_is_tied_to_its_tools_calls() -> None:
    event = probed(1, "write_file", at_least=size(NORMAL, 3), at_most=size(NORMAL, 3))
    only_violation(evidence(NORMAL, [event]), "running_before_side_effect", naming="no call named")


# ---------------------------------------------------------------------------- 5. at most once

EMAIL = {"to": "a@example.com", "subject": "hi", "body": "hello"}


def email_session(
    executions: Sequence[tuple[str, Sequence[str]]], *, call_id: str = "call_mail"
) -> list[Raw]:
    lines = [user("send the email"), assistant(call(call_id, "send_email", EMAIL))]
    for execution_id, statuses in executions:
        lines += [ledger(execution_id, call_id, s, "send_email", EMAIL) for s in statuses]
    lines += [tool_result(call_id, ok_result(executions[-1][0])), final("sent")]
    return lines


def test_an_email_sent_before_its_call_was_saved_still_counts_toward_that_call() -> None:
    """An agent without a ledger that sends, then saves the call: killed after the send, it
    never saved the call; restarted, the model asks again and it sends again. The first email
    is the call's the model made again (no call was on disk when it went out): two emails."""
    lines = [user("send the email"), assistant(call("call_mail", "send_email", EMAIL))]
    lines += [tool_result("call_mail", {"ok": True}), final("sent")]
    events = [
        Event(1, "email", "send_email", "call_mail", None, size(lines, 1)),  # before the save
        Event(2, "email", "send_email", "call_mail", None, size(lines, 2)),
    ]
    facts = evidence(lines, events, has_ledger=False)
    only_violation(facts, "non_idempotent_at_most_once", naming="caused 2 side effects")
    # One email, sent before its call was saved, is that call's: told succeeded is the truth.
    assert check_all(evidence(lines, events[:1], has_ledger=False)) == []


def test_two_emails_for_one_send_email_call_is_a_violation() -> None:
    lines = email_session([("exec_mail", ["approved", "running", "succeeded"])])
    events = [
        Event(1, "email", "send_email", "call_mail", "exec_mail", size(lines, 4)),
        Event(2, "email", "send_email", "call_mail", "exec_mail", size(lines, 4)),
    ]
    v = only_violation(evidence(lines, events), "non_idempotent_at_most_once", naming="call_mail")
    assert "seq 1, 2" in v.message


def test_told_success_with_no_effect_in_the_world_is_a_lie() -> None:
    # The agent said the mail went out; the world (which records every send_email) has none.
    lines = email_session([("exec_mail", ["approved", "running", "succeeded"])])
    v = only_violation(evidence(lines), "told_the_truth", naming="call_mail")
    assert "told 'succeeded', but the world holds no side effect" in v.message


def test_an_effect_the_world_does_not_watch_is_not_judged_but_said_to_be_unjudged() -> None:
    # A foreign agent's own send_email with no effects:, service or intercept: the world
    # cannot see it, so "no event" proves nothing either way.
    lines = email_session([("exec_mail", ["approved", "running", "succeeded"])])
    blind = replace(evidence(lines), watched=frozenset({"create_order"}))
    assert "told_the_truth" not in names(check_all(blind))
    unjudged = dict(not_applicable(blind))
    assert set(unjudged) >= {"told_the_truth", "non_idempotent_at_most_once"}
    assert "the effects of send_email are not observed" in unjudged["told_the_truth"]
    # Watched again, the same lie is caught.
    watched = replace(blind, watched=frozenset({"send_email"}))
    assert "told_the_truth" in names(check_all(watched))
    assert "told_the_truth" not in dict(not_applicable(watched))


def test_a_blind_retry_of_a_non_idempotent_call_is_a_violation_over_all_executions() -> None:
    lines = email_session(
        [("exec_1", ["approved", "running", "unknown"]), ("exec_2", ["approved", "running", "succeeded"])]
    )
    events = [
        Event(1, "email", "send_email", "call_mail", "exec_1", size(lines, 4)),
        Event(2, "email", "send_email", "call_mail", "exec_2", size(lines, 7)),
    ]
    only_violation(evidence(lines, events), "non_idempotent_at_most_once", naming="call_mail")


def test_one_email_per_turn_under_a_reused_call_id_is_fine() -> None:
    first = email_session([("exec_1", ["approved", "running", "succeeded"])], call_id="call_0")
    second = email_session([("exec_2", ["approved", "running", "succeeded"])], call_id="call_0")
    second[0] = user("send it again, please")
    lines = first + second
    events = [
        Event(1, "email", "send_email", "call_0", "exec_1", size(lines, 4)),
        Event(2, "email", "send_email", "call_0", "exec_2", size(lines, len(first) + 4)),
    ]
    assert check_all(evidence(lines, events)) == []


def test_effects_under_two_keys_of_one_call_are_counted_against_that_call() -> None:
    # A new idempotency key per attempt: the orders database sees two keys, and the ledger
    # says both belong to call_mail's executions.
    lines = email_session(
        [("exec_1", ["approved", "running", "unknown"]), ("exec_2", ["approved", "running", "succeeded"])]
    )
    lines[2] = lines[2] | {"idempotency_key": "k1"}
    lines[3] = lines[3] | {"idempotency_key": "k1"}
    lines[5] = lines[5] | {"idempotency_key": "k2"}
    lines[6] = lines[6] | {"idempotency_key": "k2"}
    events = [
        probed(1, "send_email", at_least=size(lines, 4), at_most=size(lines, 4), idempotency_key="k1"),
        probed(2, "send_email", at_least=size(lines, 7), at_most=size(lines, 7), idempotency_key="k2"),
    ]
    v = only_violation(evidence(lines, events), "non_idempotent_at_most_once", naming="call_mail")
    assert "2 side effects" in v.message


def test_effects_that_name_no_call_are_counted_against_their_tools_latest_call() -> None:
    lines = email_session([("exec_1", ["approved", "running", "succeeded"])])
    events = [probed(n, "send_email", at_least=size(lines, 4), at_most=size(lines, 5)) for n in (1, 2)]
    only_violation(evidence(lines, events), "non_idempotent_at_most_once", naming="call_mail")


def test_run_command_is_classified_per_call() -> None:
    def session(command: str) -> tuple[list[Raw], list[Event]]:
        args = {"command": command}
        lines = [user(f"run {command}"), assistant(call("call_cmd", "run_command", args))]
        lines += [ledger("exec_cmd", "call_cmd", s, "run_command", args) for s in ("approved", "running")]
        lines += [ledger("exec_cmd", "call_cmd", "succeeded", "run_command", args)]
        lines += [tool_result("call_cmd", ok_result("exec_cmd")), final()]
        events = [Event(n, "command", "run_command", "call_cmd", "exec_cmd", size(lines, 4)) for n in (1, 2)]
        return lines, events

    read_only = evidence(*session("ls src"))
    assert check_all(read_only) == []
    appends = evidence(*session("echo x >> audit.log"))
    only_violation(appends, "non_idempotent_at_most_once", naming="call_cmd")


def _compound(runs: Sequence[Sequence[tuple[str, int | None]]]) -> tuple[list[Raw], list[Event]]:
    """``echo a >> log && echo b >> log`` run once per execution in ``runs``; each run is its
    events as (execution_id, part_of)."""
    args = {"command": "echo a >> audit.log && echo b >> audit.log"}
    lines = [user("log twice"), assistant(call("call_cmd", "run_command", args))]
    eids = list(dict.fromkeys(eid for run in runs for eid, _ in run))
    for eid in eids[:-1]:
        lines += [ledger(eid, "call_cmd", s, "run_command", args) for s in ("approved", "running", "unknown")]
    lines += [
        ledger(eids[-1], "call_cmd", s, "run_command", args) for s in ("approved", "running", "succeeded")
    ]
    lines += [tool_result("call_cmd", ok_result(eids[-1])), final()]
    events: list[Event] = []
    for run in runs:
        for eid, part_of in run:
            detail = {"effect": "append"} | ({} if part_of is None else {"part_of": part_of})
            running = 4 + 3 * eids.index(eid)
            events.append(
                Event(
                    len(events) + 1,
                    "command",
                    "run_command",
                    "call_cmd",
                    eid,
                    size(lines, running),
                    detail=detail,
                )
            )
    return lines, events


def test_the_effects_of_one_run_of_a_compound_command_count_once() -> None:
    # Two appends of one run: the simulator names the run's first effect in the second's detail.
    assert check_all(evidence(*_compound([[("exec_1", None), ("exec_1", 1)]]))) == []


def test_a_compound_command_run_twice_is_counted_as_two_runs() -> None:
    lines, events = _compound([[("exec_1", None), ("exec_1", 1)], [("exec_2", None), ("exec_2", 3)]])
    v = only_violation(evidence(lines, events), "non_idempotent_at_most_once", naming="call_cmd")
    assert "side effects in 2 runs (world seq 1, 2 | 3, 4" in v.message


def test_part_of_joins_a_run_only_within_the_same_execution() -> None:
    # An event claiming to continue another execution's run is a run of its own.
    lines, events = _compound([[("exec_1", None)], [("exec_2", 1)]])
    v = only_violation(evidence(lines, events), "non_idempotent_at_most_once", naming="call_cmd")
    assert "caused 2 side effects (world seq 1, 2)" in v.message


# ---------------------------------------------------------------------------- no partial file

WRITE = {"path": "notes.txt", "content": "new notes\n"}


def _write_session(arguments: Mapping[str, Any] = WRITE) -> list[Raw]:
    lines = [user("write the notes"), assistant(call("call_w", "write_file", arguments))]
    lines += [
        ledger("exec_w", "call_w", s, "write_file", arguments) for s in ("approved", "running", "succeeded")
    ]
    return [*lines, tool_result("call_w", ok_result("exec_w")), final()]


def _files(
    final: Mapping[str, str | None], *, seed: Mapping[str, str] | None = None, events: Sequence[Event] = ()
) -> Evidence:
    lines = _write_session()
    written = [Event(1, "file_write", "write_file", "call_w", "exec_w", size(lines, 4))]
    return replace(
        evidence(lines, [*written, *events]),
        files=dict(final),
        seed_files={"notes.txt": "old notes\n"} if seed is None else dict(seed),
    )


def test_a_file_with_its_old_or_its_new_content_is_whole() -> None:
    assert check_all(_files({"notes.txt": "old notes\n"}), only=["no_partial_file"]) == []
    assert check_all(_files({"notes.txt": "new notes\n"}), only=["no_partial_file"]) == []
    # Never seeded and never created (the write stopped before its rename): the old state.
    assert check_all(_files({}, seed={}), only=["no_partial_file"]) == []


def test_half_a_file_is_neither_old_nor_new() -> None:
    v = only_violation(_files({"notes.txt": "new n"}), "no_partial_file", naming="'notes.txt'")
    assert "is neither old nor new content: it has 5 bytes with sha256 " + _sha("new n") in v.message
    assert "old (before the first life) sha256 " + _sha("old notes\n") in v.message
    assert _sha("new notes\n") in v.message


def test_a_seeded_file_that_vanished_is_neither_old_nor_new() -> None:
    v = only_violation(_files({}), "no_partial_file", naming="'notes.txt'")
    assert "it is absent" in v.message


def test_a_content_someone_else_wrote_between_lives_is_allowed() -> None:
    edit = Event(
        2,
        "external_write",
        "(external)",
        None,
        None,
        -1,
        detail={"path": "notes.txt", "after_sha256": _sha("edited\n")},
    )
    assert check_all(_files({"notes.txt": "edited\n"}, events=[edit]), only=["no_partial_file"]) == []
    # Without that event the same content is neither old nor new.
    assert names(check_all(_files({"notes.txt": "edited\n"}), only=["no_partial_file"])) == {
        "no_partial_file"
    }


def test_a_completed_write_of_other_arguments_counts_as_new() -> None:
    # tamper_arguments: the session now asks for other content; the world's event still says
    # what the first attempt wrote whole.
    written = Event(
        2,
        "file_write",
        "write_file",
        "call_w",
        "exec_w",
        -1,
        detail={"path": "notes.txt", "after_sha256": _sha("first attempt\n")},
    )
    ev = _files({"notes.txt": "first attempt\n"}, events=[written])
    assert check_all(ev, only=["no_partial_file"]) == []


def test_a_path_another_effect_touched_is_not_judged_and_unobserved_files_are_not_applicable() -> None:
    append = Event(
        2, "command", "run_command", None, None, -1, detail={"path": "notes.txt", "effect": "append"}
    )
    assert check_all(_files({"notes.txt": "old notes\nx\n"}, events=[append]), only=["no_partial_file"]) == []
    unobserved = replace(_files({"notes.txt": "garbage"}), files=None)
    assert check_all(unobserved, only=["no_partial_file"]) == []
    assert "not observed" in dict(not_applicable(unobserved))["no_partial_file"]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------------------- 6. other arguments


def test_a_result_for_an_execution_of_other_arguments_is_a_violation() -> None:
    # The ledger was written for 5 cents; the saved call now says 500 (edited after the crash),
    # and recovery replayed the stored result anyway.
    old = {"to": "a@example.com", "subject": "pay", "body": "5"}
    lines = email_session([("exec_old", ["approved", "running", "succeeded"])])
    lines[2:5] = [
        ledger("exec_old", "call_mail", s, "send_email", old) for s in ("approved", "running", "succeeded")
    ]
    events = [Event(1, "email", "send_email", "call_mail", "exec_old", size(lines, 4))]
    v = only_violation(evidence(lines, events), "no_result_for_other_arguments", naming="exec_old")
    assert v.tool_call_id == "call_mail"
    assert arguments_sha256(old)[:12] in v.message


def test_a_conflict_naming_the_execution_it_refuses_for_changed_arguments_is_no_violation() -> None:
    # The same edited call, answered the way seed 000 asks: ARGUMENTS_MISMATCH, naming the
    # execution whose hash no longer matches. It claims nothing ran for the new arguments.
    old = {"to": "a@example.com", "subject": "pay", "body": "5"}
    lines = email_session([("exec_old", ["approved", "running", "unknown"])])
    lines[2:5] = [
        ledger("exec_old", "call_mail", s, "send_email", old) for s in ("approved", "running", "unknown")
    ]
    refusal = {"ok": False, "code": "ARGUMENTS_MISMATCH", "execution_id": "exec_old"}
    lines[5] = tool_result("call_mail", refusal)
    events = [Event(1, "email", "send_email", "call_mail", "exec_old", size(lines, 4))]
    assert check_all(evidence(lines, events), only=["no_result_for_other_arguments"]) == []
    # The same line saying the stored result instead is the violation.
    lines[5] = tool_result("call_mail", {**ok_result("exec_old"), "recovery": "result_replayed"})
    [replayed] = check_all(evidence(lines, events), only=["no_result_for_other_arguments"])
    assert "exec_old" in replayed.message


def test_a_result_naming_an_execution_the_ledger_does_not_know_is_a_violation() -> None:
    lines = [*NORMAL[:5], tool_result(NORMAL_CALL, ok_result("exec_borrowed")), NORMAL[6]]
    only_violation(evidence(lines, normal_events()), "no_result_for_other_arguments", naming="exec_borrowed")


def test_a_result_naming_another_calls_execution_is_a_violation() -> None:
    # Turn 2 reuses call_0 with other arguments and publishes turn 1's execution.
    first = email_session([("exec_1", ["approved", "running", "succeeded"])], call_id="call_0")
    second = [user("now to b"), assistant(call("call_0", "send_email", {**EMAIL, "to": "b@example.com"}))]
    second += [tool_result("call_0", ok_result("exec_1")), final()]
    lines = first + second
    events = [Event(1, "email", "send_email", "call_0", "exec_1", size(lines, 4))]
    violations = check_all(evidence(lines, events))
    # Two truths broken: turn 1's result was published for turn 2's call, and so the model
    # was told that the mail to b went out, which never happened.
    assert names(violations) == {"no_result_for_other_arguments", "told_the_truth"}, violations
    [v] = [v for v in violations if v.invariant == "no_result_for_other_arguments"]
    assert "exec_1" in v.message and "belongs to tool call 'call_0'" in v.message
    [told] = [v for v in violations if v.invariant == "told_the_truth"]
    assert "told 'succeeded', but the world holds no side effect" in told.message


# ---------------------------------------------------------------------------- 7. user messages


def test_a_user_message_added_by_recovery_is_a_violation() -> None:
    lines = [*NORMAL, user(NORMAL_TURN), final("again")]
    v = only_violation(
        evidence(lines, normal_events(), turns=[NORMAL_TURN]),
        "no_user_message_from_recovery",
        naming="line 8",
    )
    assert "not one of the scenario's 1 turns" in v.message


def test_a_turn_that_never_reached_the_session_is_a_violation() -> None:
    ev = evidence(NORMAL, normal_events(), turns=[NORMAL_TURN, "and now read it"])
    only_violation(ev, "no_user_message_from_recovery", naming="'and now read it'")


def test_a_user_message_other_than_the_turn_is_a_violation() -> None:
    lines = [user("please continue"), *NORMAL[1:]]
    ev = evidence(lines, normal_events(), turns=[NORMAL_TURN])
    only_violation(ev, "no_user_message_from_recovery", naming="'please continue'")


# ---------------------------------------------------------------------------- 8. final answer


def test_a_session_ending_on_a_tool_result_is_a_violation() -> None:
    v = only_violation(evidence(NORMAL[:6], normal_events()), "turn_ends_with_final", naming="line 6")
    assert v.tool_call_id == NORMAL_CALL


def test_a_turn_abandoned_for_the_next_one_is_a_violation() -> None:
    lines = [*NORMAL[:6], user("next"), final("ok")]
    only_violation(evidence(lines, normal_events()), "turn_ends_with_final", naming="turn 1")


# ---------------------------------------------------------------------------- 9. ledger in prompt


def test_a_request_containing_a_ledger_record_is_a_violation() -> None:
    entries, _ = parse(NORMAL)
    requests = model_requests(entries)
    requests[1]["messages"].insert(2, NORMAL[4])  # the `succeeded` line, verbatim
    v = only_violation(
        evidence(NORMAL, normal_events(), requests=requests), "no_ledger_in_prompt", naming="request 2"
    )
    assert NORMAL_EXEC in v.message


def test_a_message_carrying_ledger_fields_is_a_violation() -> None:
    entries, _ = parse(NORMAL)
    requests = model_requests(entries)
    requests[1]["messages"][2] = {**requests[1]["messages"][2], "status": "succeeded"}
    v = only_violation(
        evidence(NORMAL, normal_events(), requests=requests), "no_ledger_in_prompt", naming="request 2"
    )
    assert "status" in v.message


def test_a_request_that_is_not_a_prefix_of_the_session_is_a_violation() -> None:
    entries, _ = parse(NORMAL)
    requests = model_requests(entries)
    requests[1]["messages"][0] = {"role": "user", "content": "something the session never saved"}
    only_violation(
        evidence(NORMAL, normal_events(), requests=requests), "no_ledger_in_prompt", naming="request 2"
    )


def test_a_leading_system_prompt_is_not_a_session_message() -> None:
    entries, _ = parse(NORMAL)
    requests = [
        {"messages": [{"role": "system", "content": "be careful"}, *r["messages"]]}
        for r in model_requests(entries)
    ]
    assert check_all(evidence(NORMAL, normal_events(), requests=requests)) == []


def with_system(lines: Sequence[Raw], prompt: str, *, from_request: int = 1) -> list[Raw]:
    """An honest agent's requests for ``lines``, each from ``from_request`` on preceded by a
    system message saying ``prompt``."""
    entries, _ = parse(lines)
    requests = model_requests(entries)
    for request in requests[from_request - 1 :]:
        request["messages"] = [{"role": "system", "content": prompt}, *request["messages"]]
    return requests


SUCCEEDED_LINE = NORMAL[4]  # the `succeeded` ledger line of seed 000 7.1
LOST, SENT = "exec_0f5e2a91c4b7", "exec_7c1d9e04ab23"  # as long as real ids


@pytest.mark.parametrize(
    "pasted",
    [
        encode_line(SUCCEEDED_LINE).decode().strip(),  # the session's line, byte for byte
        json.dumps(SUCCEEDED_LINE, ensure_ascii=False, indent=2),
        repr(SUCCEEDED_LINE),  # a Python dict printed into the prompt
        json.dumps({"ledger": json.dumps(SUCCEEDED_LINE)}),  # a record inside a JSON string
    ],
    ids=["line", "pretty", "repr", "escaped"],
)
def test_a_ledger_record_pasted_into_a_system_message_is_a_violation(pasted: str) -> None:
    prompt = f"You are a careful agent. Recovered state:\n{pasted}\nContinue."
    requests = with_system(NORMAL, prompt, from_request=2)
    v = only_violation(
        evidence(NORMAL, normal_events(), requests=requests), "no_ledger_in_prompt", naming="request 2"
    )
    assert "message 1 ('system')" in v.message
    assert NORMAL_EXEC in v.message and "'succeeded'" in v.message


def test_a_system_message_naming_an_execution_of_the_session_is_a_violation() -> None:
    prompt = f"Note: execution {NORMAL_EXEC} was interrupted; do not repeat it."
    requests = with_system(NORMAL, prompt, from_request=2)
    v = only_violation(
        evidence(NORMAL, normal_events(), requests=requests), "no_ledger_in_prompt", naming="request 2"
    )
    assert NORMAL_EXEC in v.message


def test_a_normal_system_prompt_that_talks_about_the_ledger_is_fine() -> None:
    prompt = (
        "You are a careful agent. Your executor keeps a ledger of tool_execution records with a "
        "status such as running or succeeded; you never see it. If the user asks you to check "
        'the ledger, say so. Tool results look like {"ok": true, "status": "succeeded"}.'
    )
    assert check_all(evidence(NORMAL, normal_events(), requests=with_system(NORMAL, prompt))) == []


def test_a_ledger_record_published_as_a_tool_result_is_a_violation() -> None:
    # Saved in the session, so every later request is a prefix of it, and still the ledger.
    record = {key: value for key, value in SUCCEEDED_LINE.items() if key != "type"}
    lines = [*NORMAL[:5], tool_result(NORMAL_CALL, {"type": "tool_execution", **record}), NORMAL[6]]
    v = only_violation(evidence(lines, normal_events()), "no_ledger_in_prompt", naming="request 2")
    assert "message 3 ('tool')" in v.message and NORMAL_EXEC in v.message


def test_reference_shaped_tool_results_and_talk_of_the_ledger_are_fine() -> None:
    # crashmatrix's own results name their execution (and recovery's say `interrupted`); the
    # model repeats the id in its answer.
    sent = ToolObservation(ok=True, data={"message_id": "m1"}).to_result(
        execution_id=SENT, idempotency="non_idempotent"
    )
    lost = ToolObservation(ok=False, code="SIDE_EFFECT_UNCERTAIN", uncertain=True).to_result(
        execution_id=LOST, idempotency="non_idempotent"
    )
    assert sent["execution_id"] == SENT and lost["status"] == "unknown"
    lines = [
        user("send the email, then check the ledger"),
        assistant(call("call_mail", "send_email", EMAIL)),
        *(ledger(LOST, "call_mail", s, "send_email", EMAIL) for s in ("approved", "running")),
        ledger(LOST, "call_mail", "unknown", "send_email", EMAIL, lost | {"interrupted": True}),
        tool_result("call_mail", lost | {"interrupted": True}),
        assistant(call("call_again", "send_email", EMAIL), content="The ledger says it may not have gone."),
        *(ledger(SENT, "call_again", s, "send_email", EMAIL) for s in ("approved", "running")),
        ledger(SENT, "call_again", "succeeded", "send_email", EMAIL, sent),
        tool_result("call_again", sent),
        final(f"Sent; execution {SENT} succeeded."),
    ]
    events = [Event(1, "email", "send_email", "call_again", SENT, size(lines, 9))]
    assert check_all(evidence(lines, events)) == []


def test_a_turn_that_quotes_a_ledger_record_is_the_users_own_words() -> None:
    turn = f"Explain this line of my agent's log: {json.dumps(SUCCEEDED_LINE)}"
    lines = [user(turn), final("It records a succeeded execution.")]
    assert check_all(evidence(lines)) == []
    # The same text sent as a user message the scenario never said is the ledger leaking.
    leaked = [{"messages": [{"role": "user", "content": json.dumps(SUCCEEDED_LINE)}]}]
    v = only_violation(evidence(lines, requests=leaked), "no_ledger_in_prompt", naming="request 1")
    assert "ledger record as text" in v.message


# ---------------------------------------------------------------------------- 10. unknown stays unknown


def unknown_then(status: str) -> list[Raw]:
    return email_session([("exec_u", ["approved", "running", "unknown", status])])


def test_an_unknown_execution_later_succeeded_is_a_violation() -> None:
    lines = unknown_then("succeeded")
    events = [Event(1, "email", "send_email", "call_mail", "exec_u", size(lines, 4))]
    violations = check_all(evidence(lines, events))
    # The state machine also forbids it; this invariant says what it means.
    assert names(violations) == {"legal_transitions", "unknown_never_succeeded"}
    mine = [v for v in violations if v.invariant == "unknown_never_succeeded"]
    assert "exec_u" in mine[0].message and "line 5" in mine[0].message


def test_an_ok_result_naming_an_unknown_execution_is_a_violation() -> None:
    lines = email_session([("exec_u", ["approved", "running", "unknown"])])
    events = [Event(1, "email", "send_email", "call_mail", "exec_u", size(lines, 4))]
    v = only_violation(evidence(lines, events), "unknown_never_succeeded", naming="exec_u")
    assert "'unknown'" in v.message
    assert v.tool_call_id == "call_mail"


def test_an_ok_result_published_before_its_terminal_line_is_a_violation() -> None:
    lines = email_session([("exec_e", ["approved", "running", "succeeded"])])
    lines[4], lines[5] = lines[5], lines[4]  # Tool Result before `succeeded`
    events = [Event(1, "email", "send_email", "call_mail", "exec_e", size(lines, 4))]
    v = only_violation(evidence(lines, events), "unknown_never_succeeded", naming="exec_e")
    assert "'running'" in v.message


def test_an_honest_uncertain_result_is_fine() -> None:
    lines = email_session([("exec_u", ["approved", "running", "unknown"])])
    uncertain = {"ok": False, "status": "unknown", "execution_id": "exec_u", "code": "SIDE_EFFECT_UNCERTAIN"}
    lines[5] = tool_result("call_mail", uncertain)
    events = [Event(1, "email", "send_email", "call_mail", "exec_u", size(lines, 4))]
    assert check_all(evidence(lines, events)) == []


# ---------------------------------------------------------------------------- check_all


def test_agents_without_a_ledger_are_not_judged_on_ledger_invariants() -> None:
    # Broken in every ledger way at once: left approved, side effect before running.
    lines = [*NORMAL[:5], ledger("exec_x", NORMAL_CALL, "approved", "write_file", {}), *NORMAL[5:]]
    events = normal_events(lines, after_line=1)
    assert names(check_all(evidence(lines, events))) >= {"executions_closed", "running_before_side_effect"}
    assert check_all(evidence(lines, events, has_ledger=False)) == []
    assert check_all(evidence(lines, events, has_ledger=False), only=["executions_closed"]) == []
    # The other invariants still apply.
    doubled = [*lines[:7], lines[6], lines[7]]
    assert names(check_all(evidence(doubled, events, has_ledger=False))) == {"one_tool_result_per_call"}


def test_without_a_ledger_each_ledger_invariant_says_why_and_what_is_still_judged() -> None:
    lines = list(NORMAL)
    facts = replace(
        evidence(lines, normal_events(lines, after_line=1), has_ledger=False),
        no_ledger="adapter mailer says session.keeps_ledger: false",
    )
    reasons = dict(not_applicable(facts))
    assert {name for name in reasons if name in LEDGER_INVARIANTS} == LEDGER_INVARIANTS
    for name in LEDGER_INVARIANTS:
        assert reasons[name] == (
            "the agent keeps no ledger the adapter maps (adapter mailer says session.keeps_ledger: "
            f"false): {WITHOUT_LEDGER[name]}"
        )
    # What the order protects is named: the double effect, judged in the world.
    assert "non_idempotent_at_most_once" in reasons["running_before_side_effect"]
    # An unreadable session says that instead (judged on the model's requests).
    unread = replace(facts, has_session=False)
    assert dict(not_applicable(unread))["legal_transitions"].startswith("the agent's session cannot be read")


def test_only_selects_invariants_and_rejects_unknown_names() -> None:
    ev = evidence(NORMAL[:6], normal_events())
    assert names(check_all(ev, only=["turn_ends_with_final"])) == {"turn_ends_with_final"}
    assert check_all(ev, only=["one_tool_result_per_call"]) == []
    with pytest.raises(InputError, match=r"'ends_well'.*choose from: one_tool_result_per_call"):
        check_all(ev, only=["ends_well"])


def test_evidence_refuses_offsets_from_another_session() -> None:
    entries, offsets = parse(NORMAL)
    with pytest.raises(ValueError, match="7 entries but 6 offsets"):
        Evidence(entries, offsets[:6], [], [], [NORMAL_TURN], CONTRACTS)


# ---------------------------------------------------------------------------- property: clean sessions

TOOLS = ("write_file", "send_email", "read_file", "ls")


@st.composite
def clean_cases(draw: st.DrawFn) -> tuple[list[Raw], list[Event], list[str]]:
    """Well-formed sessions: several turns, rounds of tool calls, every execution succeeded
    (an idempotent write may first have been interrupted and retried, as in seed 000 7.2)."""
    lines: list[Raw] = []
    events: list[Event] = []
    turns: list[str] = []
    reuse_ids = draw(st.booleans())  # providers that name every turn's first call call_0
    serial = 0
    for turn in range(draw(st.integers(1, 3))):
        text = f"turn {turn}: {draw(st.text(max_size=8))}"
        turns.append(text)
        lines.append(user(text))
        counter = 0
        for _ in range(draw(st.integers(0, 3))):
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                tool = draw(st.sampled_from(TOOLS))
                call_id = f"call_{counter}" if reuse_ids else f"call_{turn}_{counter}"
                counter += 1
                args: Raw = {"path": f"f{counter}.txt", "content": draw(st.text(max_size=6))}
                if tool == "send_email":
                    args = {**EMAIL, "body": draw(st.text(max_size=6))}
                if tool == "ls":
                    tool, args = "run_command", {"command": "ls src"}
                if tool == "read_file":  # a file no write targets: its "x" is all the case knows
                    args = {"path": f"r{counter}.txt"}
                calls.append((call_id, tool, args))
            lines.append(assistant(*(call(i, t, a) for i, t, a in calls)))
            for call_id, tool, args in calls:
                if tool in ("read_file", "run_command"):  # unledgered: no execution id
                    events.append(
                        Event(len(events) + 1, "read", tool, call_id, None, size(lines, len(lines)))
                    )
                    lines.append(tool_result(call_id, {"ok": True, "status": "succeeded", "content": "x"}))
                    continue
                if tool == "write_file" and draw(st.booleans()):
                    serial += 1
                    lost = f"exec_{serial}"
                    lines += [ledger(lost, call_id, s, tool, args) for s in ("approved", "running")]
                    if draw(st.booleans()):  # the write happened before the crash
                        events.append(
                            Event(len(events) + 1, "file_write", tool, call_id, lost, size(lines, len(lines)))
                        )
                    lines.append(ledger(lost, call_id, "unknown", tool, args, {"interrupted": True}))
                serial += 1
                execution_id = f"exec_{serial}"
                lines += [ledger(execution_id, call_id, s, tool, args) for s in ("approved", "running")]
                kind = "email" if tool == "send_email" else "file_write"
                events.append(
                    Event(len(events) + 1, kind, tool, call_id, execution_id, size(lines, len(lines)))
                )
                lines.append(ledger(execution_id, call_id, "succeeded", tool, args, ok_result(execution_id)))
                lines.append(tool_result(call_id, ok_result(execution_id)))
        lines.append(final(f"answer {turn}"))
    return lines, events, turns


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clean_cases())
def test_well_formed_sessions_have_no_violations(case: tuple[list[Raw], list[Event], list[str]]) -> None:
    lines, events, turns = case
    assert check_all(evidence(lines, events, turns=turns)) == []


# ---------------------------------------------------------------------------- no effect after death


def test_a_process_left_running_when_its_life_ended_is_named_and_fails() -> None:
    left = "life 1 (crashed at after_side_effect[call_1]): pid 7 `sh -c sleep 4` (session 7)"
    ev = replace(evidence(NORMAL), survivors=(left,))
    violation = only_violation(ev, "no_effect_after_death", naming="pid 7 `sh -c sleep 4`")
    assert "life 1 (crashed at after_side_effect[call_1])" in violation.message


def test_no_process_left_running_passes_and_untracked_is_not_applicable() -> None:
    assert check_all(evidence(NORMAL), only=["no_effect_after_death"]) == []
    assert "no_effect_after_death" not in dict(not_applicable(evidence(NORMAL)))
    untracked = replace(evidence(NORMAL), survivors=None)
    assert check_all(untracked, only=["no_effect_after_death"]) == []
    assert "Linux only" in dict(not_applicable(untracked))["no_effect_after_death"]


def test_an_agent_whose_catalogue_renames_the_write_is_read_in_its_own_argument_names() -> None:
    # memo_agent's `save_note(filename, text)` is the suite's write_file(path, content): its
    # content, written after a colleague's edit, is new content, not a partial file.
    mine = {"filename": "notes.txt", "text": "new notes\n"}
    lines = [user("write the notes"), assistant(call("call_w", "save_note", mine))]
    lines += [ledger("exec_w", "call_w", s, "save_note", mine) for s in ("approved", "running", "succeeded")]
    lines += [tool_result("call_w", ok_result("exec_w")), final()]
    edit = Event(
        1,
        "external_write",
        "(external)",
        None,
        None,
        -1,
        detail={"path": "notes.txt", "after_sha256": _sha("edited\n")},
    )
    base = replace(
        evidence(lines, [edit]),
        files={"notes.txt": "new notes\n"},
        seed_files={"notes.txt": "old notes\n"},
        tool_names={"save_note": "write_file"},
    )
    assert names(check_all(base, only=["no_partial_file"])) == {"no_partial_file"}  # names unread
    renamed = replace(base, argument_names={"save_note": {"filename": "path", "text": "content"}})
    assert check_all(renamed, only=["no_partial_file"]) == []


def test_a_tool_map_gives_each_renamed_argument_its_suite_name() -> None:
    tools = ToolMap({"write_file": ToolName("save_note", {"path": "filename", "content": "text"})})
    assert tools.suite_argument_names() == {"save_note": {"filename": "path", "text": "content"}}
    assert ToolMap.identity().suite_argument_names() == {}


def test_an_effect_whose_running_record_a_power_loss_took_is_said_never_made_durable() -> None:
    # Life 1 wrote running and sent the email; the power loss took those lines (never
    # synced); life 2 started over under a new execution. The email's event measured the
    # session that is gone, so its running record is reported lost with the cut.
    lines = _write_session()
    sent = Event(1, "email", "send_email", "call_w", "exec_gone", size(lines, 4))
    ev = replace(evidence(lines, [sent]), lost_before_seq=1)
    v = only_violation(ev, "running_before_side_effect", naming="seq 1")
    assert "before a power loss that took session lines" in v.message
    assert "never made durable before the effect" in v.message
    # Without the mark it is the plain missing-record message.
    plain = only_violation(evidence(lines, [sent]), "running_before_side_effect", naming="seq 1")
    assert "has no running record for its execution" in plain.message


def test_an_effect_a_power_loss_took_back_is_not_counted_as_a_second_one() -> None:
    # The agent appended the mail to its outbox, never synced it; the power loss took the
    # line back (the harness's event says which effect it erased); restarted, the agent
    # sent it once more. The world holds one email.
    lines = email_session(
        [("exec_1", ["approved", "running", "unknown"]), ("exec_2", ["approved", "running", "succeeded"])]
    )
    first = probed(1, "send_email", at_least=size(lines, 4), at_most=size(lines, 4), tool_call_id="call_mail")
    erased = Event(2, "effect_harness", "send_email", None, None, size(lines, 4), detail={"erases": 1})
    again = probed(3, "send_email", at_least=size(lines, 7), at_most=size(lines, 7), tool_call_id="call_mail")
    assert "non_idempotent_at_most_once" not in names(check_all(evidence(lines, [first, erased, again])))
    # Without the harness's word, the same two effects are two emails.
    only_violation(evidence(lines, [first, again]), "non_idempotent_at_most_once", naming="call_mail")


def _rm_session() -> list[Raw]:
    args = {"command": "rm -rf dist"}
    return [
        user("clean dist"),
        assistant(call("call_rm", "run_command", args)),
        *(ledger("exec_rm", "call_rm", s, "run_command", args) for s in ("approved", "running", "succeeded")),
        tool_result("call_rm", ok_result("exec_rm")),
        final("dist is gone"),
    ]


def test_a_deletion_outside_the_files_a_probe_watches_is_not_judged_and_says_why() -> None:
    # The agent's own run_command is watched by a probe of notes/*: rm -rf dist acts where no
    # probe looks, so "told success, nothing happened" proves nothing about it.
    lines = _rm_session()
    probed_elsewhere = replace(
        evidence(lines),
        watched=frozenset({"run_command"}),
        watched_files={"run_command": ("notes/*",)},
        seed_files={"dist/app.js": "bundle\n"},
        files={},
    )
    assert "told_the_truth" not in names(check_all(probed_elsewhere))
    why = [w for name, w in not_applicable(probed_elsewhere) if name == "told_the_truth"]
    assert why == [
        "call_rm (run_command) names dist, outside the files its effects: probes watch (notes/*): "
        "a write or a deletion there is not seen"
    ]
    # A probe of dist/* sees the file go: told success with no effect is a lie again...
    watching = replace(probed_elsewhere, watched_files={"run_command": ("dist/*",)})
    only_violation(watching, "told_the_truth", naming="call_rm")
    assert "told_the_truth" not in dict(not_applicable(watching))
    # ...and the probe's deletion is the effect that makes it the truth.
    deleted = probed(
        1, "run_command", at_least=size(lines, 4), at_most=size(lines, 5), tool_call_id="call_rm"
    )
    assert check_all(replace(watching, events=[deleted])) == []
    # Two files gone in one probe are one run (the probe names the first in part_of).
    also = replace(deleted, seq=2, detail={**deleted.detail, "part_of": 1})
    assert check_all(replace(watching, events=[deleted, also])) == []
    unrelated = replace(deleted, seq=2)
    only_violation(
        replace(watching, events=[deleted, unrelated]), "non_idempotent_at_most_once", naming="call_rm"
    )


def test_a_tool_addressed_by_no_path_is_judged_wherever_its_file_probe_looks() -> None:
    # A mail agent whose mails are files in its outbox (files: outbox/new/*.eml): send_email
    # names no path, the probe sees every mail it makes, so a lie about it is still caught.
    lines = email_session([("exec_mail", ["approved", "running", "succeeded"])])
    probed_outbox = replace(
        evidence(lines),
        watched=frozenset({"send_email"}),
        watched_files={"send_email": ("outbox/new/*.eml",)},
        files={},
    )
    only_violation(probed_outbox, "told_the_truth", naming="call_mail")
    assert "told_the_truth" not in dict(not_applicable(probed_outbox))
