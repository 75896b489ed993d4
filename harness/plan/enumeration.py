"""Which crash points a case matrix has: every point a clean run passed (ALICE-style), the
recovery window of a restarted life, and selection by the scenario and the command line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from crashmatrix.harness.core.boundaries import BOUNDARIES, TORN_WRITE, CrashPoint
from crashmatrix.harness.core.double_resume import DOUBLE_COLUMN
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS, tool_side_calls

__all__ = [
    "DOUBLE_BOUNDARIES",
    "DOUBLE_COLUMN",
    "NOTHING_REACHED",
    "OWN_FUNCTIONS",
    "POWER_BOUNDARIES",
    "POWER_COLUMN",
    "RECOVERY_FIRST",
    "TOOL_SIDE_COLUMNS",
    "adapter_double_unreachable",
    "adapter_tool_side_unreachable",
    "by_call",
    "double_points",
    "double_unreachable",
    "points_from_trace",
    "power_points",
    "recovery_window",
    "tool_side_points",
    "tool_side_unreachable",
]


def points_from_trace(trace: Sequence[Mapping[str, Any]], life: int = 1) -> list[CrashPoint]:
    """Every crash point a life passed, in the order it passed them (ALICE-style enumeration).

    Torn writes are the trace's ``append`` events: a native agent's appends through
    ``ctx.before_append``, a foreign JSONL session's lines as the supervisor saw them
    (``harness.agents.foreign``). An agent whose writes cannot be torn has none, and its
    adapter says why (``torn_write_unreachable``)."""
    points: list[CrashPoint] = []
    for event in trace:
        if event.get("life") != life:
            continue
        if event.get("event") == "boundary":
            points.append(CrashPoint(event["boundary"], event["call"], event["occurrence"]))
        elif event.get("event") == "append":
            points.append(CrashPoint(TORN_WRITE, event["call"], event["occurrence"], event["label"]))
    return points


def by_call(points: Sequence[CrashPoint], scenario: Scenario) -> list[CrashPoint]:
    """The points of an agent that runs a message's calls at the same time (a framework's
    parallel tool calls), grouped by call in the order the scenario's model hands the calls
    out, each call's own points in the order it passed them.

    Two clean runs of such an agent interleave its calls' boundaries differently; the items
    must not (pytest-xdist refuses workers that collected different orders, and a rerun line
    names the same case either way). A call's own points come from one thread, in one order."""
    scripted = [call for rule in scenario.rules for call, _, _ in rule.reply.tool_calls]
    rank = {call: index for index, call in reversed(list(enumerate(scripted)))}
    unscripted = sorted({p.tool_call_id for p in points} - set(rank))  # ids the agent made up: by id
    rank.update({call: len(scripted) + index for index, call in enumerate(unscripted)})
    return sorted(points, key=lambda point: rank[point.tool_call_id])  # stable: each call's own order


def recovery_window(
    trace: Sequence[Mapping[str, Any]], life: int = 2, *, torn: bool = False
) -> list[CrashPoint]:
    """The crash points a restarted life passed while recovering: its boundaries before it
    first asked the model, and with ``torn`` its session appends there too (each a torn write
    of its own recovery records: the ``unknown`` closing an interrupted execution, a
    reconcile's lookup, the Tool Result it publishes), in the order it passed them.

    An agent cannot ask the model before every pending call has its Tool Result (the API
    refuses a prompt with an unanswered tool call), so what comes after is the
    conversation going on: a crash there is a first crash in a later state, which the
    matrix has as its own items. A life that never asked the model, or asked before
    passing any point, is all window.

    Torn writes are opt-in (a scenario's ``recovery_torn_writes``): each adds two lives to its
    ``recovery@P`` item, and a boundary right after the append already shows the record
    whole; what a torn one adds is the recovering writer's handling of its own half line."""
    window: list[CrashPoint] = []
    everything: list[CrashPoint] = []
    asked = False
    for event in trace:
        if event.get("life") != life:
            continue
        if event.get("event") == "model_request":
            asked = True
            continue
        if event.get("event") == "boundary":
            point = CrashPoint(event["boundary"], event["call"], event["occurrence"])
        elif event.get("event") == "append" and torn:
            point = CrashPoint(TORN_WRITE, event["call"], event["occurrence"], event["label"])
        else:
            continue
        everything.append(point)
        if not asked:
            window.append(point)
    return window or everything


# First crashes after which recovery does real work worth crashing again.
RECOVERY_FIRST = ("after_approved", "after_running", "after_side_effect", "before_tool_result")


# A power loss at each boundary's first passage for a call: the moments where what was synced
# decides what the restarted agent sees. Not torn_write (a cut line is itself a partial
# write) and not a repeated passage of the same boundary (the first shows what the loop syncs).
POWER_BOUNDARIES = BOUNDARIES
# The matrix column of power@P items and the CaseResult's boundary.
POWER_COLUMN = "power_loss"


