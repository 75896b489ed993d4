"""Faults that are not crashes: a request that never arrived, a lost response, a refusal.

A ``FaultSpec`` is stored in the world (table ``faults``) so that it fires exactly once
across process lives: the harness arms it before the first life, and whichever life makes
the matching call consumes it in one durable transaction (``World.take_fault``).

This module also turns a fired fault into the ToolObservation the model sees. The wording
follows seed 004: a lost response on a side-effecting tool is ``SIDE_EFFECT_UNCERTAIN``,
not a timeout, because calling the tool again might do the thing twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.tools import ToolObservation
from crashmatrix.harness.errors import InputError

__all__ = [
    "FAULT_KINDS",
    "FaultSpec",
    "fault_observation",
    "lost_response_observation",
]

FAULT_KINDS = ("timeout_before", "response_lost", "permission_denied")


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """Fire ``kind`` on the next ``times`` calls of ``tool`` (only for ``tool_call_id`` if set)."""

    tool: str
    kind: str
    tool_call_id: str | None = None
    times: int = 1

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise InputError(
                f"fault kind {self.kind!r} for tool {self.tool!r} is not one of {', '.join(FAULT_KINDS)}"
            )
        if self.times < 1:
            raise InputError(
                f"fault {self.kind!r} for tool {self.tool!r}: times must be >= 1, got {self.times}"
            )


def fault_observation(kind: str, tool: str) -> ToolObservation:
    """The ToolObservation of a fault that fired BEFORE any side effect."""
    if kind == "timeout_before":
        return ToolObservation(
            ok=False,
            code="TIMEOUT",
            retryable=True,
            content=(
                f"{tool}: the request timed out before it reached the service; nothing was done. "
                "Retrying is safe."
            ),
        )
    if kind == "permission_denied":
        return ToolObservation(
            ok=False,
            code="PERMISSION_DENIED",
            content=f"{tool}: permission denied by the service; nothing was done. Do not retry.",
        )
    raise InputError(f"fault {kind!r} does not fire before the side effect; use lost_response_observation")


def lost_response_observation(
    tool: str, contract: ToolContract | None, *, side_effecting: bool
) -> ToolObservation:
    """The request was processed but its response never came back.

    For a read-only call that is harmless (read again); for anything else the caller cannot
    tell whether the effect happened, so the ledger must say ``unknown``.
    """
    if not side_effecting:
        return ToolObservation(
            ok=False,
            code="TIMEOUT",
            retryable=True,
            content=f"{tool}: the response was lost; this tool changes nothing, so retrying is safe.",
        )
    lookup = contract.lookup_tool if contract else None
    advice = (
        f"First call {lookup} with the same idempotency key to find out whether it happened."
        if lookup
        else "Ask the user to check before doing anything else."
    )
    return ToolObservation(
        ok=False,
        code="SIDE_EFFECT_UNCERTAIN",
        retryable=False,
        uncertain=True,
        content=(
            f"{tool}: the request was sent but the response was lost, so the side effect may "
            f"already have happened. It must not be retried blindly. {advice}"
        ),
    )
