"""A LangGraph agent, crashed at LangGraph's own seams: a team's graph as it is, declared in an
adapter YAML (``framework: langgraph``: ``drive``, ``read_records``, ``check``, ``FRAMEWORK``
at the end of this module, the common part being kind 2's ``ForeignAdapter``), or a graph on
crashmatrix's mock tools, ``--agent=langgraph:package.module:factory`` (``LangGraphAdapter``).

For the latter, the user's factory builds the graph from a ``GraphContext``::

    def build(ctx: GraphContext) -> CompiledStateGraph:
        ...  # ctx.model (ChatOpenAI), ctx.tools (LangChain tools), ctx.checkpoint_path
        return graph.compile(checkpointer=SqliteSaver(sqlite3.connect(ctx.checkpoint_path, ...)))

A life sends the scenario's user turns as ``HumanMessage``s on one thread. A restarted life
first resumes what the last checkpoint left pending, with LangGraph's own API
(``graph.invoke(None, config)`` on the same thread), then sends the turns the thread has not
received. Nothing of LangGraph is edited: the boundaries come from two wrappers.

* The checkpointer (the graph's ``SqliteSaver`` instance): its ``put`` and ``put_writes`` are
  wrapped on the instance. ``put_writes`` of the model node's ``AIMessage`` with tool calls is
  ``after_model_reply`` at its entry (the reply is only in memory) and
  ``after_tool_call_pending`` when it returned (the reply is a pending write LangGraph reuses
  on resume; no checkpoint shows it), once per reply, named by its first call. The other
  hooks run after LangGraph's own call returned (the row is committed). ``put`` of a
  checkpoint whose new messages hold an ``AIMessage`` with tool calls is
  ``after_tool_call_saved`` (one per call id); ``put_writes`` of a task's ``ToolMessage`` (the
  task's result saved as a pending write, not yet in a checkpoint: LangGraph reuses it on
  resume) is ``before_tool_result``; ``put`` of a checkpoint whose new messages hold the
  ``ToolMessage`` is ``after_tool_result``.
* The tools (``ctx.tools`` / ``ctx.run_tool``): the suite's tools run by crashmatrix's mock
  tools in the world, as kind 2's ``intercept:`` does. ``after_running`` is the moment just
  before the effect starts (LangGraph keeps no running record: nothing durable says the call
  began, unless the team's own tool saved one before calling), ``during_side_effect`` a step
  inside a multi-step effect, ``after_side_effect`` the effect done and the function about to
  return (its ``ToolMessage`` not saved anywhere yet).

Approvals, LangGraph's way: a tool (or a review node) asks a person with ``interrupt()``;
``invoke`` returns with the interrupt, and the life answers it with ``Command(resume=True)`` or
``Command(resume=False)`` from the scenario's ``approvals`` (``approvals_again`` when the payload
says ``again`` or the same call was answered in an earlier life). The payload names the call:
``{"tool": name, "tool_call_id": id, "arguments": {...}}`` (``GraphContext.ask_approval`` builds
it). LangGraph saves the answer as a pending write of the null task (``put_writes`` with
``__resume__``) and re-runs the interrupted node from its start, where ``interrupt()`` returns
the saved answer: that ``put_writes`` returned is ``after_approved``. LangGraph submits it to its
background pool while the node already re-runs, so the tool side waits for it (in
``ask_approval`` and before ``ctx.tools``' effect): the boundary is then one state, the answer
durable and the tool not past its approval. A factory says its graph asks
(``ctx.asks_for_approval()``); a graph that does not has the approval scenarios "not
applicable": the scenario's "no" could never reach it.

Moments with no boundary name (documented in docs/frameworks.md): inside a tool batch, the
first call's result in memory while the second runs (with calls one at a time, the state of
the first call's ``after_side_effect``).

The graph runs as the team runs it: ``durability`` is an option (sync, async, exit), by
default LangGraph's own ``"async"`` (a step's checkpoint is written by LangGraph's background
pool while the next step already runs), and ``max_concurrency`` is not set unless the team
sets it (``ToolNode`` runs the calls of one message in parallel threads, the pool saves in
parallel too). The hooks fire on the thread that made the write, once it returned. Four
orders are held so that each boundary stays one state (``_Saves``): a checkpoint showing a
result or a reply is committed after that message's own pending write, a tool starts after
the checkpoint holding its call, a model reply is written after the checkpoint it is
written against, and a model request is sent after the checkpoint of the step before
(``hold_model_requests``). What stays a race, said in docs/frameworks.md: with calls in
parallel, a kill at one call's boundary finds the other calls of its message anywhere (not
started, running, done). The verdict reads only what is durable and the world, so it is
true in every such state.
Under ``durability="exit"`` nothing is saved until the run returns: the boundaries of a
save are reached only then.

What the verdict reads (``observe``): the messages of the thread's latest checkpoint, read
from the SQLite file after the last life, as crashmatrix's records. LangGraph keeps no
execution ledger (``keeps_ledger = False``): ledger expectations and checks are not applicable.
"""

from __future__ import annotations

import contextvars
import dataclasses
import importlib
import json
import os
import sqlite3
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from crashmatrix.harness.agents.frameworks.langgraph_records import CheckpointMessages
from crashmatrix.harness.agents.protocol import MODEL_BASE_URL, LifeContext
from crashmatrix.harness.agents.team_life import (
    CLIENT_ENV,
    AgentFacts,
    DotModel,
    FrameworkInfo,
    TeamLife,
    client_env,
)
from crashmatrix.harness.core.boundaries import BOUNDARIES as ALL_BOUNDARIES
from crashmatrix.harness.core.boundaries import BoundaryHook
from crashmatrix.harness.core.capabilities import Capabilities
from crashmatrix.harness.core.categories import CRASHMATRIX, ResultMapping
from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.dialect import Dialect
from crashmatrix.harness.core.ledger import arguments_sha256
from crashmatrix.harness.core.records import entry_from_json
from crashmatrix.harness.core.session_log import SessionLog, encode_line
from crashmatrix.harness.core.toolmap import ToolMap, ToolName
from crashmatrix.harness.core.tools import ToolContext, ToolObservation
from crashmatrix.harness.core.trace import CaseRun
from crashmatrix.harness.errors import InputError, SessionCorruption
from crashmatrix.harness.observation.observation import Observation

__all__ = [
    "BOUNDARIES",
    "SUPPORTED",
    "ApprovalRequest",
    "GraphContext",
    "LangGraphAdapter",
    "approval_request",
    "ask_approval",
    "load",
]

THREAD_ID = "crashmatrix-case"
# [lowest, next major) of langgraph, the extra's range in pyproject.toml (test_versions.py),
# both ends tested in CI (.ci/frameworks runs this adapter's tests at the lowest). It relies on
# 1.x's live snapshot (a task whose writes were saved is out of ``next``, still in ``tasks``);
# below 1.1.5 the ToolNode of the langgraph-prebuilt pip brings with it does not import (it
# needs langgraph.runtime.ServerInfo, new in 1.1.5).
SUPPORTED = ((1, 1, 5), (2,))
SUPPORTED_TEXT = ">=1.1.5,<2"
CHECKPOINT_FILE = ".langgraph/checkpoints.sqlite"  # in the case's workspace: a copied case keeps it
# LangGraph's names for a resume's pending write (private in langgraph 1.x, so spelled here):
# Command(resume=v) is saved as (NULL_TASK_ID, RESUME, v) until the node that asked finishes.
RESUME = "__resume__"
# LangGraph's durability modes (``graph.invoke(..., durability=...)``) and its default: a
# step's checkpoint written while the next step runs.
DURABILITIES = ("sync", "async", "exit")
DURABILITY = "async"
NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"
# Where the life notes each approval it answered: "asked before, in an earlier life" is read
# from it (the person's memory, beside the case's trace; a copied case keeps it).
APPROVALS_FILE = "langgraph-approvals.jsonl"
# The boundaries this adapter reaches: every named one (torn_write is not one: the
# checkpoint is SQLite, there is no appended line to cut). after_approved only where a graph
# asks.
BOUNDARIES = ALL_BOUNDARIES
# Its Tool Results are crashmatrix's shape (the mock tools' results, or the team's own in it),
# but its recovery is LangGraph's, not crashmatrix's: the reference agent's outcome / code
# vocabulary is not applicable (verdict._VOCABULARY), what the model was told is.
RESULTS = ResultMapping("langgraph", CRASHMATRIX.rules)
DIALECT = Dialect(RESULTS, ToolMap.identity())
WHY_NOT_TORN = (
    "its conversation is LangGraph's SQLite checkpointer: SQLite writes rows through its own "
    "journal, there is no appended line to cut"
)
WHY_NO_APPROVAL = (
    "the factory's graph asks no approval (a factory whose graph calls interrupt() to ask says so "
    "with ctx.asks_for_approval())"
)
WHY_NO_POWER = (
    "the checkpoint is a SQLite database: SQLite syncs from its C library, which the harness's "
    "os.fsync recorder does not see, and a database is not cut back by length"
)


