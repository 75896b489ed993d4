"""Tool-side faults as values: the columns of the matrix where the tool server, not the agent,
misbehaves on one call, and what a case's trace says about them (pure).

The agent process survives these. Each kind is one real-world failure of the tool side:

=======================  ==================================================================
kind                     what happens to the call (the agent lives on)
=======================  ==================================================================
tool_server_died         the effect happened; the server is SIGKILLed before it answers
                         (and restarted: a sandbox or MCP server coming back)
tool_response_lost       the effect happened; the response is lost on the way (HTTP: the
                         connection closes mid-response)
tool_result_error        nothing ran; the agent is answered an error result (MCP ``isError``)
tool_result_malformed    the effect happened; the answer is one the client's SDK rejects
=======================  ==================================================================

The life that serves the call writes the trace: one ``mcp_call`` event per request that
reached the tool server (``{"event": "mcp_call", "call": id, "tool": name, "life": n}``),
and one ``fault`` event when a fault acted on it (``{"event": "fault", "fault": kind,
"call": id, "acted": true}``). The plan reads the first to know which calls can take a
fault (``harness.plan.enumeration.tool_side_points``); the verdict reads both to know which
call was left without a readable answer and whether the agent got one afterwards.

Nothing here is MCP-specific but the event's name: a tool side reached another way (the mock
world's services, issue 32) writes the same events and gets the same columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANSWER_LOST",
    "DIED_ON_FAULT",
    "FAULT_EVENT",
    "MCP_CALL_EVENT",
    "TOOL_SIDE_KINDS",
    "ToolFaultActed",
    "died_on_fault_note",
    "tool_faults_acted",
    "tool_side_calls",
]

TOOL_SIDE_KINDS = ("tool_server_died", "tool_response_lost", "tool_result_error", "tool_result_malformed")
# The kinds that act after the effect: the call may have happened, the agent cannot read how.
ANSWER_LOST = ("tool_server_died", "tool_response_lost", "tool_result_malformed")
MCP_CALL_EVENT = "mcp_call"
FAULT_EVENT = "fault"  # the trace's event for any fault the harness applied (a power loss too)
# How a life's error starts when the agent died on a tool-side fault (raised, exited non-zero
# after it acted) and was restarted (``harness.lives.injector.died_on_fault``); its case's note
# is "life N died: on the tool-side fault KIND[call], ...", which the reports list apart.
DIED_ON_FAULT = "on the tool-side fault"


@dataclass(frozen=True, slots=True)
class ToolFaultActed:
    """A tool-side fault that acted on call ``call``, and what the agent asked the tool side
    afterwards: each later request as (call id, tool name), in order. A later request for the
    same call (a retry) or for the lookup tool of its contract is how an agent gets the
    readable answer the fault took away."""

    kind: str
    call: str
    later: tuple[tuple[str, str], ...] = ()

    def retried(self) -> bool:
        """Whether the agent sent the call to the tool side again after the fault."""
        return any(call == self.call for call, _ in self.later)

    def asked(self, tool: str) -> bool:
        """Whether the agent called ``tool`` on the tool side after the fault (a lookup)."""
        return any(name == tool for _, name in self.later)


def tool_side_calls(trace: Sequence[Mapping[str, Any]], life: int | None = None) -> list[str]:
    """The calls that reached the tool side (``mcp_call`` events), each once, in the order
    they first did; of one life, or of every life. A request the life could attribute to no
    model tool call (``"attributed": false``) names no call a case could arm a fault for."""
    calls: dict[str, None] = {}
    for event in trace:
        if event.get("event") != MCP_CALL_EVENT or (life is not None and event.get("life") != life):
            continue
        if event.get("attributed") is False:
            continue  # a request no model tool call was handed out for: no call to name a case by
        calls.setdefault(str(event.get("call")), None)
    return list(calls)


def tool_faults_acted(trace: Sequence[Mapping[str, Any]]) -> tuple[ToolFaultActed, ...]:
    """Every tool-side fault that acted, in trace order, each with the tool-side requests
    that came after it (in any life: a restarted agent that looks the call up counts)."""
    out: list[ToolFaultActed] = []
    for index, event in enumerate(trace):
        if event.get("event") != FAULT_EVENT or event.get("fault") not in TOOL_SIDE_KINDS:
            continue
        if not event.get("acted"):
            continue
        later = tuple(
            (str(e.get("call")), str(e.get("tool")))
            for e in trace[index + 1 :]
            if e.get("event") == MCP_CALL_EVENT
        )
        out.append(ToolFaultActed(str(event["fault"]), str(event.get("call")), later))
    return tuple(out)


def died_on_fault_note(notes: Sequence[str]) -> str | None:
    """The note of a case saying its agent died on a tool-side fault and was restarted (None:
    no life did). A passed case with one is green, and said apart in the reports: a team may
    require an agent to survive a tool's failure in one life."""
    return next((note for note in notes if f" died: {DIED_ON_FAULT} " in note), None)
