"""The suite's tools as an agent names them.

Scenarios are written once, with the suite's tool names and arguments (``send_email(to,
subject, body)``, ``create_order(item, quantity)``). A team's agent calls its tools
something else (``send_mail(recipient, title, text)``). A ``ToolMap`` translates both ways:
the scripted model hands out calls in the agent's names and argument shapes, and reads the
agent's calls back as the suite's tools when it matches rules; the verdict looks contracts
up by the suite's name. A tool the map does not list is one the agent does not have: a
scenario that needs it is not applicable to that agent, with the reason.

``ToolMap.identity()`` is the map of an agent that speaks the suite's names (the reference
agent, and any adapter without a ``catalogue:``). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolMap", "ToolName"]


@dataclass(frozen=True, slots=True)
class ToolName:
    """One suite tool in an agent's terms."""

    name: str  # the agent's tool name
    arguments: Mapping[str, str] = field(default_factory=dict)  # suite argument -> the agent's


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
