"""The boundary between an agent runtime and the tools it runs.

* ``ToolObservation`` is seed 004's observation shape (``ok``, ``code``, ``content``,
  ``metadata.retryable``, ``metadata.idempotency``) plus the tool's own fields.
* ``ToolContext`` carries the three identities of seed 000 into the tool, so the world can
  attribute every side effect to a tool call and an execution attempt, and the ``step``
  callable a tool calls between the steps of a multi-step effect (the agent's
  ``during_side_effect`` boundary; a no-op by default).
* ``Toolbox`` is the Protocol a set of tools implements; the mock tools are one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "CODES",
    "PreconditionVerdict",
    "ToolContext",
    "ToolObservation",
    "Toolbox",
    "no_step",
]

# Error codes a tool result may carry (seed 004 plus the ones recovery produces).
CODES = (
    "SIDE_EFFECT_UNCERTAIN",
    "CONFLICT",
    "PERMISSION_DENIED",
    "ARGUMENTS_MISMATCH",
    "TIMEOUT",
    "NOT_FOUND",
    "INVALID_ARGUMENTS",
    "REJECTED",
    "MANUAL_CHECK_REQUIRED",
    "UNKNOWN_TOOL",
    "TOOL_ERROR",
)


@dataclass(frozen=True, slots=True)
class ToolObservation:
    """What a tool returns. ``data`` holds the tool's own fields (path, order, ...)."""

    ok: bool
    code: str | None = None
    content: str = ""
    retryable: bool = False
    data: Mapping[str, Any] = field(default_factory=dict)
    # True when the tool cannot tell whether its side effect happened (response lost,
    # timeout after the request was sent): the ledger must say ``unknown``, not ``failed``.
    uncertain: bool = False

    @property
    def ledger_status(self) -> str:
        if self.ok:
            return "succeeded"
        return "unknown" if self.uncertain else "failed"

    def to_result(self, *, execution_id: str | None, idempotency: str) -> dict[str, Any]:
        """The dict stored as the ledger ``result`` and published as Tool Result content.

        ``execution_id`` is None for results no execution produced (a read-only tool that
        keeps no ledger, a call refused before it ran): the field is then left out rather
        than naming an attempt that does not exist."""
        out: dict[str, Any] = {"ok": self.ok, "status": self.ledger_status}
        if execution_id is not None:
            out["execution_id"] = execution_id
        out.update(self.data)
        if not self.ok:
            out["code"] = self.code or "TOOL_ERROR"
            out["content"] = self.content
            out["metadata"] = {"retryable": self.retryable, "idempotency": idempotency}
        elif self.content:
            out["content"] = self.content
        return out


def no_step() -> None:
    """The step callable of a production run: the steps of an effect are just code."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    tool_call_id: str
    execution_id: str
    idempotency_key: str
    arguments_sha256: str
    # Called by a tool between the steps of an effect that has several (a write's temp file
    # synced before its rename, the first of two appends): each call is a point where the
    # effect is half done, so a crash harness can stop it there. Never called after the
    # last step: that state is ``after_side_effect``'s.
    step: Callable[[], None] = field(default=no_step, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class PreconditionVerdict:
    """``canReplayFileWrite`` of seed 004: already_applied, apply_again or conflict."""

    action: str  # "already_applied" | "apply_again" | "conflict"
    current_sha256: str | None
    reason: str = ""


class Toolbox(Protocol):
    """A set of tools an agent can run."""

    def execute(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolObservation:
        """Run one tool call. Never raises for tool-level failures: they are ToolObservations."""
        ...

    def plan(self, name: str, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        """Facts to record in the ledger before the side effect (e.g. base/after hashes)."""
        ...

    def check_precondition(
        self, name: str, arguments: Mapping[str, Any], plan: Mapping[str, Any]
    ) -> PreconditionVerdict:
        """For conditional tools: may the recorded plan be applied (again)?"""
        ...