def power_points(points: Sequence[CrashPoint]) -> list[CrashPoint]:
    """The points of a matrix that also get a ``power@P`` case."""
    return [p for p in points if p.boundary in POWER_BOUNDARIES and p.occurrence == 1]


# The tool-side columns: one per kind of fault the tool side can do to a call while the agent
# lives on (``harness.core.tool_side``). Their items are named like crash points, the column
# being the kind: ``tool_server_died[call_1]``.
TOOL_SIDE_COLUMNS = TOOL_SIDE_KINDS


def tool_side_points(
    trace: Sequence[Mapping[str, Any]],
    order: Sequence[CrashPoint] = (),
    kinds: Sequence[str] = TOOL_SIDE_COLUMNS,
) -> list[CrashPoint]:
    """The tool-side items of a matrix: for each kind, one per call that reached the tool side
    in the clean run (life 1's ``mcp_call`` events, first occurrence per call).

    A case arms the fault for the call's first request: a retry of the same call is the
    agent's answer to the fault, not another place for it. ``order``: the clean run's crash
    points as the items list them; calls are taken in that order (an agent that runs a
    message's calls at once reaches the tool side in a different order each run, and every
    xdist worker must collect the same items), a call no point names after them."""
    calls = tool_side_calls(trace, life=1)
    rank = {call: index for index, call in reversed(list(enumerate(p.tool_call_id for p in order)))}
    ordered = sorted(calls, key=lambda call: (rank.get(call, len(rank)), calls.index(call)))
    return [CrashPoint(kind, call) for kind in kinds for call in ordered]


# Why a pipe cannot lose a response: the tool_response_lost column of a stdio MCP agent.
STDIO_KEEPS_RESPONSES = (
    "stdio transport: a pipe does not lose one message (a server that stops answering is a "
    "hang only the agent's own timeout ends); mcp: transport: http has this column"
)


# Why a column that could act on the agent has no item: the clean run passed crash points, but
# none of its calls crossed to a tool side the harness serves.
NOTHING_REACHED = (
    "no call of the clean run reached a tool side crashmatrix serves (every call was refused "
    "before it ran, or went to the agent's own code: a tool it did not intercept, a server of "
    "its own)"
)
# Why a team's own tool functions cannot take a tool-side fault (``tools: agent``, no services,
# nothing intercepted).
OWN_FUNCTIONS = (
    "its tools are its own functions (tools: agent; their effects watched through effects:): "
    "nothing stands between a tool and its effect for the harness to fail; a function routed to "
    "the mock tools (intercept:), its calls to crashmatrix's loopback services (services:) or "
    "MCP server (tools: mcp) would have these columns"
)


def tool_side_unreachable(
    agent: str,
    tools: str | None,
    transport: str = "stdio",
    services: Sequence[str] = (),
    intercepts: Sequence[str] = (),
) -> dict[str, str]:
    """Why each tool-side column cannot act on an agent, by its adapter's ``tools:``, ``mcp:
    transport``, ``services:`` and ``intercept:``ed tools; a column not named can, on each call
    that reaches a tool side in the clean run (``tool_side_points``).

    The faults act wherever a call crosses from the agent to a tool side the harness serves:
    the harness's mock tools (``tools`` None, a Python adapter such as the reference agent or a
    kind-1 framework adapter's wrappers of them; ``harness``: on the loopback's socket for an
    agent that calls them over HTTP, between each tool's client and its backend for a
    framework team's in-process calls; an ``intercept:``ed function, replaced by the mock
    tool), its loopback services (``services:``), its MCP server (``mcp``: a process of its
    own, to kill, cut off or have answer wrong). A team's own tool functions (``agent``,
    nothing intercepted) have nothing between the call and the effect. Over stdio a lost
    response is not a failure a pipe has."""
    if tools == "agent" and not services and not intercepts:
        why = f"adapter {agent}: {OWN_FUNCTIONS}"
        return dict.fromkeys(TOOL_SIDE_COLUMNS, why)
    if tools == "mcp" and transport == "stdio":
        return {"tool_response_lost": STDIO_KEEPS_RESPONSES}
    return {}


def adapter_tool_side_unreachable(agent: str, spec: Any) -> dict[str, str]:
    """``tool_side_unreachable`` read off an adapter's spec (``adapter_file.ForeignSpec``; None
    or any other object: a Python adapter, which runs the mock tools itself)."""
    return tool_side_unreachable(
        agent,
        getattr(spec, "tools", None),
        getattr(spec, "mcp_transport", "stdio"),
        getattr(spec, "services", ()),
        tuple(intercept.tool for intercept in getattr(spec, "intercepts", ())),
    )