@dataclass(frozen=True)
class Driving:
    """How the team runs its graph: LangGraph's ``durability`` (default LangGraph's own,
    ``"async"``) and LangChain's ``max_concurrency`` (default none: ``ToolNode`` runs the
    calls of one message in parallel threads, LangGraph's pool saves in parallel too)."""

    durability: str = DURABILITY
    max_concurrency: int | None = None

    def config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"configurable": {"thread_id": THREAD_ID}}
        if self.max_concurrency is not None:
            config["max_concurrency"] = self.max_concurrency
        return config


def driving(options: Mapping[str, Any], where: str) -> Driving:
    """The options as a ``Driving``, or one line naming the option and what it takes."""
    durability = options.get("durability", DURABILITY)
    if durability not in DURABILITIES:
        raise InputError(f"{where}: durability: {durability!r} is not one of {', '.join(DURABILITIES)}")
    concurrency = options.get("max_concurrency")
    if concurrency is not None and (
        not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1
    ):
        raise InputError(f"{where}: max_concurrency: {concurrency!r} is not a whole number of at least 1")
    return Driving(str(durability), concurrency)


class _Approvals:
    """The life's side of an approval: whether the factory said its graph asks, and the
    answer being handed to LangGraph (its save is what the tool side waits for)."""

    def __init__(self) -> None:
        self.declared = False
        self.call = ""  # the call whose yes this life is handing over, "" when none
        self.saved = threading.Event()  # set once LangGraph's pending write of it returned

    def wait_saved(self, tool_call_id: str) -> None:
        """Hold the tool until LangGraph saved this life's answer for its call: LangGraph
        re-runs the node while its pool still writes the answer (the module's docstring)."""
        if self.call and self.call == tool_call_id and not self.saved.wait(30.0):
            raise RuntimeError(
                f"crashmatrix: LangGraph never saved the approval of {tool_call_id} (no pending "
                "write of __resume__); the adapter's after_approved does not hold"
            )


@dataclass(frozen=True)
class GraphContext:
    """What the user's factory gets to build its graph with, in each life.

    ``model``: a ``ChatOpenAI`` that talks to the scripted model (through the life's
    intercepted HTTP client). ``tools``: the scenario's tools as LangChain tools, run by
    crashmatrix's mock tools (their effects counted in the world). ``run_tool(name, arguments,
    tool_call_id, key="")``: the same tools as a plain function returning the Tool Result's
    JSON text, for a team's own tool that wraps the call (a ledger, an idempotency key).
    ``checkpoint_path``: the SQLite file for ``SqliteSaver`` (the adapter reads it back).
    ``ask_approval(tool_call)``: ask a person before a tool acts (``interrupt()``, see
    ``ask_approval``); a factory whose graph asks says so with ``asks_for_approval()``."""

    model: Any
    tools: tuple[Any, ...]
    run_tool: Callable[..., str]
    checkpoint_path: Path
    workspace: Path
    contracts: Mapping[str, ToolContract]
    model_base_url: str
    http: httpx.Client
    life: int
    approvals: _Approvals = field(default_factory=_Approvals, compare=False, repr=False)

    def asks_for_approval(self) -> None:
        """Say that this graph asks a person before a tool acts: the scenarios that answer an
        approval with no then apply to it (a graph that asks none has them not applicable)."""
        self.approvals.declared = True

    def ask_approval(self, tool_call: Mapping[str, Any], *, again: bool = False) -> bool:
        """``ask_approval`` (the module's), then, when this life gave the answer, wait until
        LangGraph saved it: after_approved is that save, and the tool goes on only after it."""
        approved = ask_approval(tool_call, again=again)
        self.approvals.wait_saved(str(tool_call.get("id", tool_call.get("tool_call_id", ""))))
        return approved


def ask_approval(tool_call: Mapping[str, Any], *, again: bool = False) -> bool:
    """Ask a person whether this tool call may run, LangGraph's way: ``interrupt()`` with the
    payload crashmatrix answers, ``{"tool": name, "tool_call_id": id, "arguments": args}``
    (``"again": True`` when asking about a call approved before a restart). The first time it
    stops the graph; the graph is resumed with ``Command(resume=True)`` (approved) or
    ``Command(resume=False)``, and the node runs again from its start, where this returns the
    answer. ``tool_call`` is LangChain's ``{"name", "args", "id"}`` or the payload's keys."""
    from langgraph.types import interrupt

    payload: dict[str, Any] = {
        "tool": tool_call.get("name", tool_call.get("tool")),
        "tool_call_id": tool_call.get("id", tool_call.get("tool_call_id")),
        "arguments": dict(tool_call.get("args", tool_call.get("arguments")) or {}),
    }
    if again:
        payload["again"] = True
    return interrupt(payload) is True


@dataclass(frozen=True)
class ApprovalRequest:
    """What an interrupt asks, read from its payload."""

    tool: str
    tool_call_id: str
    again: bool


def approval_request(spec: str, value: Any, tools: Sequence[str]) -> ApprovalRequest:
    """The tool call an interrupt's payload asks about, or an InputError saying what the
    payload must hold (crashmatrix answers by the tool, as the scenario's ``approvals:`` do)."""
    if isinstance(value, Mapping):
        tool, call, again = value.get("tool"), value.get("tool_call_id"), value.get("again", False)
        if (
            isinstance(tool, str)
            and tool in tools
            and isinstance(call, str)
            and call
            and isinstance(again, bool)
        ):
            return ApprovalRequest(tool, call, again)
    shown = repr(value)
    shown = shown if len(shown) <= 120 else shown[:117] + "..."
    raise InputError(
        f"--agent={spec!r}: the graph interrupted with {shown}, which crashmatrix cannot answer; "
        "interrupt with {'tool': <one of the scenario's tools: "
        f"{', '.join(tools) or 'none'}>, 'tool_call_id': <the call's id>, 'arguments': {{...}}}} "
        "(ctx.ask_approval(tool_call) does), and read True / False from the resume"
    )


def _answer(request: ApprovalRequest, ctx: LifeContext, asked_before: set[str]) -> bool:
    """The scenario's answer, as the reference agent's ScriptedApprover gives it: by tool,
    ``*`` for any, yes by default; ``approvals_again`` for a call asked again after a restart."""
    again = request.again or request.tool_call_id in asked_before
    table = ctx.approvals_again if again and ctx.approvals_again else ctx.approvals
    answer = table.get(request.tool, table.get("*", ctx.approvals.get("*", "yes")))
    return str(answer).lower() in ("yes", "y", "true")


# -- the user's factory ----------------------------------------------------------------------


def _factory(spec: str, target: str) -> Callable[[GraphContext], Any]:
    module_name, _, attr = target.partition(":")
    module = _import(f"--agent={spec!r}", module_name)
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise InputError(
            f"--agent={spec!r}: {module_name} has no function {attr!r}; "
            "write def build(ctx) -> a compiled LangGraph graph"
        )
    return factory  # type: ignore[no-any-return]


