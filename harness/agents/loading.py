"""Loading an agent adapter from ``--agent``: ``reference``, ``module:factory`` or an adapter YAML."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from crashmatrix.harness.agents.protocol import AgentAdapter
from crashmatrix.harness.agents.team_life import FRAMEWORKS as FRAMEWORKS  # re-exported: loading.FRAMEWORKS
from crashmatrix.harness.core.capabilities import NATIVE_CAPABILITIES, Capabilities
from crashmatrix.harness.errors import CrashmatrixError, InputError

if TYPE_CHECKING:
    from crashmatrix.harness.core.trace import CaseRun
    from crashmatrix.harness.observation.observation import Observation

__all__ = ["BUILTIN", "adapter_for", "capabilities_of", "load_adapter", "observe"]

BUILTIN = {"reference": "crashmatrix.harness.agents.reference:ReferenceAdapter"}


@functools.cache
def adapter_for(spec: str) -> AgentAdapter:
    """The adapter the harness's own process uses for ``spec`` (to observe a case, to probe
    after a life): loaded once per process."""
    return load_adapter(spec)


def preload_for(spec: str) -> tuple[str, ...]:
    """The modules the fork server imports once for agent ``spec``, besides crashmatrix's own
    (``harness.agents.preload``): a Python adapter's module (kind 1, as always); for an
    adapter YAML or a framework, what its adapter names (``preload``: the libraries the
    agent imports, never the agent's own code). Nothing when the adapter cannot be loaded:
    the error comes, with its message, where the adapter is loaded for real."""
    name = spec.partition(":")[0]
    if spec.endswith((".yaml", ".yml")) or (":" in spec and name in FRAMEWORKS):
        try:
            adapter = adapter_for(spec)
        except CrashmatrixError:
            return ()
        return tuple(getattr(adapter, "preload", ()))
    target = BUILTIN.get(spec, spec)
    return (_installed_name(target.partition(":")[0]),)


def fork_preload(spec: str) -> list[str]:
    """The whole preload list of a launcher for agent ``spec``: the reference agent and the
    mock tools (every life needs them) around what the agent itself needs."""
    own = [m for m in preload_for(spec) if m not in _ALWAYS]
    return [_ALWAYS[0], *own, _ALWAYS[1]]


_ALWAYS = ("crashmatrix.harness.agents.reference", "crashmatrix.mock_tools.toolbox")


def capabilities_of(adapter: AgentAdapter) -> Capabilities:
    """What the harness can do to this agent; an adapter that does not say is a native one."""
    capabilities: Capabilities = getattr(adapter, "capabilities", NATIVE_CAPABILITIES)
    return capabilities


def observe(adapter: AgentAdapter, run: CaseRun) -> Observation:
    """The observation of ``run``, read by ``adapter``. An adapter without ``observe`` (a
    kind-1 adapter written before it existed) keeps seed 000's JSONL where the harness
    told it: it is read natively."""
    method = getattr(adapter, "observe", None)
    observation: Observation
    if callable(method):
        observation = method(run)
    else:
        from crashmatrix.harness.core.dialect import NATIVE
        from crashmatrix.harness.observation.reading import read_observation

        observation = read_observation(
            run, keeps_ledger=adapter.keeps_ledger, dialect=getattr(adapter, "dialect", NATIVE)
        )
    # The checks ``crashmatrix doctor`` found blind on this agent travel with every observation.
    blind = capabilities_of(adapter).blind
    return dataclasses.replace(observation, blind_checks=blind) if blind else observation


# ``--agent=NAME:package.module:factory``: a framework adapter module (its ``load(target,
# spec=...)`` builds the adapter around the user's factory) and the extra that installs it.


def _load_framework(spec: str, name: str, target: str, **options: Any) -> AgentAdapter:
    module_name, extra = FRAMEWORKS[name]
    if not target.count(":") == 1 or not all(target.split(":")):
        raise InputError(
            f"--agent={spec!r}: write '{name}:package.module:factory' (the factory builds your agent)"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise InputError(
            f"--agent={spec!r}: the {name} adapter needs its framework: "
            f"pip install 'crashmatrix[{extra}]' ({error})"
        ) from error
    adapter: AgentAdapter = module.load(target, spec=spec, **options)
    return adapter


# crashmatrix's own top-level folders, installed under ``crashmatrix.`` (pyproject.toml).
_OWN_FOLDERS = ("harness", "mock_tools", "reference_agent", "reports")


def _installed_name(module_name: str) -> str:
    """``reference_agent.mutants`` as the folders read in a checkout is
    ``crashmatrix.reference_agent.mutants`` installed: the name that imports, from a checkout
    and an install alike (never the folder by its bare name: its classes would be a second
    copy of crashmatrix's)."""
    if module_name.partition(".")[0] not in _OWN_FOLDERS:
        return module_name
    installed = f"crashmatrix.{module_name}"
    try:
        found = importlib.util.find_spec(installed)
    except (ImportError, ValueError):
        found = None
    return installed if found is not None else module_name


def load_adapter(spec: str, **options: Any) -> AgentAdapter:
    """``reference``, ``package.module:factory`` returning an adapter, an adapter YAML, or a
    framework's agent (``langgraph:package.module:factory``, ``openai-agents:...``)."""
    name, sep, target = spec.partition(":")
    if sep and name in FRAMEWORKS:
        return _load_framework(spec, name, target, **options)
    if spec.endswith((".yaml", ".yml")):
        from crashmatrix.harness.agents.foreign import load_foreign_adapter

        if options:
            raise InputError(f"--agent={spec!r}: an adapter YAML takes no options; write them in the file")
        return load_foreign_adapter(spec)
    target = BUILTIN.get(spec, spec)
    module_name, sep, attr = target.partition(":")
    if not sep or not attr:
        raise InputError(
            f"--agent={spec!r}: write 'reference' or 'package.module:factory' for a Python adapter"
        )
    module_name = _installed_name(module_name)
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise InputError(f"--agent={spec!r}: cannot import {module_name!r} ({error})") from error
    factory = getattr(module, attr, None)
    if factory is None:
        raise InputError(f"--agent={spec!r}: {module_name} has no attribute {attr!r}")
    adapter: AgentAdapter = factory(**options)
    return adapter
