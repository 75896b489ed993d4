"""A LangGraph tool-calling agent, two ways, for ``--agent=langgraph:examples.langgraph_agent.agent:build``.

``build``: LangGraph's default way -- a model node, ``ToolNode`` running the tools as plain
functions, ``SqliteSaver`` as the checkpointer. On a crash after a tool's effect but before
its ``ToolMessage`` was saved, LangGraph resumes the thread by re-running the whole ToolNode
task: the email goes out twice (docs/frameworks.md shows the cells and the cases).

``build_fixed``: the same graph, with each tool call keyed in a small ledger of its own (a
SQLite table beside the checkpoint) that it consults before acting. The key is the call's
site, not its id alone: the id of the checkpointed ``AIMessage`` that asked for it (LangChain
gives each one a unique id, saved with the checkpoint, so a resumed step finds the same key)
plus the ``tool_call_id`` (providers reuse ids such as ``call_0`` across turns; by id alone
the second turn's call would get the first turn's result). The same key goes to the service
as its idempotency key. A call already done returns its saved result. A call that started
and never finished (a ``running`` row, no result) is recovered by its contract, seed 004's way:

* a keyed call whose contract reconciles (``recovery: reconcile``, a ``lookup_tool``) asks the
  service by its key: found, the model is told what the service holds; not found, the call
  never arrived and is sent again with the SAME key. A call whose response was lost
  (``SIDE_EFFECT_UNCERTAIN`` from the service) is reconciled the same way, without a crash.
* a whole-file write (``recovery: precondition``) saved its file's base hash and the planned
  after hash with its ``running`` row: the file now at the after hash is already written
  (told so, nothing written again), at the base it is written again, anything else -- someone
  changed it, or the target cannot be checked at all -- is a ``CONFLICT`` and the file is
  left alone.
* a read-only call (``run_command("ls")`` is, ``rm`` is not), or one its contract says to
  replay, runs again; anything else is told ``SIDE_EFFECT_UNCERTAIN``.

A retryable timeout on a read-only call, or a lost response on a keyed call the service
deduplicates (``replay_policy: auto``), is retried once with the same key.

``build_approved`` and ``build_fixed_approved``: the same two, asking a person before a tool
acts where its contract requires approval (``approval: required``: the suite's effects; a read
or ``ls`` is not asked), LangGraph's way: the tool calls ``interrupt()`` (through
``ctx.ask_approval``), the graph stops, the person's answer resumes it with
``Command(resume=True|False)``, and LangGraph runs the tool again from its start, where
``interrupt()`` returns the answer. A rejected call tells the model ``REJECTED`` and does
nothing. ``build_approved`` trusts the answer LangGraph saved, whatever happened since: killed
after the approval, the resumed tool acts on it without asking; killed after the effect, it
acts again on the same approval. ``build_fixed_approved`` keeps in its ledger in which process
each call was asked: an approval given before a restart to a call that never started is asked
again (the person may have changed their mind: seed 000's reapproval), and a command whose
contract says to ask before replaying (``npm test``) is asked again before it is run a second
time (no: a person must check, ``MANUAL_CHECK_REQUIRED``).

Both take crashmatrix's ``GraphContext``: the model, the suite's tools (run by the mock tools),
and the checkpoint file. In production the same graph gets a real ``ChatOpenAI``, real tool
functions and a real database path, and ``interrupt()`` with the team's own payload.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.tools import InjectedToolCallId, StructuredTool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.errors import GraphInterrupt
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState, ToolNode, tools_condition

SYSTEM = "You are a helpful assistant."


def _graph(ctx: Any, tools: list[Any]) -> Any:
    model = ctx.model.bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "agent")
    saver = SqliteSaver(sqlite3.connect(ctx.checkpoint_path, check_same_thread=False))
    return graph.compile(checkpointer=saver)


def build(ctx: Any) -> Any:
    """The framework's default way: ToolNode runs the tools, the checkpointer saves the state."""
    return _graph(ctx, list(ctx.tools))


