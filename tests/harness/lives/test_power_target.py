"""Which file a power loss acts on, per adapter kind, and the proof it acted that the trace
keeps (``harness.lives.power.power_target`` / ``cut_power``). No lives: the adapters are
loaded from the example files and the crashed session is written by hand."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crashmatrix.harness.lives.casedir import session_path_of
from crashmatrix.harness.lives.power import cut_power, power_target, record_for
from crashmatrix.harness.lives.tracer import read_trace

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
NOTES = str(EXAMPLES / "python_agent" / "adapter.yaml")  # kind 2, JSONL session
ORDER_DESK = str(EXAMPLES / "blackbox_agent" / "adapter.yaml")  # kind 3
STATE = str(EXAMPLES / "state_agent" / "adapter.yaml")  # kind 2, SQLite session
STATE_UNREADABLE = str(EXAMPLES / "state_agent" / "adapter-unreadable.yaml")


def _faults(case_dir: Path) -> list[dict[str, object]]:
    return [event for event in read_trace(case_dir) if event.get("event") == "fault"]


def test_a_native_agent_loses_power_on_crashmatrix_s_session(tmp_path: Path) -> None:
    assert power_target("reference", tmp_path) == session_path_of(tmp_path)


def test_a_kind_2_jsonl_agent_loses_power_on_its_own_session_file(tmp_path: Path) -> None:
    target = power_target(NOTES, tmp_path)
    assert target == tmp_path / "world" / "workspace" / ".agent_state" / "notes-agent.jsonl"


@pytest.mark.parametrize(
    ("agent", "why"),
    [
        (ORDER_DESK, "a black box's fsyncs are not visible to the harness"),
        (STATE, "SQLite syncs from its C library"),
        (STATE_UNREADABLE, "cannot read the agent's session"),
    ],
    ids=["kind-3", "sqlite", "unreadable"],
)
def test_a_power_loss_that_cannot_see_the_fsyncs_says_why_and_did_not_act(
    agent: str, why: str, tmp_path: Path
) -> None:
    target = power_target(agent, tmp_path)
    assert isinstance(target, str) and why in target
    assert cut_power(tmp_path, agent, 1) is None
    [fault] = _faults(tmp_path)
    assert fault == {
        "life": 1,
        "event": "fault",
        "fault": "power_loss",
        "acted": False,
        "detail": target,
        "dropped": 0,
    }


def _recorded(agent: str, case_dir: Path, *, synced: bytes, unsynced: bytes = b"") -> Path:
    """The agent's life, by hand: its session existed at the start, then it appended."""
    session = power_target(agent, case_dir)
    assert isinstance(session, Path)
    session.parent.mkdir(parents=True, exist_ok=True)
    session.write_bytes(b"")
    restore = record_for(agent, case_dir)
    assert restore is not None
    try:
        with open(session, "ab") as f:
            f.write(synced)
            f.flush()
            os.fsync(f.fileno())
            f.write(unsynced)
    finally:
        restore()
    return session


def test_the_unsynced_tail_of_a_kind_2_session_is_dropped_and_the_trace_says_so(tmp_path: Path) -> None:
    session = _recorded(NOTES, tmp_path, synced=b'{"synced":1}\n', unsynced=b'{"never synced":2}\n')
    loss = cut_power(tmp_path, NOTES, 1)
    assert loss is not None and loss.dropped == 19
    assert session.read_bytes() == b'{"synced":1}\n'
    assert (tmp_path / "power-lost-1.bin").read_bytes() == b'{"never synced":2}\n'
    [fault] = _faults(tmp_path)
    assert fault["acted"] is True and fault["dropped"] == 19 and fault["changed"] is True
    assert fault["detail"] == (
        "dropped the 19 bytes of notes-agent.jsonl written after its last fsync;"
        " outcome 0 of 2: only what was synced (the pessimistic state)"
    )


def test_a_fully_synced_session_is_the_loss_acting_with_nothing_to_drop(tmp_path: Path) -> None:
    _recorded("reference", tmp_path, synced=b"line\n")
    loss = cut_power(tmp_path, "reference", 2)
    assert loss is not None and not loss.changed
    [fault] = _faults(tmp_path)
    assert fault["acted"] is True and fault["dropped"] == 0 and fault["changed"] is False
    assert "fully synced at the crash (5 bytes)" in str(fault["detail"])


def test_no_session_file_where_the_adapter_says_is_a_loss_that_did_not_act(tmp_path: Path) -> None:
    # A crash point always comes after the agent saved something: no file means nothing
    # was put to the test (an adapter naming a file its agent does not write).
    restore = record_for(NOTES, tmp_path)
    assert restore is not None
    restore()
    cut_power(tmp_path, NOTES, 1)
    [fault] = _faults(tmp_path)
    assert fault["acted"] is False
    assert "no session file notes-agent.jsonl at the crash" in str(fault["detail"])
