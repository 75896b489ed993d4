"""The interface between the harness and an agent under test.

A life is one process of the agent, from start to exit or death. The harness builds a
``LifeContext`` inside the agent's process (session path, world, an HTTP client whose
requests reach the scripted model and the mock order API, approvals, and the two hooks
through which it kills the process) and calls ``AgentAdapter.run_life(ctx)``.

The reference agent is one adapter among others: ``reference_agent.adapter:ReferenceAdapter``.
``load_adapter("module:factory")`` loads any other Python adapter.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from .boundaries import BoundaryHook
from .errors import InputError
from .session import AppendHook

if TYPE_CHECKING:
    from .scenario import Scenario

__all__ = ["MODEL_BASE_URL", "AgentAdapter", "LifeContext", "load_adapter"]

MODEL_BASE_URL = "http://model.crashmatrix.test/v1"
BUILTIN = {"reference": "reference_agent.adapter:ReferenceAdapter"}


@dataclass(frozen=True)
class LifeContext:
    case_dir: Path
    session_path: Path
    session_id: str
    world_dir: Path
    scenario: Scenario
    http: httpx.Client  # intercepted: reaches the scripted model and the mock services only
    model_base_url: str
    hook: BoundaryHook  # call at each boundary; it may never return (SIGKILL)
    before_append: AppendHook  # give to the session writer; tears a write when asked
    approvals: Mapping[str, str]
    approvals_again: Mapping[str, str]
    life: int


class AgentAdapter(Protocol):
    """How the harness drives one kind of agent."""

    name: str
    # Crash points this agent can be killed at; a point outside is shown "not reachable".
    boundaries: tuple[str, ...]
    keeps_ledger: bool

    def run_life(self, ctx: LifeContext) -> None:
        """Start the agent on ``ctx.session_path``, let it recover whatever a previous life
        left, then send the scenario's turns that it has not yet received. Runs in the
        agent's own process; returning means the life ended normally."""
        ...


def load_adapter(spec: str, **options: Any) -> AgentAdapter:
    """``reference``, or ``package.module:factory`` returning an adapter."""
    target = BUILTIN.get(spec, spec)
    module_name, sep, attr = target.partition(":")
    if not sep or not attr:
        raise InputError(
            f"--agent={spec!r}: write 'reference' or 'package.module:factory' for a Python adapter"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise InputError(f"--agent={spec!r}: cannot import {module_name!r} ({error})") from error
    factory = getattr(module, attr, None)
    if factory is None:
        raise InputError(f"--agent={spec!r}: {module_name} has no attribute {attr!r}")
    adapter: AgentAdapter = factory(**options)
    return adapter
