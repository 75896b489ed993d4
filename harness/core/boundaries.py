"""The named crash boundaries of a tool call, and the hook an agent calls at each.

An agent that wants to be tested precisely calls ``hook(boundary, tool_call_id)`` at each of
these points of its loop (a few lines). The crash injector decides, per life, whether that
call returns or the process dies there with SIGKILL.

=========================  ===============================================================
boundary                   what is durable when the process dies here
=========================  ===============================================================
after_model_reply          nothing: the model's reply with tool calls is only in memory
after_tool_call_pending    the reply is durable where the agent will reuse it on resume (a
                           framework's pending write), but the conversation does not show it
after_tool_call_saved      the assistant message with the tool call; no ledger line yet
after_approved             ledger ``approved``; the tool has not started
after_running              ledger ``running`` (fsynced); the side effect has not happened
during_side_effect         the k-th step of a multi-step side effect is done, the rest is not
                           (the tool's temp file written but not renamed, one of two appends)
after_side_effect          the side effect happened; its terminal ledger line is not written
before_tool_result         terminal ledger line with its result; no Tool Result message yet
after_tool_result          the Tool Result message; the model has not been asked again
=========================  ===============================================================

``after_model_reply`` and ``after_tool_call_pending`` are reached once per model reply that
has tool calls, named by its FIRST tool call (``after_model_reply[call_1]`` for a reply with
``call_1`` and ``call_2``): they are moments of the reply, not of one call. An agent that
saves a reply in one write (the reference agent, seed 000) has no ``after_tool_call_pending``;
LangGraph has one (the model node's pending write, before the checkpoint that commits it).
The state at ``after_model_reply`` is the state before the model was asked: a correct agent
asks again and loses nothing (the user's turn is still unanswered, not done).

``during_side_effect`` is reached only inside tools whose effect has several steps: the tool
calls ``ToolContext.step`` between them and the agent turns that into
``hook("during_side_effect", tool_call_id)``. Its occurrence is the step: the point
``during_side_effect[call_1]`` is after step 1 of the call's effect, ``during_side_effect[call_1#2]``
after step 2 (counted per life, like every occurrence, so a replay's steps continue the count).
A tool whose effect is one step never reaches it.

Besides these, ``torn_write`` kills the process in the middle of appending a session line
(the injector writes a prefix of the line, then SIGKILL), and a crash point may be hit again
while the restarted agent recovers (depth 2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from crashmatrix.harness.errors import InputError

__all__ = [
    "BOUNDARIES",
    "TORN_WRITE",
    "BoundaryHook",
    "CrashPoint",
    "no_hook",
    "parse_point",
]

BOUNDARIES = (
    "after_model_reply",
    "after_tool_call_pending",
    "after_tool_call_saved",
    "after_approved",
    "after_running",
    "during_side_effect",
    "after_side_effect",
    "before_tool_result",
    "after_tool_result",
)
TORN_WRITE = "torn_write"


class BoundaryHook(Protocol):
    def __call__(self, boundary: str, tool_call_id: str) -> None: ...


def no_hook(boundary: str, tool_call_id: str) -> None:
    """The hook of a production run: boundaries are just points in the code."""


@dataclass(frozen=True, slots=True, order=True)
class CrashPoint:
    """One place to kill the agent: the ``occurrence``-th time (1-based) that ``boundary``
    is reached for ``tool_call_id`` in a life. ``torn_write`` points name the record being
    appended in ``label`` (``running``, ``succeeded``, ``tool_result``, ...)."""

    boundary: str
    tool_call_id: str
    occurrence: int = 1
    label: str = ""

    @property
    def id(self) -> str:
        """Stable test id: ``after_running[call_1]``, ``torn_write[call_1:running]``,
        ``after_running[call_1#2]`` for a second occurrence; for ``during_side_effect`` the
        occurrence is the step of the effect (``during_side_effect[call_1#2]``: after step 2)."""
        inner = self.tool_call_id
        if self.label:
            inner += f":{self.label}"
        if self.occurrence != 1:
            inner += f"#{self.occurrence}"
        return f"{self.boundary}[{inner}]"


_POINT = re.compile(
    r"^(?P<boundary>[a-z_]+)\[(?P<call>[^\]:#]+)(?::(?P<label>[^\]#]+))?(?:#(?P<occ>\d+))?\]$"
)


def parse_point(text: str) -> CrashPoint:
    """The inverse of ``CrashPoint.id``."""
    match = _POINT.match(text)
    if match is None:
        raise InputError(f"{text!r} is not a crash point id such as after_running[call_1]")
    return CrashPoint(match["boundary"], match["call"], int(match["occ"] or 1), match["label"] or "")
