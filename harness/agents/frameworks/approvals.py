"""The scenario's person for framework agents that ask (the Agents SDK's ``needs_approval``,
PydanticAI's deferred tools): answers by tool name, remembers each question durably, and the
rejection the model is told in crashmatrix's vocabulary. One implementation for both adapters
(LangGraph answers with ``Command(resume=...)`` and keeps its own, in its checkpoints)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crashmatrix.harness.agents.protocol import LifeContext
from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.records import ToolCall
from crashmatrix.harness.core.tools import ToolObservation
from crashmatrix.harness.session_file import fsync_directory
from crashmatrix.reference_agent.approval import ScriptedApprover

__all__ = ["Answer", "Approvals", "rejection"]


@dataclass(frozen=True)
class Answer:
    approved: bool
    again: bool  # the person was asked about this call in an earlier life


def rejection(tool: str, contract: ToolContract | None, *, again: bool) -> str:
    """What the model is told of a call the person said no to, in the Tool Results' own
    vocabulary (the SDK's default text, "Tool execution was not approved.", says nothing a
    JSON-reading agent would recognise). ``recovery: reapproval`` when asked again after a
    restart, as the reference agent says it."""
    idempotency = contract.idempotency if contract else "non_idempotent"
    result = ToolObservation(
        ok=False, code="REJECTED", content=f"The user rejected {tool}; it was not executed."
    ).to_result(execution_id=None, idempotency=idempotency) | {"status": "rejected"}
    if again:
        result["recovery"] = "reapproval"
    return json.dumps(result, ensure_ascii=False)


class Approvals:
    """The scenario's person: answers by tool name (``approvals:``; ``approvals_again:`` for
    a call they were asked about in an earlier life), and remembers each question in a file
    beside the session (fsynced before the answer), as a person remembers being asked. The
    memory is the person's, not the agent's: the agent reads nothing of it."""

    def __init__(self, ctx: LifeContext, path: Path, turn: Callable[[], int]) -> None:
        self.approver = ScriptedApprover(dict(ctx.approvals), dict(ctx.approvals_again))
        self.path = path
        self.life = ctx.life
        self.turn = turn  # the turn being run: a provider's call_0 in turn 2 is another call

    def asked_before(self, call_id: str, tool: str) -> bool:
        if not self.path.exists():
            return False
        turn = self.turn()
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                seen = json.loads(line)
            except ValueError:
                continue  # a line cut by the kill: that question was not answered
            same = (seen.get("turn"), seen.get("call_id"), seen.get("tool")) == (turn, call_id, tool)
            if same and seen.get("life", 0) < self.life:
                return True
        return False

    def __call__(self, tool: str, call_id: str, arguments: Mapping[str, Any]) -> Answer:
        again = self.asked_before(call_id, tool)
        approved = self.approver.approve(
            ToolCall(call_id, tool, json.dumps(dict(arguments))),
            {"tool": tool, "arguments": dict(arguments)},
            again=again,
        )
        line = {"life": self.life, "turn": self.turn(), "call_id": call_id, "tool": tool, "again": again}
        _append_synced(self.path, json.dumps(line | {"approved": approved}) + "\n")
        return Answer(approved, again)


def _append_synced(path: Path, text: str) -> None:
    created = not path.exists()
    with path.open("a", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    if created:
        fsync_directory(path.parent)