def _checked(spec: str, graph: Any, checkpoint_path: Path) -> Any:
    """The factory's graph, or an InputError saying what to add."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.pregel import Pregel

    if not isinstance(graph, Pregel):
        raise InputError(
            f"--agent={spec!r}: the factory returned {type(graph).__name__}, not a compiled graph; "
            "return StateGraph(...).compile(checkpointer=...)"
        )
    saver = graph.checkpointer
    if saver is None or saver is True or saver is False:
        raise InputError(
            f"--agent={spec!r}: the graph has no checkpointer, so nothing survives a crash; "
            "compile it with checkpointer=SqliteSaver(sqlite3.connect(ctx.checkpoint_path, "
            "check_same_thread=False))"
        )
    if not isinstance(saver, SqliteSaver):
        raise InputError(
            f"--agent={spec!r}: the graph's checkpointer is {type(saver).__name__}; crashmatrix reads "
            "the conversation back from SqliteSaver(sqlite3.connect(ctx.checkpoint_path, ...))"
        )
    files = [Path(row[2]).resolve() for row in saver.conn.execute("PRAGMA database_list") if row[2]]
    if checkpoint_path.resolve() not in files:
        raise InputError(
            f"--agent={spec!r}: the SqliteSaver's database is {files[0] if files else 'in memory'}, "
            "not ctx.checkpoint_path; connect it to ctx.checkpoint_path so the case keeps it"
        )
    return graph


def _chat_model(base_url: str, http: httpx.Client) -> Any:
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    # http_client: the life's respx-intercepted client. Without it openai 3.x sends through
    # its own httpx2 transport, which respx does not patch (the request would leave the mocks).
    return ChatOpenAI(
        model="crashmatrix-scripted",
        base_url=base_url,
        api_key=SecretStr("crashmatrix"),
        http_client=http,
        max_retries=0,
    )


# -- tools -----------------------------------------------------------------------------------


_ARGS_MODELS: dict[tuple[str, tuple[str, ...]], Any] = {}


def _langchain_tool(contract: ToolContract, run: Callable[..., str]) -> Any:
    """The suite's tool ``contract`` as a LangChain tool that ToolNode can run; it gets the
    tool call's id (``InjectedToolCallId``) so the world attributes the effect to it."""
    from typing import Annotated

    from langchain_core.tools import InjectedToolCallId, StructuredTool
    from pydantic import ConfigDict, create_model

    schema = contract.tool_schema()["function"]
    properties = schema["parameters"].get("properties", {})
    # One model per tool and argument names in a process: built in the fork server's
    # throwaway life, not again in every life (pydantic's create_model, ~2 ms a tool).
    key = (contract.name, tuple(properties))
    model = _ARGS_MODELS.get(key)
    if model is None:
        fields: dict[str, Any] = {name: (Any, None) for name in properties}
        fields["tool_call_id"] = (Annotated[str, InjectedToolCallId], ...)
        # Arguments pass through as the model sent them: the mock tool validates them against
        # the contract (an invalid call is its INVALID_ARGUMENTS result, as for every agent).
        model = create_model(f"{contract.name}_args", __config__=ConfigDict(extra="allow"), **fields)
        _ARGS_MODELS[key] = model

    def call(tool_call_id: str, **arguments: Any) -> str:
        given = {k: v for k, v in arguments.items() if not (k in properties and v is None)}
        return run(contract.name, given, tool_call_id)

    return StructuredTool.from_function(
        func=call, name=contract.name, description=schema["description"], args_schema=model
    )


class _ToolRunner:
    """The suite's tools run in this life by the mock tools, with the boundaries around them."""

    def __init__(
        self, ctx: LifeContext, toolbox: Any, before: Callable[[], None], approvals: _Approvals
    ) -> None:
        self.ctx = ctx
        self.toolbox = toolbox
        self.before = before
        self.approvals = approvals
        self.attempts: dict[str, int] = {}
        self.hook: BoundaryHook = ctx.hook  # a framework YAML's life gives its probed hook
        # ToolNode runs the calls of one message in parallel threads (unless max_concurrency
        # is 1): the lock keeps the copy's write and the attempt count whole.
        self.lock = threading.Lock()

    def __call__(self, name: str, arguments: Mapping[str, Any], tool_call_id: str, key: str = "") -> str:
        ctx = self.ctx
        # A tool that called interrupt() itself goes on only once LangGraph saved the answer.
        self.approvals.wait_saved(tool_call_id)
        with self.lock:
            self.before()  # crashmatrix's copy of the conversation, where the world measures bytes
            self.attempts[tool_call_id] = self.attempts.get(tool_call_id, 0) + 1
        execution_id = f"{tool_call_id}:life{ctx.life}.{self.attempts[tool_call_id]}"
        self.hook("after_running", tool_call_id)
        tool_ctx = ToolContext(
            tool_call_id,
            execution_id,
            key,
            arguments_sha256(arguments),
            step=lambda: self.hook("during_side_effect", tool_call_id),
        )
        observation: ToolObservation = self.toolbox.execute(name, dict(arguments), tool_ctx)
        self.hook("after_side_effect", tool_call_id)
        contract = ctx.scenario.contracts.get(name)
        idempotency = contract.idempotency if contract else "non_idempotent"
        result = observation.to_result(execution_id=execution_id, idempotency=idempotency)
        return json.dumps(result, ensure_ascii=False)


# -- the checkpointer's seams ----------------------------------------------------------------


def _messages_of(values: Any) -> list[Any]:
    if isinstance(values, Mapping):
        messages = values.get("messages")
        if isinstance(messages, list):
            return messages
    return []


def _tool_messages(writes: Sequence[tuple[Any, ...]]) -> list[Any]:
    """The ToolMessages among a task's writes (``(channel, value)``, or pending writes'
    ``(task_id, channel, value)``)."""
    from langchain_core.messages import ToolMessage

    out: list[Any] = []
    for write in writes:
        channel, value = write[-2], write[-1]
        if channel == "messages":
            out += [m for m in (value if isinstance(value, list) else [value]) if isinstance(m, ToolMessage)]
    return out


def _replies(writes: Sequence[tuple[Any, ...]]) -> list[Any]:
    """The model's AIMessages with tool calls among a task's writes (as ``_tool_messages``)."""
    from langchain_core.messages import AIMessage

    out: list[Any] = []
    for write in writes:
        channel, value = write[-2], write[-1]
        if channel == "messages":
            values = value if isinstance(value, list) else [value]
            out += [m for m in values if isinstance(m, AIMessage) and m.tool_calls]
    return out


class _Saves:
    """What LangGraph's saver has committed in this life, for the tool side to wait on.

    LangGraph hands its saves to a thread pool: a step's checkpoint (``put``, awaited before
    the next step only under ``durability="sync"``) and each task's pending writes
    (``put_writes``, never awaited), and with more than one thread those can finish in any
    order. Four orders are held, each one of the orders the pool can take, so that every
    boundary is one state in every run:

    * a checkpoint that shows a ToolMessage or a model reply is committed only after that
      message's own pending write returned (before_tool_result / after_tool_call_pending come
      first, as with one thread);
    * a ``ToolNode`` starts only after the checkpoint holding the reply it runs was committed
      and its boundaries passed (``hold_tool_nodes``): after_tool_call_saved is reached with
      no tool started. Under async durability LangGraph starts the tools while that
      checkpoint is still being written; a tool that did anything first (a team's own ledger
      row) would make the boundary two states. (A tool a node runs in the same step as the
      model that asked for it has no checkpoint to wait for, and is not held.)
    * a model reply's pending write starts only after the checkpoint it is written against was
      committed (``wait_committed``): under async durability the model node runs while its
      step's checkpoint is still being written, and a kill at after_tool_call_pending could
      find the reply saved against a checkpoint that never was (resumed, the graph asks the
      model again: after_model_reply's state, not the boundary's).

    * a model request of the root graph starts only after the checkpoint of the step before
      its node was committed and its boundaries passed (``wait_step``, from ``_HoldModel``,
      a LangChain callback): under async durability the model node runs while that
      checkpoint, the one holding the tool results the request carries, is still being
      written. Then a recovering life passed after_tool_result before or after it asked the
      model depending on the pool, and its recovery window (the points it passes before it
      first asks) was one point or the rest of the run from one run to the next.

    Under ``durability="exit"`` nothing is saved until the run ends: nothing is waited for."""

    WAIT = 30.0

    def __init__(self, durability: str) -> None:
        self.durability = durability
        self.changed = threading.Condition()
        # Message ids in a committed checkpoint whose boundaries were passed (an earlier
        # life's, or this one's once its hooks returned).
        self.seen: set[str] = set()
        self.written: set[str] = set()  # results (tool call ids) whose pending write returned
        self.replied: set[str] = set()  # replies (message ids) whose pending write returned
        self.committed: set[str] = set()  # checkpoint ids whose ``put`` returned (or an earlier life's)
        # The root graph's last step whose checkpoint was committed and its boundaries passed.
        self.step = -2

    def _wait(self, ready: Callable[[], bool], what: str) -> None:
        if self.durability == "exit":
            return
        with self.changed:
            if not self.changed.wait_for(ready, self.WAIT):
                raise RuntimeError(
                    f"crashmatrix: LangGraph never saved {what}; the adapter's boundary order does not hold"
                )

    def wait_saved(self, message_id: str) -> None:
        """Hold a ToolNode until the checkpoint holding the reply it runs was committed."""
        self._wait(lambda: message_id in self.seen, f"the checkpoint holding the reply {message_id}")

    def wait_written(self, results: set[str], replies: set[str]) -> None:
        """Hold a checkpoint until the pending writes of the messages it shows returned."""
        self._wait(
            lambda: results <= self.written and replies <= self.replied,
            f"the pending writes of {sorted(results | replies)}",
        )

    def wait_committed(self, checkpoint_id: str) -> None:
        """Hold a model reply's pending write until the checkpoint it is written against was
        committed: under async durability the step's checkpoint is still being written while
        its model node runs, and a reply saved against a checkpoint that a kill then loses is
        not reused on resume (the model is asked again)."""
        self._wait(lambda: checkpoint_id in self.committed, f"the checkpoint {checkpoint_id}")

    def wait_step(self, step: int) -> None:
        """Hold a model request of the root graph's step ``step + 1`` until the checkpoint of
        step ``step`` was committed and its boundaries passed."""
        self._wait(lambda: self.step >= step, f"the checkpoint of step {step}")

    def note_step(self, step: int) -> None:
        with self.changed:
            self.step = max(self.step, step)
            self.changed.notify_all()

    def note(self, **sets: Any) -> None:
        with self.changed:
            for name, values in sets.items():
                getattr(self, name).update(values)
            self.changed.notify_all()


