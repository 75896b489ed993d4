"""The agent's stdin and stdout: user turns in order and approvals by the scenario, answered
when the agent's output ends with a prompt the adapter YAML describes.

An approval is answered for the tool it is about: the prompt's ``(?P<tool>...)`` group, or
the ``approvals.prompts`` entry whose text it contains. A prompt tied to no tool is answered
only when the scenario gives every one of its tools the same answer; otherwise any answer
could be the one the scenario forbids, so the case ends there as not applicable, with the
prompt and the fix (``UnansweredApproval``), never answered by ``*``.

A prompt is a re-ask (``approvals_again``) when its ``(?P<again>...)`` group matched: an agent
whose prompt can say so is taken at its word. A prompt that cannot is a re-ask by occurrence:
the k-th time this life asks about a tool (or, tied to none, with this prompt text) while an
earlier life asked about it k times or more. Lives are separate processes, so what was asked
is kept in the case directory (``ASKED``), as a person remembers being asked; the agent reads
nothing of it."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from crashmatrix.harness.agents.adapter_file import ForeignSpec
from crashmatrix.harness.agents.protocol import LifeContext
from crashmatrix.harness.core.records import Entry, MessageEntry
from crashmatrix.harness.core.trace import UNANSWERED_APPROVAL
from crashmatrix.harness.lives.capped_log import CappedLog

__all__ = ["ASKED", "Conversation", "UnansweredApproval", "per_process_messages", "scenario_answer"]
# Output kept to match prompts against: prompts are short, and an agent that prints a lot
# must not make the supervisor hold all of it.
_PROMPT_WINDOW = 8192
_BUFFER = 8192  # bytes of an in-process agent's output held before they go to its log
# The case directory's memory of the approvals asked, one JSON line per question.
ASKED = "approvals-asked.jsonl"


class UnansweredApproval(BaseException):
    """The agent asked an approval the scenario does not answer for its tool: the life ends.

    A BaseException, as SystemExit is: raised inside the agent's own ``input()`` (kind 2),
    it must not be caught by the agent's ``except Exception`` and answered by a guess."""


def scenario_answer(
    approvals: Mapping[str, str], again_answers: Mapping[str, str], tool: str, *, again: bool
) -> bool:
    """The scenario's answer for ``tool`` as the reference agent's ScriptedApprover (and the
    framework adapters) give it: by tool, ``*`` for any, yes by default; ``approvals_again``
    for a re-ask when the scenario has one."""
    table = again_answers if again and again_answers else approvals
    answer = table.get(tool, table.get("*", approvals.get("*", "yes")))
    return str(answer).lower() in ("yes", "y", "true")


# -- one process per message ----------------------------------------------------------------


def per_process_messages(pending: Sequence[str], entries: Sequence[Entry]) -> tuple[str, ...]:
    """The messages a life starts an agent with, one process each, for an agent that takes one
    user message per process (``input.via: argv | env``, ``per_process: true``).

    ``pending``: the scenario's turns the session does not show received (a turn whose user
    message the agent never saved is sent again; one it saved never is). ``entries``: the
    session (or the conversation the model saw). A process given the next turn recovers what
    a killed one left before it takes that turn, as such an agent does at every start; with no
    turn left and the last one unfinished (no final answer after its user message) the agent is
    started once with an empty message, to recover and finish it: "" means resume only."""
    if pending:
        return tuple(pending)
    messages = [entry.message for entry in entries if isinstance(entry, MessageEntry)]
    if not any(message.role == "user" for message in messages):
        return ()
    last = messages[-1]
    return () if last.role == "assistant" and not last.tool_calls else ("",)


# -- stdin: turns and approvals ------------------------------------------------------------


