"""Deliberately broken variants of the reference agent: each has ONE bug real agents have.

A harness is worth what it catches. Each mutant overrides one step of ``Agent``; the suite
(and ``tests/harness/test_teeth.py``) must fail on every one of them. Select one with
``--agent=reference_agent.mutants:NAME``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from harness.ledger import PendingCall
from harness.records import MessageEntry
from harness.session import SessionWriter

from .adapter import ReferenceAdapter
from .agent import Agent, CallState
from .recovery import Decision

__all__ = ["MUTANTS"]


class BlindRetry(Agent):
    """Retries any interrupted call with a new execution, whatever its contract says
    (the email goes out twice)."""

    def apply(self, decision: Decision, state: CallState, pending: PendingCall) -> None:
        if decision.close_running:
            self.close_as_unknown(state, pending)
            self.retry(state, recovery="replayed")
            return
        super().apply(decision, state, pending)


class RunningAfterSideEffect(Agent):
    """Writes ``running`` only after the tool returned: a crash in between leaves a side
    effect the ledger says never started."""

    def execute(
        self,
        state: CallState,
        execution_id: str,
        *,
        tool: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        recovery: str | None = None,
    ) -> dict[str, Any]:
        from harness.tooling import ToolContext

        name = tool or state.call.name
        args = state.arguments if arguments is None else arguments
        ctx = ToolContext(state.call.id, execution_id, state.idempotency_key, state.arguments_sha256)
        observation = self.toolbox.execute(name, args, ctx)
        self.hook("after_side_effect", state.call.id)
        self.append_state(state, execution_id, "running", previous="approved", tool_name=name)
        self.hook("after_running", state.call.id)
        result = observation.to_result(execution_id=execution_id, idempotency=state.contract.idempotency)
        if recovery:
            result["recovery"] = recovery
        self.append_state(
            state, execution_id, observation.ledger_status, previous="running", result=result, tool_name=name
        )
        return result


class LedgerInPrompt(Agent):
    """Sends every session record to the model, ledger lines included."""

    def prompt(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for entry in self.entries:
            if isinstance(entry, MessageEntry):
                out.append(entry.message.to_json())
            else:
                out.append({"role": "user", "content": json.dumps(entry.to_json())})
        return out


class RecoveryAppendsUser(Agent):
    """Resumes an interrupted turn by sending a new user message ("please continue")."""

    def resume(self) -> str | None:
        self.recover()
        if self.needs_continuation():
            from harness.records import Message

            self.append_message(Message(role="user", content="Please continue."))
            return self.continue_turn()
        return None


class TornTailBlocksForever(Agent):
    """Treats a torn final line as fatal and waits for a person who never comes."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(self.writer, SessionWriter) and self.writer.repaired is not None:
            while True:  # pragma: no cover - killed by the harness's deadline
                time.sleep(1)


def _adapter(agent_class: type[Agent], name: str) -> type[ReferenceAdapter]:
    return type(
        f"{agent_class.__name__}Adapter", (ReferenceAdapter,), {"agent_class": agent_class, "name": name}
    )


MUTANTS: dict[str, type[Agent]] = {
    "blind_retry": BlindRetry,
    "running_after_side_effect": RunningAfterSideEffect,
    "ledger_in_prompt": LedgerInPrompt,
    "recovery_appends_user": RecoveryAppendsUser,
    "torn_tail_blocks_forever": TornTailBlocksForever,
}

blind_retry = _adapter(BlindRetry, "blind_retry")
running_after_side_effect = _adapter(RunningAfterSideEffect, "running_after_side_effect")
ledger_in_prompt = _adapter(LedgerInPrompt, "ledger_in_prompt")
recovery_appends_user = _adapter(RecoveryAppendsUser, "recovery_appends_user")
torn_tail_blocks_forever = _adapter(TornTailBlocksForever, "torn_tail_blocks_forever")