def _hook_checkpointer(
    saver: Any,
    hook: BoundaryHook,
    config: Mapping[str, Any],
    approvals: _Approvals | None = None,
    durability: str = DURABILITY,
) -> _Saves:
    """Wrap ``put`` and ``put_writes`` of this saver instance: after LangGraph's own call
    committed, the boundary that write completes (and, at the entry of the model's pending
    write, ``after_model_reply``: the one moment before a write). The hooks fire on
    LangGraph's background thread that made the write, once it returned; ``_Saves`` (returned,
    for the tools to wait on) says which orders of those writes are held and why."""
    from langchain_core.messages import AIMessage, ToolMessage

    saves = _Saves(durability)
    found = saver.get_tuple(config)
    # What earlier lives saved is not this life's boundary.
    if found:
        messages = _messages_of(found.checkpoint.get("channel_values"))
        saves.seen.update(str(m.id) for m in messages if m.id)
        saves.written.update(m.tool_call_id for m in _tool_messages(found.pending_writes or []))
        # Model replies already saved as pending writes (a life killed at
        # after_tool_call_pending): LangGraph reuses them on resume, no reply of this life.
        saves.replied.update(str(m.id) for m in _replies(found.pending_writes or []))
        if found.config["configurable"].get("checkpoint_id"):
            saves.committed.add(str(found.config["configurable"]["checkpoint_id"]))
        step = (found.metadata or {}).get("step")
        if isinstance(step, int):
            saves.step = step
    inner_put, inner_writes = saver.put, saver.put_writes

    def put(config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        fresh = [m for m in _messages_of(checkpoint.get("channel_values")) if str(m.id) not in saves.seen]
        saves.wait_written(
            {m.tool_call_id for m in fresh if isinstance(m, ToolMessage)},
            {str(m.id) for m in fresh if isinstance(m, AIMessage) and m.tool_calls},
        )
        out = inner_put(config, checkpoint, metadata, new_versions)
        saves.note(committed={str(checkpoint.get("id"))})
        for message in fresh:
            if isinstance(message, AIMessage):
                for call in message.tool_calls:
                    hook("after_tool_call_saved", str(call["id"]))
            elif isinstance(message, ToolMessage):
                hook("after_tool_result", message.tool_call_id)
        # Only now may the ToolNode that runs it start: after_tool_call_saved was one state.
        saves.note(seen={str(m.id) for m in fresh})
        step = (metadata or {}).get("step")
        if isinstance(step, int) and not (config.get("configurable") or {}).get("checkpoint_ns"):
            saves.note_step(step)  # and the next step's model request
        return out

    def put_writes(config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        # The model node's reply with tool calls, in memory only until this write: named by its
        # first call, once per reply (core.boundaries).
        replies = [
            m for m in _replies(writes) if str(m.id) not in saves.seen and str(m.id) not in saves.replied
        ]
        checkpoint_id = (config.get("configurable") or {}).get("checkpoint_id")
        if replies and checkpoint_id:
            saves.wait_committed(str(checkpoint_id))
        for message in replies:
            hook("after_model_reply", str(message.tool_calls[0]["id"]))
        inner_writes(config, writes, task_id, task_path)
        for message in replies:
            hook("after_tool_call_pending", str(message.tool_calls[0]["id"]))
        saves.note(replied={str(m.id) for m in replies})
        results = _tool_messages(writes)
        for message in results:
            hook("before_tool_result", message.tool_call_id)
        saves.note(written={m.tool_call_id for m in results})
        # Command(resume=...) saved as the null task's pending write: the answer this life gave
        # is durable, and the node that asked re-runs to where interrupt() returns it.
        if approvals is not None and task_id == NULL_TASK_ID and any(w[0] == RESUME for w in writes):
            if approvals.call:
                hook("after_approved", approvals.call)
            approvals.saved.set()

    saver.put, saver.put_writes = put, put_writes
    return saves


# -- the person who answers approvals ---------------------------------------------------------


def _interrupts(out: Any) -> tuple[Any, ...]:
    """The interrupts an ``invoke`` stopped at (LangGraph returns them as ``__interrupt__``)."""
    return tuple(out.get("__interrupt__") or ()) if isinstance(out, Mapping) else ()


class _Person:
    """Answers the graph's interrupts from the scenario, and remembers what it answered in a
    file of the case (fsynced before the answer is handed over): a call answered in an earlier
    life and asked about again gets ``approvals_again``."""

    def __init__(self, spec: str, ctx: LifeContext, tools: Sequence[str], approvals: _Approvals) -> None:
        self.spec, self.ctx, self.tools, self.approvals = spec, ctx, tools, approvals
        self.path = ctx.case_dir / APPROVALS_FILE
        self.asked_before: set[str] = set()
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    noted = json.loads(line)
                except ValueError:
                    continue  # a line torn by a kill mid-write: that answer was never handed over
                if isinstance(noted, dict) and noted.get("life", ctx.life) < ctx.life:
                    self.asked_before.add(str(noted.get("tool_call_id")))

    def answer(self, interrupts: Sequence[Any]) -> Any:
        """``Command(resume=...)`` for these interrupts: a plain answer for one (LangGraph saves
        it as a pending write: after_approved); a map by interrupt id for several (kept in
        memory by LangGraph until each node ends: no boundary)."""
        from langgraph.types import Command

        answered: list[tuple[str, ApprovalRequest, bool]] = []
        for interrupt in interrupts:
            request = approval_request(self.spec, interrupt.value, self.tools)
            approved = _answer(request, self.ctx, self.asked_before)
            self.note(request, approved)
            answered.append((interrupt.id, request, approved))
        self.approvals.saved.clear()
        if len(answered) == 1:
            [(_, request, approved)] = answered
            self.approvals.call = request.tool_call_id if approved else ""
            return Command(resume=approved)
        answers = {interrupt_id: approved for interrupt_id, _, approved in answered}
        self.approvals.call = ""
        return Command(resume=answers)

    def note(self, request: ApprovalRequest, approved: bool) -> None:
        line = {
            "life": self.ctx.life,
            "tool": request.tool,
            "tool_call_id": request.tool_call_id,
            "again": request.again or request.tool_call_id in self.asked_before,
            "approved": approved,
        }
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (json.dumps(line) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)


# -- the conversation, read back -------------------------------------------------------------


def _record(message: Any) -> dict[str, Any] | None:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    content = message.content if isinstance(message.content, str) else json.dumps(message.content)
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": content}
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": content}
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": content}
    if isinstance(message, AIMessage):
        out: dict[str, Any] = {"role": "assistant", "content": content}
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": json.dumps(call["args"], ensure_ascii=False),
                    },
                }
                for call in message.tool_calls
            ]
        return out
    return None


