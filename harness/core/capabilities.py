"""What an agent's adapter lets the harness do to it: which of the suite's tools the agent
has, which of them the harness runs for it (so that a fault can be injected there),
whether it asks for approvals, and whether its session is crashmatrix's own file (or, kept
by the agent, one where the harness can still edit a saved tool call).

A scenario that needs more than an agent's capabilities is not applicable to it, with the
reason (``harness.plan.applicability``): never failed, never passed. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from crashmatrix.harness.core.toolmap import ToolMap

__all__ = ["NATIVE_CAPABILITIES", "Capabilities"]


@dataclass(frozen=True, slots=True)
class Capabilities:
    tools: ToolMap = field(default_factory=ToolMap.identity)  # the suite's tools it has
    # The suite's tools the harness runs for it (mock tools, services, intercepted functions):
    # None is every tool (a native agent, or one calling the mock tools over loopback).
    served: frozenset[str] | None = None
    approvals: bool = True  # it asks for approval, so a scenario's "no" reaches it
    edits_native_session: bool = True  # its session is crashmatrix's own file
    # An agent keeping its own session: why tamper_arguments cannot edit a saved tool call in
    # it ("" when it can: a JSONL file its adapter maps, edited in the agent's own encoding).
    own_session_tamper: str = (
        "it keeps its own session, where its adapter gives the harness no saved tool call to edit"
    )
    # check -> why, for each invariant ``crashmatrix doctor`` found blind on this agent (its
    # planted fault did not make it fire): not applicable in every verdict of the agent.
    blind: Mapping[str, str] = field(default_factory=dict)


NATIVE_CAPABILITIES = Capabilities()
