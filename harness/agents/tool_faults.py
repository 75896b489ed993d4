"""Tool-side faults: the tool server, not the agent, misbehaves on one call (issue 28).

The agent process survives these; the question the matrix asks is whether it then retries a
non-idempotent call, tells the model the truth and keeps one Tool Result per call. They act
on a call that reaches its tools over MCP (``harness.agents.mcp_relay``): the life's loopback
server asks ``take`` at the call's ``/mcp/begin`` and acts where the kind says:

* ``tool_server_died``       after the effect, before the response: the relay is SIGKILLed
                             (an HTTP relay comes back on the same port)
* ``tool_response_lost``     after the effect: the response is dropped (HTTP only: a pipe does
                             not lose one message)
* ``tool_result_error``      before anything ran: the agent is answered an MCP ``isError``
* ``tool_result_malformed``  after the effect: a result the client's SDK rejects

The same columns act on agents that reach the harness's mock tools or loopback services
(issue 32): ``tool_side`` gives a ``MockToolbox`` (the reference agent, any kind-1 adapter) or
a loopback server its ``mock_tools.calls.ToolSide``; the fault then acts where the tool's
client meets its backend (``mock_tools.calls``: httpx's own exceptions on the wire to the order
API, a dropped connection or a truncated answer of an in-process backend) or on the loopback
server's socket (``harness.agents.loopback``: the connection closed without a response, cut
mid-body, a 503, a truncated body).

A case of a tool-side column is a clean case with one fault armed for one call before life 1
(``arm``). ``take`` gives the kind once across all the case's lives: a restarted agent that
retries the call meets a healthy server, as after a real outage. The mark that it fired is
written durably (temp file, fsync, rename), because the life that took it may be killed the
next instant and the next life must not take it again.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crashmatrix.harness.core.tool_side import FAULT_EVENT, MCP_CALL_EVENT, TOOL_SIDE_KINDS
from crashmatrix.harness.errors import InputError
from crashmatrix.mock_tools.calls import ToolSide

if TYPE_CHECKING:
    from crashmatrix.harness.agents.protocol import LifeContext
    from crashmatrix.mock_tools.toolbox import MockToolbox
    from crashmatrix.mock_tools.world import World

__all__ = [
    "FAULT_FILE",
    "TOOL_SIDE_KINDS",
    "UNSCRIPTED_REPLY",
    "ToolSideFault",
    "arm",
    "armed",
    "mock_toolbox",
    "take",
    "tool_side",
]

FAULT_FILE = "tool-side-fault.json"
# The model's words where a tool-side case's script has none (``ScriptedModel.unscripted``): it
# ends the turn, asking the agent for nothing, so what happens next is the agent's own doing.
UNSCRIPTED_REPLY = "I could not finish that; I will leave it here."


@dataclass(frozen=True, slots=True)
class ToolSideFault:
    """``kind`` (one of ``TOOL_SIDE_KINDS``) acts on the tool call ``call_id``."""

    kind: str
    call_id: str

    def __post_init__(self) -> None:
        if self.kind not in TOOL_SIDE_KINDS:
            raise InputError(f"tool-side fault {self.kind!r}: write one of {', '.join(TOOL_SIDE_KINDS)}")


def _write(path: Path, data: dict[str, object]) -> None:
    """Replace ``path`` with ``data``, durably: a reader sees the old file or the new one."""
    temp = path.with_name(f".{path.name}.tmp")
    with open(temp, "w", encoding="utf-8") as out:
        out.write(json.dumps(data, sort_keys=True))
        out.flush()
        os.fsync(out.fileno())
    os.replace(temp, path)
    with contextlib.suppress(OSError):  # the rename itself is durable once the folder is synced
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def arm(case_dir: Path, fault: ToolSideFault) -> None:
    """Arm ``fault`` for the case in ``case_dir`` (before its first life)."""
    _write(case_dir / FAULT_FILE, {"kind": fault.kind, "call_id": fault.call_id, "fired": False})


def armed(case_dir: Path) -> ToolSideFault | None:
    """The fault armed in ``case_dir``, fired or not (None: none)."""
    try:
        data = json.loads((case_dir / FAULT_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return ToolSideFault(str(data["kind"]), str(data["call_id"]))


def take(case_dir: Path, call_id: str) -> str | None:
    """The kind of the fault armed for ``call_id`` if it has not fired yet in any life, marked
    fired before it is returned; None otherwise (no fault, another call, already fired).

    Callers in one life take from one thread at a time (the loopback server's edge lock)."""
    path = case_dir / FAULT_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    if data.get("fired") or data.get("call_id") != call_id:
        return None
    _write(path, {**data, "fired": True})
    return str(data["kind"])


def tool_side(case_dir: Path, trace: Callable[[Mapping[str, Any]], None], via: str) -> ToolSide:
    """The tool side of the calls a life's mock tools or loopback server run (``via`` says
    which, in the trace): each request is an ``mcp_call`` event (the name the MCP columns
    gave it: the plan reads the calls that reached a tool side from it), the fault armed for
    its call is taken once (``take``), and a fault that acted is a ``fault`` event."""

    def saw(call_id: str, tool: str) -> None:
        trace({"event": MCP_CALL_EVENT, "call": call_id, "tool": tool, "via": via})

    def reach(call_id: str, tool: str) -> str | None:
        saw(call_id, tool)
        return take(case_dir, call_id)

    def acted(kind: str, call_id: str, detail: str) -> None:
        trace({"event": FAULT_EVENT, "fault": kind, "call": call_id, "acted": True, "detail": detail})

    return ToolSide(reach, acted, saw)


def mock_toolbox(ctx: LifeContext, via: str = "mock tools", world: World | None = None) -> MockToolbox:
    """The harness's mock tools for one life of any adapter that runs them in its process (the
    reference agent, a kind-1 framework adapter's wrappers, an ``intercept:``ed function, a
    framework team's ``tools: harness``), with the case's tool side on every call: the one
    place a toolbox is built, so no adapter runs the mock tools where a tool-side column
    cannot act. ``via`` names the path in the trace; ``world``: the life's (default: a new
    one on ``ctx.world_dir``). A loopback server's toolbox is not built here: the server is
    its tool side (``harness.agents.loopback``), and a second one would see each call twice."""
    from crashmatrix.mock_tools.toolbox import MockToolbox
    from crashmatrix.mock_tools.world import World

    return MockToolbox(
        world if world is not None else World(ctx.world_dir),
        ctx.scenario.contracts,
        ctx.http,
        tool_side(ctx.case_dir, ctx.trace, via),
    )