def checkpoint_messages(checkpoint_path: Path) -> list[Any]:
    """The messages of the thread's latest checkpoint in a ``SqliteSaver`` file. A missing
    file or table is an empty conversation (nothing saved yet)."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from crashmatrix.harness.agents.readonly_db import connect_readonly

    if not checkpoint_path.exists():
        return []
    conn = connect_readonly(checkpoint_path)
    try:
        saver = SqliteSaver(conn)
        # A read: no setup script (WAL pragma, CREATE TABLE IF NOT EXISTS, migrations) on the
        # file, which ran before every read (each tool call, each life's end, each observation);
        # a file without the tables still says "no such table" below.
        saver.is_setup = True
        try:
            found = saver.get_tuple({"configurable": {"thread_id": THREAD_ID}})
        except sqlite3.OperationalError as error:
            if "no such table" in str(error):
                return []
            raise SessionCorruption(checkpoint_path, 0, 0, f"cannot read the checkpoint ({error})") from error
    finally:
        conn.close()
    return _messages_of(found.checkpoint.get("channel_values")) if found else []


def records_of(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """The messages as seed 000's records (``{"type": "message", "message": {...}}``)."""
    return [{"type": "message", "message": record} for m in messages if (record := _record(m)) is not None]


def conversation(checkpoint_path: Path) -> tuple[SessionLog, list[bytes]]:
    """The thread's latest checkpoint as crashmatrix's records (and their JSONL lines, the
    normalised copy's)."""
    entries, lines, ends, size = [], [], [], 0
    for number, record in enumerate(records_of(checkpoint_messages(checkpoint_path)), start=1):
        try:
            entry = entry_from_json(record, line=number)
        except ValueError as error:
            raise SessionCorruption(checkpoint_path, number, 0, str(error)) from error
        encoded = encode_line(entry.to_json())
        entries.append(entry)
        lines.append(encoded)
        size += len(encoded)
        ends.append(size)
    return SessionLog(checkpoint_path, tuple(entries), None, size, tuple(ends)), lines


# -- the adapter -----------------------------------------------------------------------------


