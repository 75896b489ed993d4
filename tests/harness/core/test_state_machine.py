"""The runtime's state machine, explored by Hypothesis in one process.

Rules run turns through the real ``reference_agent.agent.Agent`` against a mock_tools
``World``, "crash" it at any boundary (an exception from the hook: everything before it is
already fsynced, as under SIGKILL), tear the session's tail (half a line, as a writer that
died mid-append leaves it), and restart it on the same session and world. After every step
the durable evidence is checked: the session reads back (a torn tail is allowed, corruption
is not), every execution's history is a legal ledger transition sequence, ``running`` was on
disk before each side effect, no non-idempotent call caused more side effects than it has
``running`` records (nor more than one), and a finished agent leaves no pending tool call.

No fork here (crashmatrix's forked cases are ``test_explore.py``): a few hundred steps run in
seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from crashmatrix.harness.core.boundaries import BOUNDARIES
from crashmatrix.harness.core.ledger import (
    check_transitions,
    executions_by_call,
    pending_tool_calls,
    tool_call_sites,
)
from crashmatrix.harness.core.records import ExecutionRecord, Message, ToolCall
from crashmatrix.harness.core.session_log import encode_line
from crashmatrix.harness.session_file import read_session
from crashmatrix.harness.verdict.invariants import Evidence, check_all
from crashmatrix.mock_tools import MockToolbox, World, catalogue
from crashmatrix.reference_agent.agent import Agent
from crashmatrix.reference_agent.approval import ScriptedApprover
from tests.tls import CONTEXT

SESSION_ID = "sm"
CONTRACTS = catalogue()
# Tools that need no HTTP (the order API is respx-mocked only in forked lives).
CALLS: Sequence[tuple[str, Mapping[str, Any]]] = (
    ("send_email", {"to": "ada@example.com", "subject": "s", "body": "b"}),
    ("write_file", {"path": "notes.txt", "content": "new\n"}),
    ("write_file", {"path": "fresh.txt", "content": "fresh\n"}),
    ("run_command", {"command": "echo done >> audit.log"}),
    ("run_command", {"command": "npm publish"}),
    ("read_file", {"path": "notes.txt"}),
    ("refund_payment", {"payment_id": "pay_1", "amount_cents": 500}),
)
# Invariants that must hold at EVERY step, a crashed-and-not-yet-recovered session included
# (executions_closed, turn_ends_with_final and one_tool_result_per_call hold only once the
# agent finished; they are checked in ``finished``).
ALWAYS = (
    "legal_transitions",
    "running_before_side_effect",
    "non_idempotent_at_most_once",
    "no_result_for_other_arguments",
    "unknown_never_succeeded",
    "no_user_message_from_recovery",
)


class Crash(BaseException):
    """The in-process SIGKILL: a BaseException, so no ``except Exception`` swallows it."""


class ScriptModel:
    """Answers a user message with the turn's tool calls, anything else with a final answer."""

    def __init__(self) -> None:
        self.calls: dict[int, tuple[ToolCall, ...]] = {}

    def complete(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> Message:
        turn = sum(1 for m in messages if m.get("role") == "user")
        if messages[-1].get("role") == "user":
            return Message(role="assistant", content="", tool_calls=self.calls[turn])
        return Message(role="assistant", content=f"turn {turn} done")


class AgentRuntime(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="crashmatrix-sm-"))
        self.session = self.root / "world" / "workspace" / ".agent_state" / f"session-{SESSION_ID}.jsonl"
        self.world = World.create(
            self.root / "world", session_path=self.session, files={"notes.txt": "old\n"}
        )
        self.http = httpx.Client(verify=CONTEXT)
        self.model = ScriptModel()
        self.turns: list[str] = []
        self.agent: Agent | None = None
        self.crashed = False
        self.start_life(None)

    def start_life(self, crash_at: int | None) -> None:
        """A new process on the same session and world; it dies at its ``crash_at``-th boundary."""
        passed = [0]

        def hook(boundary: str, tool_call_id: str) -> None:
            passed[0] += 1
            if crash_at is not None and passed[0] == crash_at:
                raise Crash(f"{boundary}[{tool_call_id}]")

        self.agent = Agent(
            session_path=self.session,
            session_id=SESSION_ID,
            model=self.model,
            toolbox=MockToolbox(self.world, CONTRACTS, self.http),
            contracts=CONTRACTS,
            approver=ScriptedApprover(),
            hook=hook,
        )

    def die(self) -> None:
        assert self.agent is not None
        self.agent.close()  # the kernel closes a killed process's descriptors too
        self.agent = None
        self.crashed = True

    def live(self, action: Any) -> None:
        try:
            action()
        except Crash:
            self.die()

    @precondition(lambda self: not self.crashed and len(self.turns) < 3)
    @rule(
        picks=st.lists(st.integers(0, len(CALLS) - 1), min_size=1, max_size=3),
        crash_at=st.none() | st.integers(1, 3 * len(BOUNDARIES)),
    )
    def turn(self, picks: list[int], crash_at: int | None) -> None:
        number = len(self.turns) + 1
        # Providers reuse ids across turns: the same ``call_<n>`` in every turn.
        self.model.calls[number] = tuple(
            ToolCall(f"call_{i}", CALLS[p][0], json.dumps(CALLS[p][1])) for i, p in enumerate(picks)
        )
        text = f"turn {number}"
        self.turns.append(text)
        if crash_at is not None:
            assert self.agent is not None
            self.agent.close()
            self.start_life(crash_at)
        agent = self.agent
        assert agent is not None
        self.live(lambda: agent.run_turn(text))

    @precondition(lambda self: not self.crashed)
    @rule()
    def kill_idle(self) -> None:
        """SIGKILL between turns (or after the last): nothing is pending, nothing may change."""
        self.die()

    @precondition(lambda self: self.crashed)
    @rule(crash_at=st.none() | st.integers(1, 2 * len(BOUNDARIES)))
    def restart(self, crash_at: int | None) -> None:
        self.crashed = False
        self.start_life(crash_at)
        agent = self.agent
        assert agent is not None
        self.live(agent.resume)

    @precondition(lambda self: self.crashed)
    @rule(fraction=st.floats(0.1, 0.9))
    def tear_tail(self, fraction: float) -> None:
        """The writer died mid-append: part of a would-be ledger line, no newline."""
        line = encode_line(
            {
                "type": "tool_execution",
                "execution_id": "exec_torn",
                "tool_call_id": "call_0",
                "status": "running",
                "tool_name": "send_email",
            }
        )
        fd = os.open(self.session, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, line[: max(1, int(len(line) * fraction))])
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ invariants
    def evidence(self) -> Evidence:
        log = read_session(self.session)  # raises on corruption: a torn tail is the only tolerance
        return Evidence(log.entries, log.offsets, self.world.events(), (), self.turns, CONTRACTS)

    @invariant()
    def ledger_histories_are_legal(self) -> None:
        entries = read_session(self.session).entries
        for site in tool_call_sites(entries):
            for execution_id, history in executions_by_call(entries, site):
                problem = check_transitions([r.status for r in history])
                assert problem is None, f"{execution_id}: {problem}"

    @invariant()
    def side_effects_never_outnumber_running_records(self) -> None:
        entries = read_session(self.session).entries
        running: dict[str, int] = {}
        for entry in entries:
            if isinstance(entry, ExecutionRecord) and entry.status == "running":
                running[entry.execution_id] = running.get(entry.execution_id, 0) + 1
        for event in self.world.events():
            if event.execution_id and event.kind not in ("fault", "external_write", "read"):
                assert running.get(event.execution_id, 0) >= 1, (
                    f"world event {event.seq} ({event.tool}) for execution {event.execution_id} "
                    "has no running record on disk"
                )

    @invariant()
    def durable_evidence_keeps_the_invariants(self) -> None:
        violations = check_all(self.evidence(), only=ALWAYS)
        assert not violations, [v.message for v in violations]

    @invariant()
    def a_finished_agent_leaves_nothing_pending(self) -> None:
        if self.crashed:
            return
        evidence = self.evidence()
        assert not pending_tool_calls(evidence.entries)
        violations = check_all(
            evidence, only=("executions_closed", "turn_ends_with_final", "one_tool_result_per_call")
        )
        if self.turns:
            assert not violations, [v.message for v in violations]

    def teardown(self) -> None:
        if self.agent is not None:
            self.agent.close()
        self.http.close()
        shutil.rmtree(self.root, ignore_errors=True)


AgentRuntime.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=10,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
TestAgentRuntime = AgentRuntime.TestCase
