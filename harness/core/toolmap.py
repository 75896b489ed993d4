"""The suite's tools as an agent names them.

Scenarios are written once, with the suite's tool names and arguments (``send_email(to,
subject, body)``, ``create_order(item, quantity)``). A team's agent calls its tools
something else (``send_mail(recipient, title, text)``). A ``ToolMap`` translates both ways:
the scripted model hands out calls in the agent's names and argument shapes, and reads the
agent's calls back as the suite's tools when it matches rules; the verdict looks contracts
up by the suite's name. A tool the map does not list is one the agent does not have: a
scenario that needs it is not applicable to that agent, with the reason.

An entry can also say what the agent's tool really is: ``shell="real"`` for an agent whose
``run_command`` runs a real shell in its workspace (the suite's simulated programs, such as
``npm``, are not there), and ``only`` for a tool that accepts only some argument values
(patterns per argument, in the agent's argument names). A scenario whose script calls it
outside them is not applicable (``harness.plan.applicability``).

``ToolMap.identity()`` is the map of an agent that speaks the suite's names (the reference
agent, and any adapter without a ``catalogue:``). Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Outside", "ToolMap", "ToolName"]


@dataclass(frozen=True, slots=True)
class ToolName:
    """One suite tool in an agent's terms."""

    name: str  # the agent's tool name
    arguments: Mapping[str, str] = field(default_factory=dict)  # suite argument -> the agent's
    # The agent's argument -> the patterns (``re.search``) one of which its value must match;
    # an argument not listed takes any value.
    only: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    shell: str = "simulated"  # run_command: "real" when the agent runs a real shell


@dataclass(frozen=True, slots=True)
class Outside:
    """A call's argument value that matches none of its tool's ``only`` patterns."""

    argument: str  # the agent's name of the argument
    value: str
    patterns: tuple[str, ...]


def _text(value: Any) -> str:
    """An argument's value as a pattern sees it: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


@dataclass(frozen=True, slots=True)
class ToolMap:
    """Suite tool -> the agent's; ``tools is None``: every tool, under its own name."""

    tools: Mapping[str, ToolName] | None = None

    @classmethod
    def identity(cls) -> ToolMap:
        return cls(None)

    def has(self, suite_tool: str) -> bool:
        return self.tools is None or suite_tool in self.tools

    def missing(self, suite_tools: Iterable[str]) -> list[str]:
        return [tool for tool in suite_tools if not self.has(tool)]

    def agent_name(self, suite_tool: str) -> str:
        if self.tools is None or suite_tool not in self.tools:
            return suite_tool
        return self.tools[suite_tool].name

    def suite_name(self, agent_tool: str) -> str:
        """The suite's name for a tool the agent called (unchanged when not mapped)."""
        if self.tools is not None:
            for suite, mine in self.tools.items():
                if mine.name == agent_tool:
                    return suite
        return agent_tool

    def real_shell(self, suite_tool: str) -> bool:
        """Whether the agent runs ``suite_tool`` as a real shell (never for the identity map:
        the reference agent and harness-run tools use the simulator)."""
        return self.tools is not None and suite_tool in self.tools and self.tools[suite_tool].shell == "real"

    def outside(self, suite_tool: str, arguments: Mapping[str, Any]) -> list[Outside]:
        """The arguments of a call (in the suite's shape) that the agent's tool does not accept:
        each renamed as the agent names it, then held against its ``only`` patterns. A missing
        argument is not judged here: the call itself is the scenario's."""
        if self.tools is None or suite_tool not in self.tools:
            return []
        only = self.tools[suite_tool].only
        outside: list[Outside] = []
        for name, value in self.agent_arguments(suite_tool, arguments).items():
            patterns = only.get(name)
            if patterns and not any(re.search(pattern, _text(value)) for pattern in patterns):
                outside.append(Outside(name, _text(value), patterns))
        return outside

    def agent_arguments(self, suite_tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """A call's arguments in the agent's shape (unmapped arguments keep their names)."""
        if self.tools is None or suite_tool not in self.tools:
            return dict(arguments)
        renames = self.tools[suite_tool].arguments
        return {renames.get(name, name): value for name, value in arguments.items()}

    def suite_argument_names(self) -> Mapping[str, Mapping[str, str]]:
        """Agent tool name -> {its argument name -> the suite's}, for arguments renamed."""
        if self.tools is None:
            return {}
        return {
            mine.name: {theirs: suite_arg for suite_arg, theirs in mine.arguments.items()}
            for mine in self.tools.values()
            if mine.arguments
        }

    def suite_names(self) -> Mapping[str, str]:
        """Agent tool name -> suite tool name, for the ones that differ."""
        if self.tools is None:
            return {}
        return {mine.name: suite for suite, mine in self.tools.items() if mine.name != suite}
