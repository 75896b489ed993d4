"""The framework versions an adapter accepts are the ones its extra installs: each adapter's
``SUPPORTED`` / ``SUPPORTED_TEXT`` and the extra's range in pyproject.toml cannot drift apart
(.ci/frameworks tests the adapters at the extras' lower bounds, the main venv at the newest),
and a version outside is refused in one line naming the range and the install command.
Fast: the version is monkeypatched, no framework needs to be installed."""

from __future__ import annotations

import importlib.metadata
import tomllib
import types
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from crashmatrix.harness.agents.frameworks import dbos as db
from crashmatrix.harness.agents.frameworks import langgraph as lg
from crashmatrix.harness.agents.frameworks import openai_agents as oa
from crashmatrix.harness.agents.frameworks import pydantic_ai as pai
from crashmatrix.harness.agents.frameworks import temporal as tm
from crashmatrix.harness.errors import InputError

ROOT = Path(__file__).resolve().parents[4]
EXTRAS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
# (the adapter module, the distribution it checks, the extra that installs it)
ADAPTERS = [
    (lg, "langgraph", "langgraph"),
    (oa, "openai-agents", "openai-agents"),
    (pai, "pydantic-ai-slim", "pydantic-ai"),
    (db, "dbos", "dbos"),
    (tm, "temporalio", "temporal"),
]
# How each names where it was asked for: the old --agent= form, or the adapter YAML (a
# framework with no --agent= form of its own is named by the YAML's path, given as is).
NAMED = {pai: "{}", db: "{}", tm: "{}"}
IDS = [distribution for _, distribution, _ in ADAPTERS]


def _extra_range(extra: str, distribution: str) -> SpecifierSet:
    (requirement,) = [r for r in map(Requirement, EXTRAS[extra]) if r.name == distribution]
    return requirement.specifier


def _accepts(module: types.ModuleType, monkeypatch: pytest.MonkeyPatch, text: str) -> bool:
    monkeypatch.setattr(importlib.metadata, "version", lambda name: text)
    try:
        module._check_version("framework:agent:build")
    except InputError:
        return False
    return True


def _around(specifiers: SpecifierSet) -> list[str]:
    """Each bound of the range and its nearest neighbours on either side, in every position."""
    probes = set()
    for specifier in specifiers:
        major, minor, micro = (*Version(specifier.version).release, 0, 0)[:3]
        for candidate in [
            (major, minor, micro),
            (major, minor, micro + 1),
            (major, minor, micro - 1),
            (major, minor - 1, 99),
            (major - 1, 99, 99),
        ]:
            if min(candidate) >= 0:
                probes.add(".".join(map(str, candidate)))
    return sorted(probes, key=Version)


@pytest.mark.parametrize(("module", "distribution", "extra"), ADAPTERS, ids=IDS)
def test_the_adapter_accepts_exactly_the_extras_range(
    module: types.ModuleType, distribution: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra_range = _extra_range(extra, distribution)
    assert SpecifierSet(module.SUPPORTED_TEXT) == extra_range, (
        f"{module.__name__}.SUPPORTED_TEXT is {module.SUPPORTED_TEXT!r}; the [{extra}] extra says "
        f"{extra_range}: change both, and .ci/frameworks tests the new lowest"
    )
    probes = _around(extra_range)
    accepted = [text for text in probes if _accepts(module, monkeypatch, text)]
    assert accepted == [text for text in probes if text in extra_range], probes


@pytest.mark.parametrize(("module", "distribution", "extra"), ADAPTERS, ids=IDS)
def test_every_framework_extra_requirement_has_a_lowest_version_ci_can_install(
    module: types.ModuleType, distribution: str, extra: str
) -> None:
    # .ci/frameworks installs each requirement of the extra at its ">=" bound exactly; a
    # requirement without one (or with a second lower bound) would leave it untested.
    for requirement in map(Requirement, EXTRAS[extra]):
        lowest = [s for s in requirement.specifier if s.operator == ">="]
        upper = [s for s in requirement.specifier if s.operator == "<"]
        assert len(lowest) == 1 and len(upper) == 1, f"[{extra}] {requirement}: needs '>=lowest,<next major'"


@pytest.mark.parametrize(("module", "distribution", "extra"), ADAPTERS, ids=IDS)
@pytest.mark.parametrize("outside", ["below", "next major"])
def test_a_version_outside_the_range_is_refused_in_one_line_naming_it(
    module: types.ModuleType, distribution: str, extra: str, outside: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lowest, below = module.SUPPORTED[0], list(module.SUPPORTED[0])
    below[-1 if lowest[-1] else -2] -= 1
    text = ".".join(map(str, below)) if outside == "below" else f"{module.SUPPORTED[1][0]}.0.0"
    monkeypatch.setattr(importlib.metadata, "version", lambda name: text)
    with pytest.raises(InputError) as caught:
        module._check_version(f"{distribution}:team.agent:build")
    message = str(caught.value)
    assert "\n" not in message
    named = NAMED.get(module, "--agent='{}'").format(f"{distribution}:team.agent:build")
    assert message == (
        f"{named}: {distribution} {text} is installed; this adapter "
        f"supports {module.SUPPORTED_TEXT}: pip install '{distribution}{module.SUPPORTED_TEXT}'"
    )
