"""reference_agent.lease: one process at a time resumes a session. A second one stops before
it reads or writes anything, naming the holder; the lease dies with its holder, SIGKILL
included. The other processes are forks of this test process (a fast test)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from crashmatrix.reference_agent.lease import SessionLease, SessionLeased, lease_path
from crashmatrix.reference_agent.mutants import NoSessionLease
from tests.reference_agent.rig import Rig
from tests.waiting import wait_until


def _in_child(session: Path, ready: Path) -> int:
    """A forked process that takes the lease, says so, and waits to be killed."""
    pid = os.fork()
    if pid == 0:
        try:
            SessionLease.acquire(session)
            ready.write_text("held")
            signal.pause()
        finally:
            os._exit(0)
    return pid


def test_a_second_process_finds_the_session_leased_and_is_told_who_holds_it(tmp_path: Path) -> None:
    session = tmp_path / ".agent_state" / "session-x.jsonl"
    pid = _in_child(session, tmp_path / "ready")
    try:
        assert wait_until((tmp_path / "ready").exists, within=10.0)
        with pytest.raises(SessionLeased) as leased:
            SessionLease.acquire(session)
        assert leased.value.holder == pid
        assert f"leased by pid {pid}" in str(leased.value) and "\n" not in str(leased.value)
        assert not session.exists() and lease_path(session).read_bytes() == b""  # nothing written
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    # SIGKILLed, the holder left no stale lease: the kernel dropped its flock.
    SessionLease.acquire(session).release()


def test_the_agent_on_a_leased_session_stops_before_it_touches_the_session(rig: Rig) -> None:
    torn = b'{"type":"message","message":{"role":"user","content":"hal'
    rig.write_session([{"type": "message", "message": {"role": "user", "content": "hi"}}], tail=torn)
    before = rig.session.read_bytes()
    held = SessionLease.acquire(rig.session)
    try:
        with pytest.raises(SessionLeased):
            rig.agent([])
        # Not even the torn tail was set aside (opening the writer would have written).
        assert rig.session.read_bytes() == before
    finally:
        held.release()
    agent, _ = rig.agent([])
    assert rig.session.read_bytes() != before  # with the lease, the torn tail is set aside
    agent.close()


def test_the_mutant_without_a_lease_opens_a_session_another_holds(tmp_path: Path) -> None:
    session = tmp_path / ".agent_state" / "session-x.jsonl"
    held = SessionLease.acquire(session)
    try:
        mutant = NoSessionLease(
            session_path=session,
            session_id="x",
            model=None,  # type: ignore[arg-type]
            toolbox=None,  # type: ignore[arg-type]
            contracts={},
            approver=None,  # type: ignore[arg-type]
        )
        assert mutant.lease is None  # no SessionLeased: a second resumer goes on
        mutant.close()
    finally:
        held.release()