# -- the fixed way: each tool consults a ledger keyed by its call site -----------------------


@dataclass(frozen=True)
class Row:
    # "asking" (a person is asked, the call has not started), "running" (saved before the
    # effect) or "done" (the result saved)
    status: str
    result: str | None
    plan: dict[str, Any] | None  # a whole-file write's base / after hashes
    asked: tuple[str, ...] = ()  # the processes that asked a person about this call, in order


class Ledger:
    """What each tool call did, saved before and after the effect (autocommit rows)."""

    def __init__(self, path: Any) -> None:
        self.conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS calls "
            "(site TEXT PRIMARY KEY, status TEXT, result TEXT, plan TEXT, asked TEXT)"
        )

    def get(self, site: str) -> Row | None:
        row = self.conn.execute(
            "SELECT status, result, plan, asked FROM calls WHERE site = ?", (site,)
        ).fetchone()
        if not row:
            return None
        return Row(row[0], row[1], json.loads(row[2]) if row[2] else None, tuple(json.loads(row[3] or "[]")))

    def set(
        self,
        site: str,
        status: str,
        result: str | None = None,
        plan: dict[str, Any] | None = None,
        asked: Sequence[str] = (),
    ) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?, ?)",
            (site, status, result, json.dumps(plan) if plan is not None else None, json.dumps(list(asked))),
        )


def call_site(messages: Sequence[Any], tool_call_id: str) -> str:
    """``<AIMessage id>/<tool_call_id>``: the latest checkpointed message that asked for this
    call (ToolNode runs the calls of the thread's last AIMessage)."""
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(c["id"] == tool_call_id for c in message.tool_calls):
            return f"{message.id}/{tool_call_id}"
    raise LookupError(f"no AIMessage in the thread asked for tool call {tool_call_id!r}")


def _told(ok: bool, code: str, content: str, idempotency: str, **data: Any) -> str:
    """A Tool Result in the suite's shape (``ok``, ``code``, ``content``, ``metadata``)."""
    out: dict[str, Any] = {"ok": ok, "status": "succeeded" if ok else "failed", **data, "content": content}
    if not ok:
        out["code"] = code
        out["metadata"] = {"retryable": False, "idempotency": idempotency}
    return json.dumps(out, ensure_ascii=False)


def _rejected(name: str, idempotency: str) -> str:
    """The person said no: nothing ran (the suite's ``REJECTED``)."""
    return json.dumps(
        {
            "ok": False,
            "status": "rejected",
            "code": "REJECTED",
            "content": f"The user rejected {name}; it was not executed.",
            "metadata": {"retryable": False, "idempotency": idempotency},
        }
    )


def _manual(name: str, idempotency: str) -> str:
    """Asked again before repeating a call that may have run, the person said no."""
    return json.dumps(
        {
            "ok": False,
            "status": "unknown",
            "code": "MANUAL_CHECK_REQUIRED",
            "content": (
                f"{name} may or may not have run before the agent stopped; a person must check its "
                "effect before anything is repeated."
            ),
            "metadata": {"retryable": False, "idempotency": idempotency},
        }
    )


def _uncertain(name: str, why: str = "started before a crash") -> str:
    return json.dumps(
        {
            "ok": False,
            "status": "unknown",
            "code": "SIDE_EFFECT_UNCERTAIN",
            "content": f"{name} {why} and may have taken effect; check before retrying.",
            "metadata": {"retryable": False, "idempotency": "non_idempotent"},
        }
    )


def _parsed(result: str) -> dict[str, Any]:
    try:
        told = json.loads(result)
    except ValueError:
        return {}
    return told if isinstance(told, dict) else {}


def _is_uncertain(result: str) -> bool:
    return _parsed(result).get("code") == "SIDE_EFFECT_UNCERTAIN"


