"""The reference agent: seed 000's reliable tool loop, plus seed 004's contract-aware recovery.

The write order for one tool call (each line is fsynced before the next step)::

    the model's reply, in memory only             -> boundary after_model_reply
    assistant message with the tool call          -> boundary after_tool_call_saved
    ledger approved | rejected                    -> boundary after_approved
    ledger running (+ plan: base/after hashes)    -> boundary after_running
    the side effect                               -> boundary during_side_effect (between
                                                     its steps, if it has several), then
                                                     boundary after_side_effect
    ledger succeeded | failed | unknown + result  -> boundary before_tool_result
    Tool Result message                           -> boundary after_tool_result

At start-up ``resume()`` finds tool calls without a Tool Result, asks ``recovery.decide`` what
to do with each, publishes their results, and continues the interrupted turn without ever
appending a user message.

Each step is a small method so that deliberately broken variants (the mutants that prove the
harness has teeth) can override exactly one behaviour.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.boundaries import BoundaryHook, no_hook
from crashmatrix.harness.core.contracts import ToolContract, default_contract
from crashmatrix.harness.core.ledger import (
    PendingCall,
    arguments_sha256,
    assert_transition,
    executions_by_call,
    idempotency_key,
    pending_tool_calls,
    tool_call_sites,
)
from crashmatrix.harness.core.records import Entry, ExecutionRecord, Message, MessageEntry, ToolCall
from crashmatrix.harness.core.session_log import prompt_view
from crashmatrix.harness.core.tools import Toolbox, ToolContext, ToolObservation
from crashmatrix.harness.session_file import AppendHook, SessionWriter, read_session
from crashmatrix.reference_agent.approval import Approver
from crashmatrix.reference_agent.lease import SessionLease
from crashmatrix.reference_agent.model import ChatModel
from crashmatrix.reference_agent.recovery import Decision, decide

__all__ = ["Agent", "AgentError", "CallState"]


class AgentError(RuntimeError):
    """The agent cannot go on (a model that never stops, a session it cannot use)."""


@dataclass(frozen=True, slots=True)
class CallState:
    """Identity of one tool call while it is being executed or recovered."""

    call: ToolCall
    turn: int
    contract: ToolContract
    arguments: Mapping[str, Any]
    arguments_sha256: str
    idempotency_key: str


def new_execution_id() -> str:
    return f"exec_{uuid.uuid4().hex}"


class Agent:
    def __init__(
        self,
        *,
        session_path: Path,
        session_id: str,
        model: ChatModel,
        toolbox: Toolbox,
        contracts: Mapping[str, ToolContract],
        approver: Approver,
        hook: BoundaryHook = no_hook,
        before_append: AppendHook | None = None,
        max_rounds: int = 12,
        new_id: Callable[[], str] = new_execution_id,
    ) -> None:
        self.session_path = Path(session_path)
        self.session_id = session_id
        self.model = model
        self.toolbox = toolbox
        self.contracts = contracts
        self.approver = approver
        self.hook = hook
        self.max_rounds = max_rounds
        self.new_id = new_id
        # The lease before anything of the session is read or written: a second process
        # resuming it at the same time stops here (``SessionLeased``; lease.py says why).
        self.lease = self.take_lease()
        # Opening the writer first sets aside a torn final line (kept in a side file) so
        # that what we read next is exactly the complete records.
        self.writer = SessionWriter(self.session_path, before_append=before_append)
        self.entries: list[Entry] = list(read_session(self.session_path).entries)

    # ------------------------------------------------------------------ persistence
    def append(self, entry: Entry) -> None:
        """Durable first, memory second: the in-memory view never runs ahead of the disk."""
        self.writer.append_entry(entry)
        self.entries.append(entry)

    def append_message(self, message: Message) -> None:
        self.append(MessageEntry(message))

    def append_state(
        self,
        state: CallState,
        execution_id: str,
        status: str,
        *,
        previous: str | None,
        result: dict[str, Any] | None = None,
        tool_name: str | None = None,
        **extra: Any,
    ) -> None:
        assert_transition(previous, status)
        self.append(
            ExecutionRecord(
                execution_id=execution_id,
                tool_call_id=state.call.id,
                status=status,
                tool_name=tool_name or state.call.name,
                idempotency_key=state.idempotency_key,
                arguments_sha256=state.arguments_sha256,
                result=result,
                extra=extra,
            )
        )

    def take_lease(self) -> SessionLease | None:
        return SessionLease.acquire(self.session_path)

    def close(self) -> None:
        self.writer.close()
        if self.lease is not None:
            self.lease.release()

    # ------------------------------------------------------------------ identities
    def contract_for(self, name: str) -> ToolContract:
        return self.contracts.get(name) or default_contract(name)

    def make_key(self, call: ToolCall, turn: int, args_sha: str) -> str:
        return idempotency_key(session_id=self.session_id, turn=turn, tool_call=call, args_sha256=args_sha)

    def call_state(self, call: ToolCall, turn: int) -> CallState:
        arguments = call.parsed_arguments()
        contract = self.contract_for(call.name).for_call(arguments)
        sha = arguments_sha256(arguments)
        return CallState(call, turn, contract, arguments, sha, self.make_key(call, turn, sha))

    def prompt(self) -> list[dict[str, Any]]:
        return prompt_view(self.entries)

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [c.tool_schema() for c in self.contracts.values()]

    def turns_started(self) -> int:
        return sum(1 for e in self.entries if isinstance(e, MessageEntry) and e.message.role == "user")

    # ------------------------------------------------------------------ the loop
    def run_turn(self, text: str) -> str:
        """A new user turn. Refuses to start while the previous turn is unfinished."""
        if self.needs_continuation() or pending_tool_calls(self.entries):
            raise AgentError("the previous turn is unfinished; call resume() first")
        self.append_message(Message(role="user", content=text))
        return self.continue_turn()

    def needs_continuation(self) -> bool:
        history = self.prompt()
        if not history:
            return False
        last = history[-1]
        return last.get("role") != "assistant" or bool(last.get("tool_calls"))

    def continue_turn(self) -> str:
        """Ask the model until it answers without tool calls (seed 000's continue_agent_turn)."""
        turn = self.turns_started()
        for _ in range(self.max_rounds):
            reply = self.model.complete(self.prompt(), self.tool_schemas())
            if reply.tool_calls:
                # Nothing of the reply is saved: a restart must ask again, not lose the turn.
                self.hook("after_model_reply", reply.tool_calls[0].id)
            self.append_message(reply)
            if not reply.tool_calls:
                return reply.content or ""
            for call in reply.tool_calls:
                self.hook("after_tool_call_saved", call.id)
                self.run_call(self.call_state(call, turn))
        raise AgentError(
            f"the model asked for tools {self.max_rounds} rounds in a row without a final "
            "answer; stopping the turn (raise max_rounds if this is intended)"
        )

    def resume(self) -> str | None:
        """Start-up: recover every call without a Tool Result, then finish the turn."""
        self.recover()
        if self.needs_continuation():
            return self.continue_turn()
        return None

    # ------------------------------------------------------------------ executing a call
    def publish(self, state: CallState, result: Mapping[str, Any]) -> None:
        self.hook("before_tool_result", state.call.id)
        content = json.dumps(dict(result), ensure_ascii=False)
        self.append_message(Message(role="tool", content=content, tool_call_id=state.call.id))
        self.hook("after_tool_result", state.call.id)

    def rejection(self, state: CallState, execution_id: str) -> dict[str, Any]:
        """Deterministic from status and execution_id, so recovery can rebuild it."""
        return ToolObservation(
            ok=False,
            code="REJECTED",
            content=f"The user rejected {state.call.name}; it was not executed.",
        ).to_result(execution_id=execution_id, idempotency=state.contract.idempotency) | {
            "status": "rejected"
        }

    def preview(self, state: CallState) -> dict[str, Any]:
        return {"tool": state.call.name, "arguments": dict(state.arguments)}

    def run_call(self, state: CallState) -> None:
        """A fresh tool call: approval, then the ledgered execution."""
        if not state.contract.ledger:
            self.run_unledgered(state)
            return
        execution_id = self.new_id()
        if state.contract.approval == "required" and not self.approver.approve(
            state.call, self.preview(state), again=False
        ):
            self.append_state(state, execution_id, "rejected", previous=None)
            self.publish(state, self.rejection(state, execution_id))
            return
        self.approve_execution(state, execution_id, previous=None)
        result = self.execute(state, execution_id)
        self.publish(state, result)

    def approve_execution(self, state: CallState, execution_id: str, *, previous: str | None) -> None:
        self.append_state(
            state,
            execution_id,
            "approved",
            previous=previous,
            idempotency=state.contract.idempotency,
            replay_policy=state.contract.replay_policy,
        )
        self.hook("after_approved", state.call.id)

    def execute(
        self,
        state: CallState,
        execution_id: str,
        *,
        tool: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        recovery: str | None = None,
    ) -> dict[str, Any]:
        """approved -> running (durable) -> side effect -> terminal state with its result."""
        name = tool or state.call.name
        args = state.arguments if arguments is None else arguments
        plan = dict(self.toolbox.plan(name, args))
        extra: dict[str, Any] = {"plan": plan} if plan else {}
        self.append_state(state, execution_id, "running", previous="approved", tool_name=name, **extra)
        self.hook("after_running", state.call.id)
        call_id = state.call.id
        ctx = ToolContext(
            call_id,
            execution_id,
            state.idempotency_key,
            state.arguments_sha256,
            # Between the steps of a multi-step effect: a boundary like the others.
            step=lambda: self.hook("during_side_effect", call_id),
        )
        observation = self.toolbox.execute(name, args, ctx)
        self.hook("after_side_effect", state.call.id)
        result = observation.to_result(execution_id=execution_id, idempotency=state.contract.idempotency)
        if recovery:
            result["recovery"] = recovery
        self.append_state(
            state, execution_id, observation.ledger_status, previous="running", result=result, tool_name=name
        )
        if observation.uncertain and state.contract.recovery == "reconcile" and name == state.call.name:
            # The request went out and the answer was lost: the key lets us ask the service
            # what happened instead of guessing or retrying blindly.
            return self.reconcile(state)
        return result

    def run_unledgered(self, state: CallState) -> None:
        """Read-only tools write no ledger (seed 000: read_file); a retryable failure is
        simply retried once, which is safe because nothing changes."""
        ctx = ToolContext(state.call.id, "", state.idempotency_key, state.arguments_sha256)
        observation = self.toolbox.execute(state.call.name, state.arguments, ctx)
        self.hook("after_side_effect", state.call.id)
        attempts = 1
        if not observation.ok and observation.retryable:
            observation = self.toolbox.execute(state.call.name, state.arguments, ctx)
            attempts = 2
        result = observation.to_result(execution_id=None, idempotency=state.contract.idempotency)
        if attempts > 1:
            result["attempts"] = attempts
        self.publish(state, result)

    # ------------------------------------------------------------------ recovery
    def recover(self) -> list[tuple[str, str]]:
        """Publish a Tool Result for every pending call; returns (tool_call_id, action)."""
        done: list[tuple[str, str]] = []
        for pending in pending_tool_calls(self.entries):
            state = self.call_state(pending.call, pending.site.turn)
            recorded = next((h[0].idempotency_key for _, h in pending.executions if h[0].idempotency_key), "")
            if recorded:
                # The key the first attempt used is what the service knows; a key derived
                # again (by another version of this agent, or another recipe) would not
                # deduplicate against it.
                state = dataclasses.replace(state, idempotency_key=recorded)
            decision = decide(pending, state.contract, state.arguments_sha256)
            self.apply(decision, state, pending)
            done.append((pending.call.id, decision.action))
        return done

    def refresh(self, pending: PendingCall) -> PendingCall:
        return PendingCall(pending.site, executions_by_call(self.entries, pending.site))

    def close_as_unknown(self, state: CallState, pending: PendingCall) -> dict[str, Any]:
        latest = pending.latest
        assert latest is not None
        hint = f" Look it up with {state.contract.lookup_tool}." if state.contract.lookup_tool else ""
        result = ToolObservation(
            ok=False,
            code="SIDE_EFFECT_UNCERTAIN",
            content=(
                f"{latest.tool_name} was running when the agent process stopped; whether its "
                f"side effect happened cannot be confirmed, so it must not be retried blindly.{hint}"
            ),
            uncertain=True,
        ).to_result(execution_id=latest.execution_id, idempotency=state.contract.idempotency)
        result["interrupted"] = True
        self.append_state(
            state,
            latest.execution_id,
            "unknown",
            previous="running",
            result=result,
            tool_name=latest.tool_name,
        )
        return result

    def apply(self, decision: Decision, state: CallState, pending: PendingCall) -> None:
        if decision.close_running:
            self.close_as_unknown(state, pending)
            pending = self.refresh(pending)
        action = decision.action
        latest = pending.latest
        if action == "execute":
            self.run_call(state)
        elif action == "conflict":
            if latest is not None and latest.status in ("approved", "planned"):
                # Approved for other arguments and never started: close it, it will not run.
                self.append_state(
                    state,
                    latest.execution_id,
                    "rejected",
                    previous=latest.status,
                    reason="arguments_mismatch",
                )
            self.publish(state, self.conflict(state, decision.reason))
        elif action == "reask":
            assert latest is not None
            self.reask(state, latest)
        elif action == "rebuild_rejection":
            assert latest is not None
            self.publish(state, self.rejection(state, latest.execution_id) | {"recovery": "rejected_rebuilt"})
        elif action == "replay_result":
            assert latest is not None
            self.replay_stored(state, latest)
        elif action == "retry":
            self.retry(state, recovery="replayed")
        elif action == "ask_then_retry":
            if self.approver.approve(state.call, self.preview(state), again=True):
                self.retry(state, recovery="replayed")
            else:
                self.publish(state, self.uncertain_result(state, pending, "manual", "MANUAL_CHECK_REQUIRED"))
        elif action == "precondition":
            self.precondition(state, pending)
        elif action == "reconcile":
            self.publish(state, self.reconcile(state))
        elif action == "surface_uncertain":
            self.publish(state, self.uncertain_result(state, pending, "side_effect_uncertain"))
        else:
            self.publish(state, self.uncertain_result(state, pending, "manual", "MANUAL_CHECK_REQUIRED"))

    def replay_stored(self, state: CallState, latest: ExecutionRecord) -> None:
        result = dict(latest.result or {})
        if not result:
            result = ToolObservation(ok=False, code="TOOL_ERROR", content="no stored result").to_result(
                execution_id=latest.execution_id, idempotency=state.contract.idempotency
            )
        if "recovery" not in result:
            result["recovery"] = "result_replayed"
        self.publish(state, result)

    def not_executed(self, state: CallState, code: str, content: str) -> dict[str, Any]:
        """A conflict result: nothing ran, so no execution_id, and outcome ``conflict``."""
        result = ToolObservation(ok=False, code=code, content=content).to_result(
            execution_id=None, idempotency=state.contract.idempotency
        )
        result["recovery"] = "conflict"
        return result

    def conflict(self, state: CallState, reason: str) -> dict[str, Any]:
        return self.not_executed(
            state,
            "ARGUMENTS_MISMATCH",
            f"{state.call.name} was not executed and no earlier result was reused: {reason}.",
        )

    def uncertain_result(
        self, state: CallState, pending: PendingCall, outcome: str, code: str = "SIDE_EFFECT_UNCERTAIN"
    ) -> dict[str, Any]:
        latest = pending.latest
        base = dict(latest.result or {}) if latest is not None else {}
        base.pop("interrupted", None)
        base["code"] = code
        base.setdefault("ok", False)
        base.setdefault("metadata", {"retryable": False, "idempotency": state.contract.idempotency})
        if code == "MANUAL_CHECK_REQUIRED":
            base["content"] = (
                f"{state.call.name} may or may not have run before the agent stopped; a person must "
                "check its effect before anything is repeated."
            )
        base["recovery"] = outcome
        return base

    def reask(self, state: CallState, latest: ExecutionRecord) -> None:
        """Approved but never started: the approval may be stale, so ask again; the same
        execution continues because nothing of it ran."""
        eid = latest.execution_id
        if state.contract.approval == "required" and not self.approver.approve(
            state.call, self.preview(state), again=True
        ):
            self.append_state(state, eid, "rejected", previous=latest.status)
            self.publish(state, self.rejection(state, eid) | {"recovery": "reapproval"})
            return
        self.approve_execution(state, eid, previous=latest.status)
        self.publish(state, self.execute(state, eid, recovery="reapproval"))

    def retry(self, state: CallState, *, recovery: str) -> None:
        """A NEW execution_id for the SAME tool_call_id and the same idempotency key."""
        eid = self.new_id()
        self.approve_execution(state, eid, previous=None)
        self.publish(state, self.execute(state, eid, recovery=recovery))

    def precondition(self, state: CallState, pending: PendingCall) -> None:
        plan: Mapping[str, Any] = {}
        for _, history in reversed(pending.executions):
            for record in history:
                if isinstance(record.extra.get("plan"), dict):
                    plan = record.extra["plan"]
            if plan:
                break
        verdict = self.toolbox.check_precondition(state.call.name, state.arguments, plan)
        if verdict.action == "conflict":
            reason = verdict.reason or "the target changed"
            self.publish(
                state, self.not_executed(state, "CONFLICT", f"{state.call.name} was not replayed: {reason}.")
            )
            return
        if verdict.action == "already_applied":
            eid = self.new_id()
            self.approve_execution(state, eid, previous=None)
            self.append_state(state, eid, "running", previous="approved", plan=dict(plan))
            self.hook("after_running", state.call.id)
            result = ToolObservation(
                ok=True,
                data={"path": state.arguments.get(state.contract.path_argument), "applied": False},
                content="The target already has the requested content; nothing was written again.",
            ).to_result(execution_id=eid, idempotency=state.contract.idempotency)
            result["recovery"] = "already_applied"
            self.append_state(state, eid, "succeeded", previous="running", result=result)
            self.publish(state, result)
            return
        if state.contract.replay_policy == "ask" and not self.approver.approve(
            state.call, self.preview(state), again=True
        ):
            self.publish(state, self.uncertain_result(state, pending, "manual", "MANUAL_CHECK_REQUIRED"))
            return
        self.retry(state, recovery="reapplied")

    def reconcile(self, state: CallState) -> dict[str, Any]:
        """Ask the service, by the runtime's key, what the first attempt did."""
        lookup = state.contract.lookup_tool
        assert lookup is not None
        latest = self.refresh_site(state).latest
        found: bool | None = None
        # An execution of the reconcile itself that died after `approved` never started:
        # it continues under its own execution_id instead of being left open.
        resumed = latest if latest is not None and latest.status == "approved" else None
        if resumed is not None and resumed.extra.get("purpose") == "retry_with_key":
            return self.execute(state, resumed.execution_id, recovery="reconciled")
        if latest is not None and latest.tool_name == lookup and latest.status == "succeeded":
            found = bool((latest.result or {}).get("found"))
        if found is None:
            if resumed is not None and resumed.tool_name == lookup:
                eid = resumed.execution_id
            else:
                eid = self.new_id()
                self.append_state(
                    state, eid, "approved", previous=None, tool_name=lookup, purpose="reconcile"
                )
                self.hook("after_approved", state.call.id)
            args = {"idempotency_key": state.idempotency_key}
            self.append_state(state, eid, "running", previous="approved", tool_name=lookup)
            self.hook("after_running", state.call.id)
            ctx = ToolContext(state.call.id, eid, state.idempotency_key, state.arguments_sha256)
            observation = self.toolbox.execute(lookup, args, ctx)
            result = observation.to_result(execution_id=eid, idempotency="idempotent")
            result["recovery"] = "reconciled"
            found = observation.ok and bool(observation.data.get("found"))
            result["found"] = found
            self.append_state(
                state, eid, observation.ledger_status, previous="running", result=result, tool_name=lookup
            )
            if not observation.ok:
                return self.uncertain_result(state, self.refresh_site(state), "side_effect_uncertain")
            if found:
                return result
        # Not found: the first attempt never reached the service. The same key makes the
        # retry safe even if that conclusion were wrong: the service deduplicates by it.
        eid = self.new_id()
        self.append_state(
            state,
            eid,
            "approved",
            previous=None,
            idempotency=state.contract.idempotency,
            purpose="retry_with_key",
        )
        self.hook("after_approved", state.call.id)
        return self.execute(state, eid, recovery="reconciled")

    def refresh_site(self, state: CallState) -> PendingCall:
        site = next(s for s in reversed(tool_call_sites(self.entries)) if s.call.id == state.call.id)
        return PendingCall(site, executions_by_call(self.entries, site))
