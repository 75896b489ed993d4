"""A scenario as a value: one conversation, its tools, the scripted model's rules, the
faults, and what each crash point should end with.

Pure: ``harness.input.scenario`` reads it from YAML; everything after (plan, lives, verdict,
reports) takes it as it is. ``expectation`` merges the expectation layers for one point.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.script import Rule

__all__ = ["NEEDS", "SIMULATED_PROGRAMS", "SPECIAL_KEYS", "Key", "Scenario"]

# A position in a YAML document: the keys and indices from the root, e.g. ("model", 0, "when").
Key = tuple[str | int, ...]
SPECIAL_KEYS = ("default", "clean", "recovery")
# Programs run_command's simulator provides that a real shell in a case workspace lacks
# (mock_tools/command_tools.py: npm test writes artifacts, npm publish a release).
SIMULATED_PROGRAMS = ("npm",)
# What a scenario can need (``needs:``): those programs, or the simulated shell itself.
NEEDS = (*SIMULATED_PROGRAMS, "simulated_shell")


@dataclass(frozen=True, slots=True)
class Scenario:
    path: Path
    name: str
    tools: tuple[str, ...]
    contracts: Mapping[str, ToolContract]
    turns: tuple[str, ...]
    rules: tuple[Rule, ...]
    files: Mapping[str, str] = field(default_factory=dict)
    approvals: Mapping[str, str] = field(default_factory=dict)
    approvals_again: Mapping[str, str] = field(default_factory=dict)
    faults: tuple[Mapping[str, Any], ...] = ()
    between_lives: tuple[Mapping[str, Any], ...] = ()
    cover: tuple[str, ...] = ()
    recovery_crashes: bool = True
    # Also tear the recovering life's own writes as second crashes (its session appends before
    # it asks the model again; ``harness.plan.enumeration.recovery_window``). Opt-in: more lives.
    recovery_torn_writes: bool = False
    expect: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    description: str = ""
    tags: tuple[str, ...] = ()
    evals: tuple[str, ...] = ()  # the named evals (harness.core.evals) this scenario shows
    # What its commands need that only crashmatrix's simulated shell gives (``npm``, or
    # ``simulated_shell`` itself): not applicable to an agent running a real shell.
    needs: tuple[str, ...] = ()
    positions: Mapping[Key, tuple[int, int]] = field(default_factory=dict)

    def where(self, key: Key) -> str:
        """``path:line:col`` of a key, for messages about this scenario."""
        probe = key
        while probe and probe not in self.positions:
            probe = probe[:-1]
        line, col = self.positions.get(probe, (1, 1))
        return f"{self.path}:{line}:{col}"

    @property
    def idempotency_classes(self) -> tuple[str, ...]:
        return tuple(sorted({self.contracts[t].idempotency for t in self.tools}))

    def covers(self, point: CrashPoint) -> bool:
        if not self.cover:
            return True
        return point.boundary in self.cover or point.id in self.cover

    @staticmethod
    def _about(body: Mapping[str, Any], point: CrashPoint) -> bool:
        """A bare boundary layer that names calls is about crashes on those calls only:
        ``after_running: {outcome: {call_1: ...}}`` says nothing about a crash on call_2."""
        named = _calls_named(body)
        return not named or point.tool_call_id in named

    def expectation(self, point: CrashPoint | None, *, recovery: bool = False) -> dict[str, Any]:
        """Merge ``default`` <- ``clean`` | boundary name <- point id (most specific wins,
        field by field and call by call). Depth-2 cases also merge ``recovery``."""
        layers = ["default"]
        if point is None:
            layers.append("clean")
        else:
            layers += [point.boundary, point.id]
            if recovery:
                layers.append("recovery")
        merged: dict[str, Any] = {}
        for layer in layers:
            body = self.expect.get(layer) or {}
            if point is not None and layer in (point.boundary, "recovery") and not self._about(body, point):
                continue
            for name, value in body.items():
                if isinstance(value, Mapping) and name != "world":
                    merged.setdefault(name, {}).update(value)
                elif name == "world":
                    world = merged.setdefault("world", {})
                    for key, item in value.items():
                        if key in ("files", "rows"):
                            world.setdefault(key, {}).update(item)
                        else:
                            world[key] = item
                else:
                    merged[name] = value
        return merged


def _calls_named(body: Mapping[str, Any]) -> set[str]:
    return {call for name in ("told", "outcome", "ledger", "code") for call in (body.get(name) or {})}