def _worth_one_more(result: str, contract: Any) -> bool:
    """A lost response or a timeout the service says is safe to retry, on a call that is safe
    to repeat: a read-only call, or a keyed one the service deduplicates (replay_policy auto)."""
    told = _parsed(result)
    if not told or told.get("ok"):
        return False
    retryable = bool((told.get("metadata") or {}).get("retryable"))
    return (retryable and contract.idempotency == "idempotent") or (
        told.get("code") == "SIDE_EFFECT_UNCERTAIN" and contract.replay_policy == "auto"
    )


# -- a whole-file write: seed 004's base / after hash check ----------------------------------


def _sha256(target: Path) -> str | None:
    """The file's hash, None when it does not exist."""
    try:
        return hashlib.sha256(target.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def _target(workspace: Path, path: Any) -> Path | str:
    """``path`` inside the workspace, or why it cannot be checked."""
    if not isinstance(path, str) or not path:
        return f"{path!r} is not a path"
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts:
        return f"{path!r} is outside the workspace"
    root = workspace.resolve()
    target = (root / pure).resolve()
    if not target.is_relative_to(root):
        return f"{path!r} leads outside the workspace"
    if target.is_dir():
        return f"{path!r} is a directory"
    return target


def _plan(workspace: Path, contract: Any, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Saved with the ``running`` row, before the write: the file's hash now (base) and the
    hash it will have (after). A target that cannot be read is saved as such: on recovery
    nothing proves a second write safe."""
    path = arguments.get(contract.path_argument)
    content = arguments.get(contract.content_argument)
    target = _target(workspace, path)
    if isinstance(target, str) or not isinstance(content, str):
        return {"path": path, "unchecked": target if isinstance(target, str) else "no text content"}
    try:
        base = _sha256(target)
    except OSError as error:
        return {"path": path, "unchecked": f"cannot read {path!r}: {error.strerror}"}
    return {"path": path, "base_sha256": base, "after_sha256": hashlib.sha256(content.encode()).hexdigest()}


def _check(workspace: Path, plan: Mapping[str, Any]) -> tuple[str, str]:
    """``canReplayFileWrite``: (``already_applied`` | ``apply_again`` | ``conflict``, why)."""
    path = plan.get("path")
    if "unchecked" in plan:
        return "conflict", f"its target cannot be checked ({plan['unchecked']})"
    target = _target(workspace, path)
    if isinstance(target, str):
        return "conflict", f"its target cannot be checked ({target})"
    try:
        current = _sha256(target)
    except OSError as error:
        return "conflict", f"cannot read {path!r}: {error.strerror}"
    # after before base: a write that changes nothing (base == after) needs no second write.
    if current == plan["after_sha256"]:
        return "already_applied", ""
    if current == plan["base_sha256"]:
        return "apply_again", ""
    return "conflict", f"{path!r} was changed by someone else since the write was planned"


# -- the tool wrapper ------------------------------------------------------------------------


class _Call:
    """One call of one tool, at its call site: the first run, and recovery after a crash."""

    def __init__(
        self,
        ctx: Any,
        ledger: Ledger,
        name: str,
        arguments: dict[str, Any],
        tool_call_id: str,
        site: str,
        process: str = "",
        asked_here: set[tuple[str, int]] | None = None,
    ):
        self.ctx, self.ledger, self.name = ctx, ledger, name
        self.arguments, self.tool_call_id, self.site = arguments, tool_call_id, site
        # Per call: run_command("ls src") is read-only where run_command("rm -rf x") is not.
        self.contract = ctx.contracts[name].for_call(arguments)
        # This process, when the graph asks approvals ("" when it does not), and the questions
        # (call site, index) it asked a person itself.
        self.process = process
        self.asked_here = asked_here if asked_here is not None else set()
        self.asked: tuple[str, ...] = ()

    def __call__(self) -> str:
        row = self.ledger.get(self.site)
        if row is not None and row.status == "done":
            return row.result or ""  # the saved result: no second effect
        if self.process and self.contract.approval == "required":
            refused = self.approve(row)
            if refused is not None:
                self.ledger.set(self.site, "done", refused, asked=self.asked)
                return refused
        if row is not None and row.status == "running":
            result = self.recover(row)
        else:
            plan = _plan(self.ctx.workspace, self.contract, self.arguments) if self.precondition else None
            self.ledger.set(self.site, "running", plan=plan, asked=self.asked)
            result = self.run()
        self.ledger.set(self.site, "done", result, asked=self.asked)
        return result

    def approve(self, row: Row | None) -> str | None:
        """None when the person approves, else what to tell the model.

        LangGraph runs the tool again from its start after each answer, and ``interrupt()``
        returns the saved answers in the order they were asked: so every run asks the
        questions the ledger's ``asked`` counts, in order, and only one not yet answered
        stops the graph. An answer this process did not ask for (``asked_here``) was given
        before a restart: for a call that never started it is asked again (the approval may
        be stale: seed 000's reapproval); for a running one only when its contract says to ask
        before a replay (``npm test``)."""
        status = row.status if row is not None else "asking"
        plan = row.plan if row is not None else None
        self.asked = row.asked if row is not None and row.asked else ()
        if not self.asked:
            self.asked = (self.process,)
            self.ledger.set(self.site, status, plan=plan, asked=self.asked)
        for index in range(len(self.asked)):
            if not self.ask(index):
                return self.refused(status)
        stale = (self.site, len(self.asked) - 1) not in self.asked_here
        if stale and (status == "asking" or self.contract.replay_policy == "ask"):
            self.asked = (*self.asked, self.process)
            self.ledger.set(self.site, status, plan=plan, asked=self.asked)
            self.ask(len(self.asked) - 1)  # stops the graph: nobody answered it yet
        return None

    def ask(self, index: int) -> bool:
        """The ``index``-th question about this call: its saved answer, or the graph stops
        (``GraphInterrupt``) and this process remembers it asked."""
        call = {"name": self.name, "args": self.arguments, "id": self.tool_call_id}
        try:
            return bool(self.ctx.ask_approval(call, again=index > 0))
        except GraphInterrupt:
            self.asked_here.add((self.site, index))
            raise

    def refused(self, status: str) -> str:
        """No before anything ran: rejected. No to running again a call that may have run:
        a person must check."""
        if status == "running":
            return _manual(self.name, self.contract.idempotency)
        return _rejected(self.name, self.contract.idempotency)

    @property
    def precondition(self) -> bool:
        return self.contract.recovery == "precondition"

    @property
    def reconciles(self) -> bool:
        return self.contract.recovery == "reconcile" and bool(self.contract.lookup_tool)

    def run(self) -> str:
        """The tool, under the call site's key (the service deduplicates on it)."""
        result = self.ctx.run_tool(self.name, self.arguments, self.tool_call_id, key=self.site)
        if _is_uncertain(result) and self.reconciles:
            return self.reconcile()  # the request went out, the answer was lost: ask by key
        if _worth_one_more(result, self.contract):
            result = self.ctx.run_tool(self.name, self.arguments, self.tool_call_id, key=self.site)
        return result

    def recover(self, row: Row) -> str:
        """The call started in an earlier life and its result was never saved: by contract."""
        if self.reconciles:
            return self.reconcile()
        if self.precondition and row.plan is not None:
            return self.check_write(row.plan)
        if self.contract.idempotency == "idempotent" or self.contract.recovery in ("replay", "precondition"):
            return self.run()  # read-only, or a write with nothing to check it by: the same again
        return _uncertain(self.name)

    def reconcile(self, rounds: int = 2) -> str:
        """Ask the service by the key whether the call happened: found, tell what it holds;
        not found, the call never reached it, so send it again with the SAME key (even were
        that wrong, the service deduplicates). A lookup that fails, or a call whose answer is
        lost again and again, is told as uncertain."""
        lookup = self.contract.lookup_tool
        for _ in range(rounds):
            found = _parsed(self.ctx.run_tool(lookup, {"idempotency_key": self.site}, self.tool_call_id))
            if not found.get("ok"):
                return _uncertain(
                    self.name, f"could not be looked up by its key ({found.get('content', '')})"
                )
            if found.get("found"):
                found["content"] = (
                    f"{self.name} had already taken effect: {lookup} found it by its idempotency key, "
                    "so it was not sent again."
                )
                return json.dumps(found, ensure_ascii=False)
            result = self.ctx.run_tool(self.name, self.arguments, self.tool_call_id, key=self.site)
            if not _is_uncertain(result):
                return result
        return _uncertain(self.name, "lost its answer more than once")

    def check_write(self, plan: Mapping[str, Any]) -> str:
        """Seed 004 for a whole-file write: the file now against the saved base and after."""
        verdict, why = _check(self.ctx.workspace, plan)
        idempotency = self.contract.idempotency
        if verdict == "already_applied":
            return _told(
                True,
                "",
                f"{plan['path']} already has the requested content; nothing was written again.",
                idempotency,
                path=plan["path"],
                applied=False,
            )
        if verdict == "apply_again":
            return self.run()  # the file is still at its base: the write never landed
        return _told(False, "CONFLICT", f"{self.name} was not repeated: {why}.", idempotency)


def _keyed_tool(
    ctx: Any,
    ledger: Ledger,
    name: str,
    schema: Any,
    description: str,
    process: str = "",
    asked_here: set[tuple[str, int]] | None = None,
) -> Any:
    def call(
        tool_call_id: Annotated[str, InjectedToolCallId],
        messages: Annotated[list[AnyMessage], InjectedState("messages")],
        **arguments: Any,
    ) -> str:
        given = {k: v for k, v in arguments.items() if v is not None}
        site = call_site(messages, tool_call_id)
        return _Call(ctx, ledger, name, given, tool_call_id, site, process, asked_here)()

    return StructuredTool.from_function(func=call, name=name, description=description, args_schema=schema)


def build_fixed(ctx: Any) -> Any:
    """The same graph; each tool checks its ledger first (see the module's docstring)."""
    ledger = Ledger(ctx.checkpoint_path.with_name("tool-ledger.sqlite"))
    tools = [_keyed_tool(ctx, ledger, t.name, t.args_schema, t.description) for t in ctx.tools]
    return _graph(ctx, tools)


# -- asking a person first -------------------------------------------------------------------


def _asking_tool(ctx: Any, tool: Any) -> Any:
    """``tool`` that asks a person before it acts, where its contract requires approval."""

    def call(tool_call_id: Annotated[str, InjectedToolCallId], **arguments: Any) -> str:
        given = {k: v for k, v in arguments.items() if v is not None}
        contract = ctx.contracts[tool.name].for_call(given)
        if contract.approval == "required" and not ctx.ask_approval(
            {"name": tool.name, "args": given, "id": tool_call_id}
        ):
            return _rejected(tool.name, contract.idempotency)
        return str(ctx.run_tool(tool.name, given, tool_call_id))

    return StructuredTool.from_function(
        func=call, name=tool.name, description=tool.description, args_schema=tool.args_schema
    )


def build_approved(ctx: Any) -> Any:
    """LangGraph's default way, with an approval inside each tool that acts (``interrupt()``)."""
    ctx.asks_for_approval()
    return _graph(ctx, [_asking_tool(ctx, t) for t in ctx.tools])


def build_fixed_approved(ctx: Any) -> Any:
    """``build_fixed``, asking first; an approval older than this process is asked again."""
    ctx.asks_for_approval()
    # Which process asked: a new id each time the graph is built (each start of the agent).
    process = uuid.uuid4().hex
    asked_here: set[tuple[str, int]] = set()  # in memory: forgotten with the process
    ledger = Ledger(ctx.checkpoint_path.with_name("tool-ledger.sqlite"))
    tools = [
        _keyed_tool(ctx, ledger, t.name, t.args_schema, t.description, process, asked_here) for t in ctx.tools
    ]
    return _graph(ctx, tools)


__all__ = ["build", "build_approved", "build_fixed", "build_fixed_approved"]
