"""Where a torn write's bytes went (harness.core.torn_fragments): every fate on hand-made
bytes, and the invariant that fails only the glued one (a correct agent that drops its torn
tail, as LevelDB does, is never red)."""

from __future__ import annotations

import json

from crashmatrix.harness.core.torn_fragments import (
    TornFragment,
    account,
    account_all,
    torn_event,
    torn_fragments,
)
from crashmatrix.harness.verdict.invariants import Evidence, check_all, torn_fragments_accounted

SESSION = "world/workspace/.agent_state/session-case.jsonl"
BEFORE = b'{"type":"message","message":{"role":"user","content":"go"}}\n'
RECORD = (
    b'{"type":"tool_execution","execution_id":"exec_1","tool_call_id":"call_mail",'
    b'"status":"unknown","result":{"interrupted":true}}\n'
)
NEXT = b'{"type":"message","message":{"role":"tool","tool_call_id":"call_mail","content":"x"}}\n'
HALF = RECORD[: len(RECORD) // 2]
FRAGMENT = TornFragment(2, "call_mail", "unknown", SESSION, len(BEFORE), HALF)


def test_a_torn_event_round_trips_through_the_trace_with_its_exact_bytes() -> None:
    cut = "é".encode()[:1]  # a cut may split a UTF-8 character: hex keeps the byte
    event = json.loads(json.dumps(torn_event(2, "call_mail", "unknown", SESSION, 7, HALF + cut)))
    trace = [{"life": 2, "event": "append", "call": "call_mail"}, event, {"life": 2, "event": "crash"}]
    (fragment,) = torn_fragments(trace)
    assert fragment == TornFragment(2, "call_mail", "unknown", SESSION, 7, HALF + cut)
    assert fragment.point == "torn_write[call_mail:unknown]"


def test_a_fragment_the_next_writer_cut_is_dropped_or_set_aside_where_it_kept_it() -> None:
    final = BEFORE + RECORD + NEXT  # the same record written again, whole, after the cut
    assert account(FRAGMENT, final).fate == "dropped"
    aside = account(FRAGMENT, final, {"session-case.jsonl.torn-60": HALF, "session-case.jsonl.lease": b""})
    assert (aside.fate, aside.acceptable) == ("set_aside", True)
    assert "session-case.jsonl.torn-60" in aside.where
    assert account(FRAGMENT, None).fate == "dropped"  # the file is gone


def test_a_fragment_no_life_wrote_after_is_the_torn_tail() -> None:
    fate = account(FRAGMENT, BEFORE + HALF)
    assert (fate.fate, fate.acceptable) == ("torn_tail", True)
    assert "line 2 (byte 60)" in fate.where


def test_a_fragment_ended_with_a_newline_is_kept_unreadable_not_glued() -> None:
    fate = account(FRAGMENT, BEFORE + HALF + b"\n" + NEXT)
    assert (fate.fate, fate.acceptable) == ("kept_unreadable", True)


def test_a_record_appended_onto_the_fragment_is_glued() -> None:
    fate = account(FRAGMENT, BEFORE + HALF + NEXT)
    assert (fate.fate, fate.acceptable) == ("glued", False)
    assert "line 2 (byte 60)" in fate.where and '{"type":"message"' in fate.where
    # Found wherever the agent moved it (a rewrite of the file), not only at its offset.
    assert account(FRAGMENT, NEXT + BEFORE + HALF + NEXT).fate == "glued"


def test_only_a_glued_fragment_breaks_the_invariant() -> None:
    cases = {
        "dropped": BEFORE + RECORD,
        "torn_tail": BEFORE + HALF,
        "kept_unreadable": BEFORE + HALF + b"\n",
        "glued": BEFORE + HALF + NEXT,
    }
    fates = account_all([FRAGMENT] * len(cases), {SESSION: None})
    assert [f.fate for f in fates] == ["dropped"] * len(cases)
    for fate_name, final in cases.items():
        (fate,) = account_all([FRAGMENT], {SESSION: final})
        assert fate.fate == fate_name
        facts = Evidence(entries=(), offsets=(), events=(), requests=(), turns=(), contracts={}, torn=(fate,))
        broken = torn_fragments_accounted(facts)
        assert [v.invariant for v in check_all(facts, only=["torn_fragments_accounted"])] == [
            v.invariant for v in broken
        ]
        assert bool(broken) == (fate_name == "glued"), fate_name
        if broken:
            assert broken[0].tool_call_id == "call_mail"
            assert "life 2's torn_write[call_mail:unknown]" in broken[0].message


def test_a_supervisors_cut_after_the_life_is_the_tear_of_that_life() -> None:
    # A foreign agent's life writes its half line to the supervisor's scratch file; once it is
    # dead the supervisor cuts the agent's own line and says so after: that one counts.
    scratch = torn_event(1, "call_mail", "running", "torn-write.part", 0, HALF)
    cut = torn_event(1, "call_mail", "running", SESSION, 61, HALF)
    later = torn_event(2, "call_mail", "unknown", SESSION, 61, HALF)
    assert [(f.life, f.path) for f in torn_fragments([scratch, cut, later])] == [(1, SESSION), (2, SESSION)]