class LangGraphAdapter:
    """``AgentAdapter`` for a LangGraph graph built by the user's factory."""

    keeps_ledger = False  # LangGraph has no execution ledger: ledger checks are not applicable
    # ToolNode runs a message's calls at the same time (unless max_concurrency: 1): the
    # clean run's points are grouped by call (``plan.enumeration.by_call``).
    concurrent_calls = True
    # Its session is its framework's store: the double@P column is not reachable, with why
    # (``enumeration.adapter_double_unreachable``).
    framework_store = True
    # after_approved only for a graph whose factory says it asks (validate): "not reachable"
    # with WHY_NO_APPROVAL otherwise, said in the matrix.
    boundaries: tuple[str, ...] = tuple(b for b in BOUNDARIES if b != "after_approved")
    unreachable: Mapping[str, str] = {"after_approved": WHY_NO_APPROVAL}
    dialect = DIALECT
    tears_writes = False
    torn_write_unreachable = WHY_NOT_TORN
    edits_native_session = False  # crashmatrix's copy is rebuilt from the checkpoint
    PRELOAD = (
        "crashmatrix.harness.agents.frameworks.langgraph",
        "langgraph.graph",
        "langgraph.prebuilt",
        "langgraph.checkpoint.sqlite",
        "langchain_openai",
    )

    def __init__(self, spec: str, target: str, how: Driving = Driving()) -> None:
        self.agent_spec = spec
        self.driving = how
        self.name = spec
        self.factory = _factory(spec, target)
        # What a fork server imports once for this agent's lives: the framework and the
        # user's module (its import of langgraph / langchain is most of a cold life's time).
        self.preload = (*self.PRELOAD, target.partition(":")[0])
        self.capabilities = Capabilities(
            served=None,  # every suite tool, run by the mock tools
            approvals=False,  # until validate() finds the factory says its graph asks
            edits_native_session=False,
        )

    def workspace(self, case_dir: Path) -> Path:
        return case_dir / "world" / "workspace"

    def checkpoint_path(self, case_dir: Path) -> Path:
        return self.workspace(case_dir) / CHECKPOINT_FILE

    def power_session(self, case_dir: Path) -> Path | str:
        return WHY_NO_POWER

    def read_session(self, case_dir: Path) -> SessionLog:
        return conversation(self.checkpoint_path(case_dir))[0]

    def session_records(self, case_dir: Path) -> CheckpointMessages:
        """Where ``crashmatrix doctor`` plants its faults: the thread's latest checkpoint, the
        messages ``observe`` reads (record n is its n-th message)."""
        return CheckpointMessages(self.checkpoint_path(case_dir), THREAD_ID)

    def observe(self, run: CaseRun) -> Observation:
        from crashmatrix.harness.observation.reading import read_observation

        return read_observation(run, session=self.read_session, keeps_ledger=False, dialect=self.dialect)

    def validate(self) -> None:
        """Build the graph once against a scratch directory, with every built-in suite tool in
        ``ctx.tools`` (as a life gives a scenario's: a factory picking ``send_email`` finds
        it): a factory that returns the wrong thing, or a graph without a SQLite checkpointer,
        is refused before any case runs, and the tools its ToolNodes have are the suite tools
        it has (a scenario needing another is not applicable; a graph that took them all, or
        has no ToolNode, has every tool, as before: a scenario's own tools included).

        Then run one turn through it, answered in-process: LangChain and LangGraph build much
        of what a turn needs on first use (openai's request transforms, the checkpoint
        serializer, message parsing). Done here, it is done once in the fork server that
        loaded this adapter, not again in every life. A turn that never reached ctx.model is
        one line: the graph's model is not the one crashmatrix can serve in a life."""
        from crashmatrix.mock_tools.registry import catalogue

        reply = {
            "id": "warm",
            "object": "chat.completion",
            "created": 0,
            "model": "crashmatrix-scripted",
            "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "."}}
            ],
        }
        asked: list[str] = []

        def answer(request: httpx.Request) -> httpx.Response:
            asked.append(str(request.url))
            return httpx.Response(200, json=reply)

        contracts = catalogue()
        transport = httpx.MockTransport(answer)
        with (
            tempfile.TemporaryDirectory(prefix="crashmatrix-langgraph-") as scratch,
            httpx.Client(transport=transport) as http,
        ):
            path = Path(scratch) / CHECKPOINT_FILE
            path.parent.mkdir(parents=True)
            ctx = GraphContext(
                model=_chat_model(MODEL_BASE_URL, http),
                tools=tuple(_langchain_tool(c, lambda *a, **k: "") for c in contracts.values()),
                run_tool=lambda *a, **k: "",
                checkpoint_path=path,
                workspace=Path(scratch),
                contracts=contracts,
                model_base_url=MODEL_BASE_URL,
                http=http,
                life=0,
            )
            graph = self._build(ctx)
            if ctx.approvals.declared:
                # Its graph asks a person: the scenarios' "no" reaches it, after_approved is real.
                self.capabilities = dataclasses.replace(self.capabilities, approvals=True)
                self.boundaries = BOUNDARIES
                self.unreachable = {}
            found = graph_tools(graph)
            # A graph that took every tool it was offered takes a scenario's own tools too
            # (ctx.tools in a life are the scenario's): it has every tool, as before.
            if found is not None and not set(contracts) <= set(found):
                has = ToolMap({name: ToolName(name) for name in sorted(found) if name in contracts})
                self.capabilities = dataclasses.replace(self.capabilities, tools=has)
                self.dialect = dataclasses.replace(self.dialect, tools=has)
            try:
                from langchain_core.messages import HumanMessage

                graph.invoke(
                    {"messages": [HumanMessage("warm")]},
                    self.driving.config(),
                    durability=self.driving.durability,
                )
            except Exception:  # a warm-up only: a graph that cannot take this turn shows why in its lives
                pass
            finally:
                graph.checkpointer.conn.close()
        if not asked:
            raise InputError(
                f"--agent={self.agent_spec!r}: a turn through the graph never asked ctx.model, the model "
                "crashmatrix serves in a life; bind its tools to ctx.model, or declare the agent in an "
                "adapter YAML (framework: langgraph), where its own ChatOpenAI() is served"
            )

    def _build(self, ctx: GraphContext) -> Any:
        try:
            graph = self.factory(ctx)
        except InputError:
            raise
        except Exception as error:
            raise InputError(
                f"--agent={self.agent_spec!r}: the factory raised {type(error).__name__}: {error}"
            ) from error
        return _checked(self.agent_spec, graph, ctx.checkpoint_path)

    def run_life(self, ctx: LifeContext) -> None:
        from crashmatrix.harness.agents.foreign_session import _write_copy
        from crashmatrix.harness.agents.tool_faults import mock_toolbox

        path = self.checkpoint_path(ctx.case_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Its wrappers run the mock tools: the tool-side columns act between them and the world.
        toolbox = mock_toolbox(ctx)
        approvals = _Approvals()
        run = _ToolRunner(
            ctx, toolbox, lambda: _write_copy(ctx.session_path, conversation(path)[1]), approvals
        )
        tools = tuple(_langchain_tool(contract, run) for contract in ctx.scenario.contracts.values())
        graph = self._build(
            GraphContext(
                model=_chat_model(ctx.model_base_url, ctx.http),
                tools=tools,
                run_tool=run,
                checkpoint_path=path,
                workspace=self.workspace(ctx.case_dir),
                contracts=ctx.scenario.contracts,
                model_base_url=ctx.model_base_url,
                http=ctx.http,
                life=ctx.life,
                approvals=approvals,
            )
        )
        config = self.driving.config()
        saves = _hook_checkpointer(graph.checkpointer, ctx.hook, config, approvals, self.driving.durability)
        hold_tool_nodes(graph, lambda: saves)
        config = hold_model_requests(config, saves)
        person = _Person(self.agent_spec, ctx, tuple(ctx.scenario.contracts), approvals)
        try:
            send_turns(
                graph,
                config,
                self.driving.durability,
                ctx.scenario.turns,
                person,
                f"--agent={self.agent_spec!r}",
            )
        finally:
            _write_copy(ctx.session_path, conversation(path)[1])
            graph.checkpointer.conn.close()


def send_turns(
    graph: Any, config: Mapping[str, Any], durability: str, turns: Sequence[str], person: _Person, where: str
) -> None:
    """The part of the team's driver crashmatrix keeps: resume what the store left pending,
    then send the turns the thread has not received, answering each interrupt.

    Why crashmatrix keeps it: a restart is where a crash's damage shows, and the team's own
    loop (a web handler, a queue worker) is not a function a case can call; LangGraph's own
    resume (``invoke(None)`` on the same thread) is what any such loop calls after a restart."""
    from langchain_core.messages import HumanMessage

    def step(value: Any) -> None:
        """One invoke, then each interrupt it stopped at answered, until the graph stops
        asking (a graph that asks forever meets the life's deadline)."""
        out = graph.invoke(value, config, durability=durability)
        while interrupts := _interrupts(out):
            if not person.approvals.declared:
                raise InputError(
                    f"{where}: the graph interrupted ({interrupts[0].value!r:.80}), but "
                    "its factory did not say it asks; call ctx.asks_for_approval() in the factory "
                    "so the approval scenarios apply to it"
                )
            out = graph.invoke(person.answer(interrupts), config, durability=durability)

    # A previous life left the step unfinished: LangGraph's own resume. Its tasks, not
    # its ``next``: LangGraph 1.x's live snapshot leaves out of ``next`` a task whose
    # writes were saved (a ToolNode killed at before_tool_result), yet the step is
    # not done -- the ToolMessage is in no checkpoint, the model was never asked.
    # An interrupt a previous life answered is resumed the same way: LangGraph hands
    # the node the saved answer (its snapshot still lists that interrupt as pending,
    # so answering from the snapshot would ask the person twice).
    if graph.get_state(config).tasks:
        step(None)
    received = sum(1 for m in _messages_of(graph.get_state(config).values) if isinstance(m, HumanMessage))
    for text in turns[received:]:
        step({"messages": [HumanMessage(text)]})


_LOADED: dict[str, LangGraphAdapter] = {}


def _check_version(spec: str) -> None:
    from importlib.metadata import version

    text = version("langgraph")
    parts = tuple(int(p) for p in text.split(".")[:3] if p.isdigit())
    if not SUPPORTED[0] <= parts < SUPPORTED[1]:
        raise InputError(
            f"--agent={spec!r}: langgraph {text} is installed; this adapter supports {SUPPORTED_TEXT}: "
            f"pip install 'langgraph{SUPPORTED_TEXT}'"
        )


OPTIONS = ("durability", "max_concurrency")


def load(target: str, *, spec: str, **options: Any) -> LangGraphAdapter:
    """The adapter for ``--agent=langgraph:TARGET``: the factory imported and its graph checked
    once per process (a fork server that preloaded it hands the checked adapter to its lives).
    ``options``: ``durability`` (sync, async, exit; LangGraph's default async) and
    ``max_concurrency`` (LangChain's; default none, calls in parallel)."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InputError(
            f"--agent={spec!r}: the langgraph adapter takes no option {unknown[0]!r} "
            f"(it takes: {', '.join(OPTIONS)})"
        )
    how = driving(options, f"--agent={spec!r}")
    key = f"{spec} {how}"
    if key not in _LOADED:
        _check_version(spec)
        adapter = LangGraphAdapter(spec, target, how)
        adapter.validate()
        _LOADED[key] = adapter
    return _LOADED[key]


# -- a LangGraph agent declared in an adapter YAML (framework: langgraph) ---------------------
#
# ``ForeignAdapter`` (kind 2's common part) prepares the life -- world, effect probes, the
# loopback model and the environment pointing the team's ChatOpenAI() at it, the workspace as
# the working directory, the team's module with its rules -- and calls ``drive``. What is
# LangGraph's is here: the checkpointer handed to the factory, the graph's own tools wrapped
# for their two boundaries, the saver's seams, the turn loop, and the store read back.

STORES = ("sqlite", "postgres")
WHY_NO_STEPS = (
    "the team's own tools run as one call crashmatrix cannot see inside (an intercept: or a "
    "boundaries: rule on a function the tool calls reaches a step)"
)
# after_approved is reached only by a graph that asks (its factory says so: check()); for one
# that asks none, ForeignAdapter makes it not reachable with this reason.
ASKING_ONLY: Mapping[str, str] = {"after_approved": WHY_NO_APPROVAL}
FRAMEWORK = FrameworkInfo(
    boundaries=tuple(b for b in BOUNDARIES if b != "during_side_effect"),
    unreachable={"during_side_effect": WHY_NO_STEPS},
    why_not_torn=WHY_NOT_TORN,
    why_no_power=(
        "the checkpoint is LangGraph's store: a SQLite database syncs from its C library, which the "
        "harness's os.fsync recorder does not see, and a database is not cut back by length; on "
        "PostgreSQL (store: postgres) it is the server's, a separate process whose own crash recovery "
        "(its WAL, fsync on) a power loss of the agent's process does not reach"
    ),
    preload=LangGraphAdapter.PRELOAD,
    options=("durability", "max_concurrency", "store"),
)


@dataclass(frozen=True)
class TeamContext:
    """What a framework YAML's factory gets: the checkpointer to compile the team's graph
    with (the case's own store: ``SqliteSaver`` on ``checkpoint_path``, or ``PostgresSaver``
    on ``postgres_url`` with ``options: {store: postgres}``), the case's workspace (also the
    working directory), the life's number, and with ``tools: harness`` crashmatrix's mock tools
    as LangChain tools (empty otherwise: the team's own tools are the graph's). The team's
    ``ChatOpenAI()`` needs nothing from here: ``OPENAI_BASE_URL`` / ``OPENAI_API_BASE`` /
    ``OPENAI_API_KEY`` already point at crashmatrix's model."""

    checkpointer: Any
    checkpoint_path: Path
    workspace: Path
    life: int
    postgres_url: str | None = None
    tools: tuple[Any, ...] = ()
    approvals: _Approvals = field(default_factory=_Approvals, compare=False, repr=False)

    def asks_for_approval(self) -> None:
        """Say that this graph asks a person (``interrupt()``) before a tool acts."""
        self.approvals.declared = True

    def ask_approval(self, tool_call: Mapping[str, Any], *, again: bool = False) -> bool:
        """As ``GraphContext.ask_approval``."""
        approved = ask_approval(tool_call, again=again)
        self.approvals.wait_saved(str(tool_call.get("id", tool_call.get("tool_call_id", ""))))
        return approved


