"""The interface between the harness and an agent under test.

A life is one process of the agent, from start to exit or death. The harness builds a
``LifeContext`` inside the agent's process (session path, world, an HTTP client whose
requests reach the scripted model and the mock order API, approvals, and the two hooks
through which it kills the process) and calls ``AgentAdapter.run_life(ctx)``.

The reference agent is one adapter among others: ``reference_agent.adapter:ReferenceAdapter``.
``load_adapter("module:factory")`` loads any other Python adapter (kind 1), and
``load_adapter("path/to/adapter.yaml")`` an unmodified agent declared in YAML: a Python module
(kind 2) or any command as a black box (kind 3), see ``harness.agents.foreign`` and docs/adapters.md.

An adapter's ``boundaries`` are the crash points it can reach; the matrix shows every other
boundary as "not reachable", never as passed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from crashmatrix.harness.core.boundaries import BoundaryHook
from crashmatrix.harness.session_file import AppendHook

if TYPE_CHECKING:
    from crashmatrix.harness.core.scenario import Scenario
    from crashmatrix.harness.core.trace import CaseRun
    from crashmatrix.harness.observation.observation import Observation

__all__ = ["MODEL_BASE_URL", "AgentAdapter", "LifeContext"]

MODEL_BASE_URL = "http://model.crashmatrix.test/v1"


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
    # Give to a ScriptedModel the adapter serves itself (loopback): it marks in the trace
    # where the agent asked the model.
    model_request: Callable[[], None] = lambda: None
    # Adds an event to the life's trace (one line, written so that it survives a SIGKILL):
    # e.g. the session size at each probe of the agent's own effects.
    trace: Callable[[Mapping[str, Any]], None] = lambda event: None
    # Call when the agent reaches the harness other than through ``hook`` and
    # ``model_request`` (a request to the life's loopback server): a concurrent life of a
    # double resume is held there at its first step (``harness.lives.gate``).
    arrive: Callable[[], None] = lambda: None


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

    def observe(self, run: CaseRun) -> Observation:
        """Everything the case left, read once after its last life (in the harness's
        process): the adapter's only job on the judging side. An agent that keeps seed
        000's JSONL at ``ctx.session_path`` uses ``harness.observation.reading.read_observation``
        as it is; others read their own session (and, later, their own effects). A Python
        adapter written before this method existed is observed that native way
        (``harness.agents.loading.observe``)."""
        ...