class Conversation:
    """Answers what the agent asks on stdin: approvals by the scenario, turns in order."""

    def __init__(self, spec: ForeignSpec, turns: Sequence[str], ctx: LifeContext) -> None:
        self.turns = list(turns)
        self.ctx = ctx
        self.spec = spec
        self._approval = (
            re.compile(rf"(?:\A|\n)(?:{spec.approval_prompt})[ \t]*\Z") if spec.approval_prompt else None
        )
        self._input = re.compile(rf"(?:\A|\n)(?:{spec.input_prompt})[ \t]*\Z")
        self._by_text = [(tool, re.compile(text)) for tool, text in spec.approval_prompts]
        # Set once a prompt could not be answered: every later read raises it again (the
        # agent may have caught it), and a supervisor re-raises it when the agent is gone.
        self.unanswered: UnansweredApproval | None = None

    # -- approvals ---------------------------------------------------------------------------

    def _tool_of(self, match: re.Match[str], text: str) -> tuple[str | None, str]:
        """The suite's tool the prompt asks about, or None and why it is tied to none."""
        named = match.groupdict().get("tool")
        if named is not None:
            return self.spec.dialect.tools.suite_name(named), ""
        tools = list(dict.fromkeys(tool for tool, pattern in self._by_text if pattern.search(text)))
        if len(tools) == 1:
            return tools[0], ""
        if tools:
            return None, f"its text matches approvals.prompts for {' and '.join(tools)}"
        return None, "names no tool"

    def _asked_before(self, key: str) -> bool:
        """Whether this is a re-ask by occurrence: the k-th ask of ``key`` in this life, when an
        earlier life asked about it k times or more. Written down before the answer is given."""
        path = self.ctx.case_dir / ASKED
        counts: Counter[int] = Counter()
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    seen = json.loads(line)
                except ValueError:
                    continue  # a line cut by the kill: that question was never answered
                if isinstance(seen, dict) and seen.get("key") == key:
                    counts[int(seen.get("life", 0))] += 1
        occurrence = counts[self.ctx.life] + 1
        return any(n >= occurrence for life, n in counts.items() if life < self.ctx.life)

    def _note(self, key: str, again: bool, approved: bool) -> None:
        line = {"life": self.ctx.life, "key": key, "again": again, "approved": approved}
        # One write(): a kill after it keeps the whole line (the page cache outlives the process).
        fd = os.open(self.ctx.case_dir / ASKED, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (json.dumps(line, ensure_ascii=False) + "\n").encode("utf-8"))
        finally:
            os.close(fd)

    def _refuse(self, text: str, tool_why: str, answers: Mapping[str, bool], again: bool) -> None:
        table = "approvals_again" if again and self.ctx.approvals_again else "approvals"
        said = ", ".join(f"{tool}: {'yes' if yes else 'no'}" for tool, yes in answers.items())
        why = (
            f"the agent asked {text!r}, which {tool_why}, and the scenario's {table} differ by "
            f"tool ({said}): any answer could be the one it forbids; tie the prompt to its tool in "
            f"adapter {self.spec.name}'s approvals.prompts (e.g. prompts: {{<tool>: '<text only "
            f"that prompt has>'}}) or with a (?P<tool>...) group in approvals.prompt "
            f"({self.spec.approval_where})"
        )
        self.ctx.trace({"event": UNANSWERED_APPROVAL, "prompt": text, "why": why})
        self.unanswered = UnansweredApproval(why)
        raise self.unanswered

    def _approve(self, match: re.Match[str]) -> str:
        text = match.group(0).strip()
        tool, tool_why = self._tool_of(match, text)
        key = f"tool:{tool}" if tool is not None else f"prompt:{text}"
        # An agent whose prompt can say "again" says itself which asks are re-asks (as the
        # reference agent does: an approval it lost is asked afresh); one whose prompt cannot
        # is asked the same way twice, so only the occurrence tells.
        again = bool(match.group("again")) if "again" in match.re.groupindex else self._asked_before(key)
        approvals, again_answers = self.ctx.approvals, self.ctx.approvals_again
        if tool is not None:
            approved = scenario_answer(approvals, again_answers, tool, again=again)
        else:
            # Tied to no tool: truthful only when every tool of the scenario gets one answer.
            tools = self.ctx.scenario.tools or ("*",)
            answers = {t: scenario_answer(approvals, again_answers, t, again=again) for t in tools}
            if len(set(answers.values())) > 1:
                self._refuse(text, tool_why, answers, again)
            approved = next(iter(answers.values()))
        self._note(key, again, approved)
        return self.spec.approval_yes if approved else self.spec.approval_no

    def answer(self, output: str, *, waiting: bool) -> str | None:
        """The line to write for ``output`` (what the agent printed since the last answer):
        an approval, the next turn, or "" for end of input. None: not a prompt (yet).
        ``waiting``: the agent is known to be reading (in-process), so anything is a turn prompt.
        Raises ``UnansweredApproval`` for an approval the scenario does not answer for its tool."""
        if self.unanswered is not None:
            raise self.unanswered
        if self._approval is not None:
            match = self._approval.search(output)
            if match:
                return self._approve(match) + "\n"
        if waiting or self._input.search(output):
            return self.turns.pop(0) + "\n" if self.turns else ""
        return None


class _Console:
    """The in-process agent's stdout (its tail kept to match prompts, copied to a bounded log:
    ``CappedLog``) and stdin."""

    def __init__(self, conversation: Conversation, log: CappedLog) -> None:
        self.conversation = conversation
        self.log = log
        # What it printed since the last answer, as pieces: only its last _PROMPT_WINDOW
        # characters are ever matched, and re-slicing one string on every print of a flood
        # would copy the window each time.
        self.pending: list[str] = []
        self.pending_size = 0
        # Buffered like the text file it replaces (8 KiB): a flood of short prints is not a
        # system call each; what is buffered goes at a flush, a full buffer and an answer.
        self.unwritten = bytearray()

    def write(self, text: str) -> int:
        self.unwritten += text.encode("utf-8", "replace")
        if len(self.unwritten) >= _BUFFER:
            self.flush()
        self.pending.append(text)
        self.pending_size += len(text)
        if self.pending_size > 2 * _PROMPT_WINDOW:
            window = "".join(self.pending)[-_PROMPT_WINDOW:]
            self.pending, self.pending_size = [window], len(window)
        return len(text)

    def flush(self) -> None:
        if self.unwritten:
            self.log.write(bytes(self.unwritten))
            self.unwritten.clear()

    def readline(self, size: int | None = -1) -> str:
        self.flush()
        line = self.conversation.answer("".join(self.pending)[-_PROMPT_WINDOW:], waiting=True) or ""
        self.log.write(line.encode("utf-8"))
        self.pending, self.pending_size = [], 0
        return line

    def read(self, size: int | None = -1) -> str:
        """The rest of stdin, as a text stream gives it: every line until the end (an agent
        that reads its whole input at once gets the turns left, one per line)."""
        lines: list[str] = []
        while line := self.readline():
            lines.append(line)
            if size is not None and 0 <= size <= sum(map(len, lines)):
                break
        return "".join(lines)

    def readlines(self, hint: int = -1) -> list[str]:
        return self.read().splitlines(keepends=True)

    def __iter__(self) -> _Console:
        return self

    def __next__(self) -> str:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return "utf-8"