def _team_options(spec: Any) -> tuple[Driving, str]:
    where = f"{spec.path}: options"
    store = spec.options.get("store", "sqlite")
    if store not in STORES:
        raise InputError(f"{where}.store: {store!r} is not one of {', '.join(STORES)}")
    return driving(spec.options, where), str(store)


def checkpoint_file(workspace: Path) -> Path:
    """Where a framework YAML's SqliteSaver writes: in the case's workspace (a copied case
    keeps it)."""
    return workspace / CHECKPOINT_FILE


def _saver(store: str, workspace: Path, postgres_url: str | None) -> Any:
    """The checkpointer handed to the factory (its connection closed by the caller)."""
    if store == "postgres":
        assert postgres_url is not None
        return _postgres_saver(postgres_url)
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = checkpoint_file(workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    return SqliteSaver(sqlite3.connect(path, check_same_thread=False))


def _postgres_saver(url: str) -> Any:
    """LangGraph's ``PostgresSaver`` on the case's own database, as its docs make one
    (``from_conn_string``: autocommit, no prepared statements, dict rows), its tables set up."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    conn = psycopg.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    saver = PostgresSaver(conn)
    saver.setup()
    return saver


def _close(saver: Any) -> None:
    conn = getattr(saver, "conn", None)
    close = getattr(conn, "close", None)
    if callable(close):
        close()


def _team_graph(where: str, factory: Callable[..., Any], ctx: TeamContext) -> Any:
    """The team's compiled graph, checked: compiled with the checkpointer it was handed."""
    from langgraph.pregel import Pregel

    try:
        graph = factory(ctx)
    except InputError:
        raise
    except Exception as error:
        raise InputError(
            f"{where}: factory: the factory raised {type(error).__name__}{_where(error)}: {error}"
        ) from error
    if not isinstance(graph, Pregel):
        raise InputError(
            f"{where}: factory: it returned {type(graph).__name__}, not a compiled graph; "
            "return StateGraph(...).compile(checkpointer=ctx.checkpointer) (or create_react_agent(..., "
            "checkpointer=ctx.checkpointer))"
        )
    if graph.checkpointer is not ctx.checkpointer:
        got = type(graph.checkpointer).__name__ if graph.checkpointer not in (None, True, False) else "none"
        raise InputError(
            f"{where}: factory: the graph's checkpointer is {got}, not the one crashmatrix handed it; "
            "compile with checkpointer=ctx.checkpointer (the case's store, read back after each life)"
        )
    return graph


def _where(error: BaseException) -> str:
    """`` at path:line``: where the team's code raised it (a syntax error's own place)."""
    import traceback

    if isinstance(error, SyntaxError) and error.filename:
        return f" at {error.filename}:{error.lineno}"
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "importlib" not in f.filename]
    return f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""


def tool_nodes(graph: Any) -> list[Any]:
    """The ``ToolNode``s of a compiled graph, its subgraphs' included (``create_react_agent``
    builds one; a team's ``StateGraph`` adds its own)."""
    from langgraph.prebuilt import ToolNode

    found: list[Any] = []
    for node in getattr(getattr(graph, "builder", None), "nodes", {}).values():
        runnable = getattr(node, "runnable", None)
        if isinstance(runnable, ToolNode):
            found.append(runnable)
        elif runnable is not None and hasattr(runnable, "builder"):
            found += tool_nodes(runnable)
    return found


def graph_tools(graph: Any) -> dict[str, Any] | None:
    """The tools the graph's ToolNodes run, by name (None: it has no ToolNode, so which tools
    it has is not known)."""
    nodes = tool_nodes(graph)
    if not nodes:
        return None
    return {name: tool for node in nodes for name, tool in node.tools_by_name.items()}


def hold_tool_nodes(graph: Any, saves: Callable[[], _Saves | None]) -> None:
    """Each ToolNode of the graph (its instance, LangGraph's code untouched) starts only once
    the checkpoint holding the reply it runs was committed and its boundaries passed
    (``_Saves``). The reply is the input's last AIMessage with tool calls; an input with none
    (a ``Send`` of one call) is not held."""
    from langchain_core.messages import AIMessage

    for node in tool_nodes(graph):
        if getattr(node, "__crashmatrix_held__", False):
            continue
        inner = node.invoke

        def invoke(value: Any, config: Any = None, __inner: Any = inner, **kwargs: Any) -> Any:
            held = saves()
            messages = value if isinstance(value, list) else _messages_of(value)
            asked = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
            if held is not None and asked and asked[-1].id:
                held.wait_saved(str(asked[-1].id))
            return __inner(value, config, **kwargs)

        node.invoke = invoke
        node.__crashmatrix_held__ = True


def hold_model_requests(config: Mapping[str, Any], saves: _Saves) -> dict[str, Any]:
    """``config`` with a LangChain callback that holds each chat model request of the root
    graph, on the thread about to send it, until the checkpoint of the step before its node
    was committed and its boundaries passed (``_Saves.wait_step``). A model call outside a
    root node (a subgraph's, one made without LangChain) is not held."""
    from langchain_core.callbacks import BaseCallbackHandler

    class _HoldModel(BaseCallbackHandler):
        run_inline = True  # on the thread that sends the request, before it sends
        raise_error = True  # an order that does not hold is the life's one-line error

        def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
            metadata = kwargs.get("metadata") or {}
            step = metadata.get("langgraph_step")
            if isinstance(step, int) and "|" not in str(metadata.get("langgraph_checkpoint_ns", "")):
                saves.wait_step(step - 1)

    return {**config, "callbacks": [*(config.get("callbacks") or ()), _HoldModel()]}


_CALL: contextvars.ContextVar[str] = contextvars.ContextVar("crashmatrix_langgraph_call", default="")


class _Bracket:
    """The team's own tools (the graph's ToolNodes'), each instance wrapped, LangGraph's code
    untouched; the call's id is taken from ``ToolNode``'s ``tool.invoke(tool_call)``:
    ``after_running`` right before the team's function runs and ``after_side_effect`` right
    after it returned (its result not yet a ToolMessage anywhere), crashmatrix's copy of the
    conversation refreshed first, so the effects the call makes are attributed to it."""

    def __init__(self, life: TeamLife) -> None:
        self.life = life
        self.lock = threading.Lock()
        # A boundary the YAML's ``boundaries:`` rules place (the team's own ledger says when
        # a call is running) is theirs: the bracket fires only the others, as kind 2's edges.
        mapped = {rule.boundary for rule in life.spec.rules}
        self.running = "after_running" not in mapped
        self.done = "after_side_effect" not in mapped

    def wrap(self, tool: Any) -> None:
        if getattr(tool, "__crashmatrix_bracketed__", False):
            return
        inner_invoke = tool.invoke
        func = getattr(tool, "func", None)
        inside = callable(func)

        def invoke(value: Any, config: Any = None, **kwargs: Any) -> Any:
            call = str(value.get("id") or "") if isinstance(value, Mapping) else ""
            token = _CALL.set(call)
            try:
                if not inside:
                    self.before(call)
                out = inner_invoke(value, config, **kwargs)
                if not inside:
                    self.after(call)
                return out
            finally:
                _CALL.reset(token)

        def bracketed(*args: Any, **kwargs: Any) -> Any:
            call = _CALL.get()
            self.before(call)
            out = func(*args, **kwargs)  # type: ignore[misc]
            self.after(call)
            return out

        object.__setattr__(tool, "invoke", invoke)
        if inside:
            object.__setattr__(tool, "func", bracketed)
        object.__setattr__(tool, "__crashmatrix_bracketed__", True)

    def before(self, call: str) -> None:
        if not call:
            return
        with self.lock:
            self.life.sync()
        if self.running:
            self.life.hook("after_running", call)

    def after(self, call: str) -> None:
        if call and self.done:
            self.life.hook("after_side_effect", call)


