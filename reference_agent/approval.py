"""Approval is pluggable: scripted answers for tests, stdin for a person.

Approval is not a sandbox (seed 000, 8.2): it answers "does the user agree", nothing more.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

from crashmatrix.harness.core.records import ToolCall

__all__ = ["Approver", "ScriptedApprover", "StdinApprover"]


class Approver(Protocol):
    def approve(self, call: ToolCall, preview: Mapping[str, Any], *, again: bool) -> bool:
        """``again`` is True when recovery asks about a call that was approved (or started)
        before a restart: the person should know it may not be the first time."""
        ...


@dataclass
class ScriptedApprover:
    """Answers by tool name (``"*"`` for any), first for fresh asks, ``again`` for re-asks.

    ``answers`` maps a tool name to ``"yes"``/``"no"``; ``again`` likewise for re-asks after a
    restart, defaulting to the fresh answer. Every question is recorded so tests can assert
    that a re-ask happened.
    """

    answers: Mapping[str, str] = field(default_factory=lambda: {"*": "yes"})
    again_answers: Mapping[str, str] = field(default_factory=dict)
    asked: list[tuple[str, str, bool]] = field(default_factory=list)
    on_ask: Callable[[str, str, bool], None] | None = None

    def approve(self, call: ToolCall, preview: Mapping[str, Any], *, again: bool) -> bool:
        self.asked.append((call.id, call.name, again))
        if self.on_ask is not None:
            self.on_ask(call.id, call.name, again)
        table = self.again_answers if again and self.again_answers else self.answers
        answer = table.get(call.name, table.get("*", self.answers.get("*", "yes")))
        return answer == "yes"


@dataclass
class StdinApprover:
    stdin: TextIO = sys.stdin
    stdout: TextIO = sys.stdout

    def approve(self, call: ToolCall, preview: Mapping[str, Any], *, again: bool) -> bool:
        note = " (asked again after a restart: it may already have run)" if again else ""
        print(f"Approve {call.name}{note}?", file=self.stdout)
        print(json.dumps(dict(preview), ensure_ascii=False, indent=2), file=self.stdout)
        print("[y/N] ", end="", file=self.stdout, flush=True)
        line = self.stdin.readline()
        return line.strip().lower() in ("y", "yes")
