"""One tool call as the mock tools see it, and the ToolObservations they commonly return."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

import httpx

from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.tools import ToolContext, ToolObservation
from crashmatrix.harness.errors import SandboxViolation
from crashmatrix.mock_tools.world import World

__all__ = ["Call", "Handler", "invalid", "refused", "tool_error"]


class EventIds(TypedDict):
    """The keyword arguments of ``World.record_event`` that name a call's identities."""

    tool_call_id: str
    execution_id: str
    idempotency_key: str


@dataclass(frozen=True, slots=True)
class Call:
    """Everything a tool implementation needs: the world, HTTP, the call and its contract."""

    world: World
    http: httpx.Client
    name: str
    arguments: Mapping[str, Any]
    ctx: ToolContext
    contract: ToolContract

    def event_ids(self) -> EventIds:
        """The identities every event of this call carries (seed 000's three IDs)."""
        return {
            "tool_call_id": self.ctx.tool_call_id,
            "execution_id": self.ctx.execution_id,
            "idempotency_key": self.ctx.idempotency_key,
        }


Handler = Callable[[Call], ToolObservation]


def refused(error: SandboxViolation) -> ToolObservation:
    return ToolObservation(ok=False, code="PERMISSION_DENIED", content=f"{error}; nothing was done")


def invalid(message: str) -> ToolObservation:
    return ToolObservation(ok=False, code="INVALID_ARGUMENTS", content=message)


def tool_error(message: str) -> ToolObservation:
    return ToolObservation(ok=False, code="TOOL_ERROR", content=message)