# The double-resume column: ``double@P`` items, two lives resuming P's first crash at once
# (``harness.lives.double_resume``). At the first passage of the points where a call is
# pending with nothing of its fate written (its assistant message saved) and where its
# running record is written but no terminal one: recovery decides the call's fate there, so
# two recoverers decide it twice. Later points leave nothing pending but the next model
# request, which the same race reaches through the same gate (not worth another item).
DOUBLE_BOUNDARIES = ("after_tool_call_saved", "after_running")


def double_points(points: Sequence[CrashPoint]) -> list[CrashPoint]:
    """The points of a matrix that also get a ``double@P`` case."""
    return [p for p in points if p.boundary in DOUBLE_BOUNDARIES and p.occurrence == 1]


# Why a team's agent that writes its own session cannot have a double resume judged, by what
# stands in the way (``double_unreachable``).
DOUBLE_NOT_NATIVE = (
    "is a Python adapter that does not append its session through ctx.before_append "
    "(double_resume = True) and has no adapter file saying where its effects are made: "
    "neither its lines nor its effects can be told to the life that made them"
)
DOUBLE_FRAMEWORK = (
    "keeps its session in its framework's store, which keeps the state it last wrote (a "
    "checkpoint, a row replaced), not every record each of two writers made: a second Tool "
    "Result the other life overwrote is nowhere to judge"
)
DOUBLE_PROBED = (
    "makes effects the harness finds by probing the world (effects:, an MCP server of its own): "
    "either life's probe may find the other's, so who acted cannot be told (the harness's "
    "mock tools, its loopback services and MCP relay, are each life's own, and are)"
)
DOUBLE_UNSEEN = (
    "calls only tools of its own (tools: agent, no services:, no intercept:): no effect of "
    "either life is seen, so neither who acted nor a second effect can be judged"
)
DOUBLE_STORE = (
    "keeps its session where the harness reads rows, not a log (a SQLite query, a reader, "
    "nothing readable): a row one life replaced hides what the other wrote, and the two lives' "
    "lines are judged only together, as the session keeps them (a JSONL file keeps every line)"
)


def adapter_double_unreachable(agent: str, adapter: Any) -> str | None:
    """``double_unreachable`` read off an adapter: ``double_resume`` (it appends its session
    through ``ctx.before_append``), ``spec`` (its ``adapter_file.ForeignSpec``, where it has
    one) and ``framework_store`` (a ``langgraph:`` / ``openai-agents:`` adapter: its session
    is its framework's store)."""
    spec = getattr(adapter, "spec", None)
    # Only an adapter file's spec has a kind: a `spec` of any other adapter is not one (the
    # kind-1 adapters' --agent text was, and every --agent=langgraph: scenario failed here).
    return double_unreachable(
        agent,
        bool(getattr(adapter, "double_resume", False)),
        spec if hasattr(spec, "kind") else None,
        framework_store=bool(getattr(adapter, "framework_store", False)),
    )


def double_unreachable(
    agent: str, native: bool, spec: Any = None, *, framework_store: bool = False
) -> str | None:
    """Why two lives resuming one session at once cannot be judged on this agent, or None.

    ``native``: the agent appends its session lines through ``ctx.before_append`` in the
    life's own process (the reference agent and its variants): the gate holds each life at
    its first step and each line is the life's that wrote it.

    ``spec``: a team's adapter file (``adapter_file.ForeignSpec``), whose agent writes its own
    session. Its lines cannot be told to a life -- each life's watch reads the file's new tail,
    which holds the other's lines too -- and need not be: its effects can, when every effect is
    made by a tool side the life serves itself (the mock tools, the loopback services, the MCP
    relay: each life its own, in its own process, the effect carrying that pid); two Tool
    Results for one call are ``one_tool_result_per_call``'s whoever wrote them, provided the
    session keeps every line written (a JSONL file, appended to); the loser is the life that
    made no effect and ended on its own. The gate holds each life at its first request to its
    loopback server. A framework's store, a session of rows, or effects found by probing the
    world (whose probe found them is not who made them) leave the case unjudgeable: not
    reachable, with why."""
    if native:
        return None
    if framework_store or (spec is not None and spec.kind == "framework"):
        return f"adapter {agent} {DOUBLE_FRAMEWORK}"
    if spec is None:
        return f"adapter {agent} {DOUBLE_NOT_NATIVE}"
    if spec.effects or spec.mcp_proxy is not None:
        return f"adapter {agent} {DOUBLE_PROBED}"
    if spec.tools == "agent" and not spec.services and not spec.intercepts:
        return f"adapter {agent} {DOUBLE_UNSEEN}"
    if spec.source.kind != "jsonl":
        return f"adapter {agent} {DOUBLE_STORE}"
    return None


def selected(
    points: Sequence[CrashPoint], scenario: Scenario, boundaries: Sequence[str] = ()
) -> list[CrashPoint]:
    chosen = [p for p in points if scenario.covers(p)]
    if boundaries:
        chosen = [p for p in chosen if p.boundary in boundaries or p.id in boundaries]
    return chosen
