"""A framework agent declared in an adapter YAML (``framework:`` + ``factory:``): what the
common part (``harness.agents.foreign.ForeignAdapter``, the same code as kind 2) hands the
framework's driver for one life, and what a framework module tells it.

The split: everything a kind-2 agent gets -- the world, the ``effects:`` probes, the loopback
model and services, the environment (``OPENAI_BASE_URL`` ...), ``intercept:`` and
``boundaries:`` rules on the team's own functions, the catalogue and result mappings, the
effect counts in ``observe`` -- is ``ForeignAdapter``'s, once for every kind. A framework
module (``harness/agents/frameworks/<name>.py``) adds only what is the framework's: how to
build and drive the team's agent for one life (``drive``), how to read its store as records
(``read_records``), and which boundaries its seams reach (``FRAMEWORK``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from crashmatrix.harness.core.boundaries import BoundaryHook
from crashmatrix.harness.errors import InputError

if TYPE_CHECKING:
    from crashmatrix.harness.agents.protocol import LifeContext
    from crashmatrix.harness.core.session_log import SessionLog

__all__ = [
    "CLIENT_ENV",
    "FRAMEWORKS",
    "AgentFacts",
    "DotModel",
    "FrameworkInfo",
    "FrameworkModule",
    "TeamLife",
    "client_env",
    "framework_module",
    "reader_of",
]

# ``framework:`` in an adapter YAML -> (the adapter module, the extra that installs it).
FRAMEWORKS: Mapping[str, tuple[str, str]] = {
    "langgraph": ("crashmatrix.harness.agents.frameworks.langgraph", "langgraph"),
    "openai-agents": ("crashmatrix.harness.agents.frameworks.openai_agents", "openai-agents"),
    "pydantic-ai": ("crashmatrix.harness.agents.frameworks.pydantic_ai", "pydantic-ai"),
    "dbos": ("crashmatrix.harness.agents.frameworks.dbos", "dbos"),
    "temporal": ("crashmatrix.harness.agents.frameworks.temporal", "temporal"),
}


@dataclass(frozen=True)
class TeamLife:
    """One life of a framework agent, as ``ForeignAdapter`` prepared it: the server started,
    the environment set (the team's own model client reaches ``model_url``), the working
    directory the case's workspace, the team's module imported with its rules installed."""

    spec: Any  # the adapter's ``ForeignSpec`` (not imported: adapter_file reads FRAMEWORKS here)
    ctx: LifeContext
    # The life's hook with the effect probe first: every boundary goes through it (never
    # ``ctx.hook``), so the moment is also one the team's own effects are known at.
    hook: BoundaryHook
    model_url: str  # the loopback scripted model (also in OPENAI_BASE_URL / OPENAI_API_BASE)
    toolbox: Any  # crashmatrix's mock tools in this case's world (``tools: harness``)
    # A suite tool run by the mock tools in this world: (tool, arguments, call id, key or None).
    run_tool: Callable[[str, Mapping[str, Any], str, str | None], Mapping[str, Any]]
    # Refreshes crashmatrix's normalised copy of the session from the framework's store and
    # returns it: call it before a tool acts, so its effects belong to the call running.
    sync: Callable[[], SessionLog]
    workspace: Path
    module: ModuleType  # the factory's module (``intercept:`` and ``boundaries:`` installed)
    factory: Callable[..., Any]
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentFacts:
    """What the team's built agent is, found once at load (``check``): the suite's tools it
    has (None: not known, every tool), and whether it asks a person before a tool acts."""

    tools: frozenset[str] | None = None
    approvals: bool = False
    # Moments this built agent reaches beyond its framework's ``boundaries`` (a PydanticAI
    # ``DBOSAgent``: DBOS's step rows committing), reachable though the framework names them not.
    reaches: frozenset[str] = frozenset()


@dataclass(frozen=True)
class FrameworkInfo:
    """What a framework's seams reach, said once by its module."""

    # The named boundaries its driver and hooks fire (the matrix shows every other one as
    # not reachable, with ``unreachable``'s reason where one is given).
    boundaries: tuple[str, ...]
    unreachable: Mapping[str, str] = field(default_factory=dict)
    why_not_torn: str = ""  # why a torn write cannot act on its store
    why_no_power: str = ""  # why a power loss cannot act on its store
    preload: tuple[str, ...] = ()  # what a fork server imports once (the framework's modules)
    options: tuple[str, ...] = ()  # the ``options:`` keys it takes


class FrameworkModule(Protocol):
    FRAMEWORK: FrameworkInfo

    def drive(self, life: TeamLife) -> None: ...

    def read_records(self, workspace: Path) -> list[Mapping[str, Any]]: ...

    # Optional: ``check(spec) -> AgentFacts``, the agent built once at load (a factory that
    # fails, or a model client that escapes the loopback, is one line there); and
    # ``session_records(workspace) -> SessionRecords``, where ``crashmatrix doctor`` plants
    # its faults in the store (``harness.agents.session_records``); and ``ASKING_ONLY``,
    # boundary -> why: the moments only an agent that asks a person reaches (not reachable,
    # with that reason, for one whose ``check`` found it asks none).


def framework_module(name: str, where: str = "") -> FrameworkModule:
    """The adapter module of ``framework: NAME``; one line when its extra is not installed."""
    module_name, extra = FRAMEWORKS[name]
    try:
        module: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise InputError(
            f"{where or name}: the {name} adapter needs its framework: pip install 'crashmatrix[{extra}]' "
            f"({error})"
        ) from error
    if not hasattr(module, "drive") or not hasattr(module, "FRAMEWORK"):
        raise InputError(f"{where or name}: this crashmatrix's {name} adapter cannot run a 'framework:' YAML")
    checked: FrameworkModule = module
    return checked


# What an OpenAI client built from the environment reads: the openai package's names and
# LangChain's (langchain-openai's ``OPENAI_API_BASE``).
CLIENT_ENV = ("OPENAI_BASE_URL", "OPENAI_API_BASE", "OPENAI_API_KEY")


def client_env(url: str) -> dict[str, str]:
    """The environment that points the team's own model client at crashmatrix's model."""
    return dict(zip(CLIENT_ENV, (url, url, "crashmatrix"), strict=True))


class DotModel:
    """A load check's model (a ``LoopbackServer`` service): every chat completion answered
    "." with no tool call, so one request through the team's client acts on nothing."""

    def handle(self, request: Any) -> Any:
        import httpx

        reply = {
            "id": "check",
            "object": "chat.completion",
            "created": 0,
            "model": "crashmatrix-check",
            "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "."}}
            ],
        }
        return httpx.Response(200, json=reply)


def reader_of(name: str) -> str:
    """The session reader of ``framework: NAME`` (``module:function``, ``SessionSource.reader``)."""
    return f"{FRAMEWORKS[name][0]}:read_records"