def drive(life: TeamLife) -> None:
    """One life of a LangGraph agent declared in an adapter YAML: the team's graph built by
    its factory with the case's checkpointer, its own tools bracketed, LangGraph's resume of
    what the store left pending, then the turns the thread has not received (``send_turns``:
    the part of the driver crashmatrix keeps, and why)."""
    how, store = _team_options(life.spec)
    ctx = life.ctx
    where = str(life.spec.path)
    postgres_url = _case_postgres(where, ctx.case_dir) if store == "postgres" else None
    saver = _saver(store, life.workspace, postgres_url)
    approvals = _Approvals()
    harness_tools: tuple[Any, ...] = ()
    if life.spec.tools == "harness":

        def refresh() -> None:
            life.sync()

        runner = _ToolRunner(ctx, life.toolbox, refresh, approvals)
        harness_tools = tuple(_langchain_tool(c, runner) for c in ctx.scenario.contracts.values())
    team = TeamContext(
        checkpointer=saver,
        checkpoint_path=checkpoint_file(life.workspace),
        workspace=life.workspace,
        life=ctx.life,
        postgres_url=postgres_url,
        tools=harness_tools,
        approvals=approvals,
    )
    try:
        graph = _team_graph(where, life.factory, team)
        if life.spec.tools == "harness":
            runner.hook = life.hook
        else:
            bracket = _Bracket(life)
            for tool in (graph_tools(graph) or {}).values():
                bracket.wrap(tool)
        config = how.config()
        saves = _hook_checkpointer(saver, life.hook, config, approvals, how.durability)
        hold_tool_nodes(graph, lambda: saves)
        config = hold_model_requests(config, saves)
        names = tuple(life.spec.dialect.tools.agent_name(t) for t in ctx.scenario.contracts)
        person = _Person(where, ctx, names, approvals)
        send_turns(graph, config, how.durability, ctx.scenario.turns, person, where)
    finally:
        try:
            life.sync()
        finally:
            _close(saver)


def _case_postgres(where: str, case_dir: Path) -> str:
    """The case's own database on the real server (``harness.lives.postgres``), or one line
    saying what is missing."""
    from crashmatrix.harness.lives.postgres import PostgresUnavailable, case_database_url

    try:
        return case_database_url(case_dir)
    except PostgresUnavailable as error:
        raise InputError(f"{where}: options.store: postgres: {error}") from error


def _postgres_messages(case_dir: Path) -> list[Any]:
    """The messages of the thread's latest checkpoint in the case's PostgreSQL database."""
    from crashmatrix.harness.lives.postgres import _psycopg, case_database_url

    psycopg = _psycopg()
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    with psycopg.connect(
        case_database_url(case_dir), autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        try:
            found = PostgresSaver(conn).get_tuple({"configurable": {"thread_id": THREAD_ID}})
        except psycopg.errors.UndefinedTable:
            return []  # no life set the saver up yet
    return _messages_of(found.checkpoint.get("channel_values")) if found else []


def read_records(workspace: Path) -> list[dict[str, Any]]:
    """The thread's latest checkpoint, as seed 000's records (the session source's reader):
    the case's PostgreSQL database when it has one (``postgres.json`` in the case directory,
    ``store: postgres``), else the SQLite file in its workspace."""
    case_dir = workspace.parent.parent  # <case>/world/workspace
    if (case_dir / "postgres.json").exists():
        return records_of(_postgres_messages(case_dir))
    return records_of(checkpoint_messages(checkpoint_file(workspace)))


def session_records(workspace: Path) -> CheckpointMessages:
    """Where ``crashmatrix doctor`` plants its faults for a framework YAML: the thread's latest
    checkpoint, the messages ``read_records`` reads (SQLite; a PostgreSQL checkpoint is not
    planted into: one line saying so)."""
    from crashmatrix.harness.agents.session_records import CannotPlant

    if (workspace.parent.parent / "postgres.json").exists():
        raise CannotPlant("its checkpoints are on PostgreSQL, where the doctor plants no fault (only SQLite)")
    return CheckpointMessages(checkpoint_file(workspace), THREAD_ID)


def check(spec: Any) -> AgentFacts:
    """The team's graph built once at load, as a life builds it (the environment pointing at
    a loopback model answering ".", a scratch workspace as the working directory, the real
    tools): the factory's graph checked, the tools its ToolNodes have found, whether it asks,
    and one turn through the team's own model client -- a client that does not reach
    crashmatrix's model is one line here, not an error in every life."""
    from typing import cast

    from crashmatrix.harness.agents.loopback import LoopbackServer

    where = str(spec.path)
    how, store = _team_options(spec)
    _check_version(f"{where}: framework: langgraph")
    routes: list[str] = []
    server = LoopbackServer(
        cast(Any, DotModel()),
        on_edge=lambda boundary, call_id: None,
        edges=frozenset(),
        on_request=routes.append,
    )
    saved_env = {key: os.environ.get(key) for key in CLIENT_ENV}
    cwd = os.getcwd()
    modules = set(sys.modules)
    with tempfile.TemporaryDirectory(prefix="crashmatrix-langgraph-") as scratch:
        server.start()
        saver: Any = None
        try:
            os.environ.update(client_env(server.model_url))
            os.chdir(scratch)
            if str(spec.here) not in sys.path:
                sys.path.insert(0, str(spec.here))  # the factory's module beside the YAML, as in a life
            module = _import(where, spec.module)
            factory = getattr(module, spec.main, None)
            if not callable(factory):
                raise InputError(
                    f"{where}: factory: {spec.module} has no function {spec.main!r} "
                    f"(def {spec.main}(ctx) -> a compiled graph, compiled with ctx.checkpointer)"
                )
            postgres_url = None
            if store == "postgres":
                from crashmatrix.harness.lives.postgres import PostgresUnavailable, ensure_server

                try:
                    # Started here, in the process that loads the adapter (pytest's controller,
                    # the CLI), before any worker or fork server: they and every life inherit it.
                    ensure_server()
                except PostgresUnavailable as error:
                    raise InputError(f"{where}: options.store: postgres: {error}") from error
                postgres_url = _case_postgres(where, Path(scratch))
            saver = _saver(store, Path(scratch), postgres_url)
            from crashmatrix.mock_tools.registry import catalogue

            contracts = catalogue()
            tools = (
                tuple(_langchain_tool(c, lambda *a, **k: "") for c in contracts.values())
                if spec.tools == "harness"
                else ()
            )
            team = TeamContext(
                checkpointer=saver,
                checkpoint_path=checkpoint_file(Path(scratch)),
                workspace=Path(scratch),
                life=0,
                postgres_url=postgres_url,
                tools=tools,
            )
            graph = _team_graph(where, factory, team)
            found = graph_tools(graph)
            try:
                from langchain_core.messages import HumanMessage

                # One turn through the team's own client (its tools never run: the model
                # answers "."). What the graph makes of "." is its own business.
                graph.invoke(
                    {"messages": [HumanMessage("crashmatrix load check: answer '.'")]},
                    how.config(),
                    durability=how.durability,
                )
            except Exception:
                pass
        finally:
            if saver is not None:
                _close(saver)
            if store == "postgres":
                from crashmatrix.harness.lives.postgres import drop_case_databases

                drop_case_databases(Path(scratch))  # the check's scratch database, best effort
            server.close()
            os.chdir(cwd)
            for key, value in saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            # The team's modules run again in each life, in its workspace: not imported here
            # (a module-level connection or file would be the scratch directory's).
            for name in set(sys.modules) - modules:
                origin = str(getattr(sys.modules[name], "__file__", "") or "")
                if origin.startswith(str(spec.here)):
                    del sys.modules[name]
    if "chat" not in routes:
        raise InputError(
            f"{where}: the agent's model client did not reach crashmatrix's model at {server.model_url}; "
            "build ChatOpenAI()/AsyncOpenAI() without a base_url, or with "
            "base_url=os.environ['OPENAI_BASE_URL']"
        )
    suite = set(contracts)
    if spec.tools == "harness" or found is None:
        return AgentFacts(tools=None, approvals=team.approvals.declared)
    return AgentFacts(tools=frozenset(n for n in found if n in suite), approvals=team.approvals.declared)


def _import(where: str, module_name: str) -> Any:
    """The team's module, or one line naming where it was asked for, the module and the
    error (where it was raised in the team's code), never a traceback."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and f"{module_name}.".startswith(f"{error.name}."):
            raise InputError(
                f"{where}: cannot import {module_name!r} ({error}); is it on sys.path? "
                "(run from the directory that holds it, or put it beside the adapter file)"
            ) from error
        raise InputError(
            f"{where}: importing {module_name!r} failed{_where(error)}: {error} "
            "(install it, or fix the import)"
        ) from error
    except Exception as error:
        raised = f"{type(error).__name__}{_where(error)}: {error}"
        raise InputError(f"{where}: importing {module_name!r} raised {raised}") from error
