"""The agent's stdin and stdout: user turns in order and approvals by the scenario, answered
when the agent's output ends with a prompt the adapter YAML describes."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TextIO

from crashmatrix.harness.agents.adapter_file import (
    ForeignSpec,
)
from crashmatrix.harness.agents.protocol import LifeContext
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.errors import InputError

__all__ = ["Conversation", "check_approvals"]
# Output kept to match prompts against: prompts are short, and an agent that prints a lot
# must not make the supervisor hold all of it.
_PROMPT_WINDOW = 8192


# -- stdin: turns and approvals ------------------------------------------------------------


def check_approvals(spec: ForeignSpec, scenario: Scenario) -> None:
    """Refuse a scenario that approves tool by tool when the adapter's approval prompt cannot
    say which tool it asks about (no ``(?P<tool>...)`` group): every prompt would be answered
    by ``*``, and a ``write_file: no`` the agent was never told would pass as tested."""
    if spec.approval_prompt is None or "tool" in re.compile(spec.approval_prompt).groupindex:
        return
    for table, answers in (("approvals", scenario.approvals), ("approvals_again", scenario.approvals_again)):
        for tool in answers:
            if tool != "*":
                raise InputError(
                    f"{scenario.where((table, tool))}: {table}.{tool}: adapter {spec.name}'s "
                    f"approvals.prompt ({spec.approval_where}) has no (?P<tool>...) group, so "
                    "every prompt would be answered by '*'; add (?P<tool>\\w+) where the prompt "
                    "names the tool, or approve by '*' alone"
                )


class Conversation:
    """Answers what the agent asks on stdin: approvals by the scenario, turns in order."""

    def __init__(self, spec: ForeignSpec, turns: Sequence[str], ctx: LifeContext) -> None:
        self.turns = list(turns)
        self.approvals = ctx.approvals
        self.again = ctx.approvals_again or ctx.approvals
        self.spec = spec
        self._approval = (
            re.compile(rf"(?:\A|\n)(?:{spec.approval_prompt})[ \t]*\Z") if spec.approval_prompt else None
        )
        self._input = re.compile(rf"(?:\A|\n)(?:{spec.input_prompt})[ \t]*\Z")

    def _approve(self, match: re.Match[str]) -> str:
        table = self.again if match.groupdict().get("again") else self.approvals
        # The prompt names the agent's tool; the scenario's approvals name the suite's. A
        # prompt without a tool group is answered by '*' (check_approvals allows nothing else).
        named = match.groupdict().get("tool")
        tool = self.spec.dialect.tools.suite_name(named) if named is not None else "*"
        answer = table.get(tool, table.get("*", "yes"))
        return (
            self.spec.approval_yes if str(answer).lower() in ("yes", "y", "true") else self.spec.approval_no
        )

    def answer(self, output: str, *, waiting: bool) -> str | None:
        """The line to write for ``output`` (what the agent printed since the last answer):
        an approval, the next turn, or "" for end of input. None: not a prompt (yet).
        ``waiting``: the agent is known to be reading (in-process), so anything is a turn prompt."""
        if self._approval is not None:
            match = self._approval.search(output)
            if match:
                return self._approve(match) + "\n"
        if waiting or self._input.search(output):
            return self.turns.pop(0) + "\n" if self.turns else ""
        return None


class _Console:
    """The in-process agent's stdout (kept to match prompts, copied to a log) and stdin."""

    def __init__(self, conversation: Conversation, log: TextIO) -> None:
        self.conversation = conversation
        self.log = log
        self.pending = ""

    def write(self, text: str) -> int:
        self.log.write(text)
        self.pending = (self.pending + text)[-_PROMPT_WINDOW:]
        return len(text)

    def flush(self) -> None:
        self.log.flush()

    def readline(self, size: int | None = -1) -> str:
        line = self.conversation.answer(self.pending, waiting=True) or ""
        self.log.write(line)
        self.pending = ""
        return line

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return "utf-8"
