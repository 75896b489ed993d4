"""The agent of ``agent.py`` made crash-safe, as a careful team would write it with the SDK
(seed 000's ledger, seed 004's recovery by contract):
``--agent=openai-agents:examples.openai_agents_agent.fixed:build``.

The SDK keeps the model's reply in memory while the step's tools run and saves the step's
``function_call`` items with their outputs only after the tools ran, so a process killed in
between leaves no trace of the calls and the restarted run asks the model again (which may
ask for the same effect a second time). Here a small SQLite ledger of the agent's own
(beside the session, autocommit rows) records:

* the model's reply, as soon as it arrives (``AgentHooks.on_llm_end``): one ``planned`` row
  per function call, before any tool starts;
* ``running`` before each tool's effect -- with, for a whole-file write, the file's base hash
  and the planned after hash -- then the result (``done``).

Each row is keyed by its call site, ``<turn>:<call_id>`` (providers reuse ids such as
``call_0`` in a later turn; by id alone turn 2 would get turn 1's result), and the same site
(with the session id) is the idempotency key sent to the service.

At the start of a life every call of the current turn the ledger knows and the session does
not answer is answered, then the SDK continues the turn with the calls answered:

* ``done``: its result, as the tool returned it (the model never saw it: nothing to mark);
* ``planned``: it never started, so it runs now, normally -- after asking the person first
  when the tool needs approval (``ctx.approve``: a call the SDK had stopped for, or one
  approved before the crash, whose approval may be stale, seed 000); a no is told as the
  rejection (``reapproval`` when asked again);
* ``running``: by the tool's contract (``ToolContext.contracts``, per call: ``run_command('ls')``
  is read-only, ``rm`` is not):
  - read-only: run again (nothing to undo);
  - a whole-file write (``recovery: precondition``): the file's hash now == the planned after
    -> ``already_applied``; == the base -> written again (``reapplied``); anything else ->
    ``CONFLICT`` and the file is left alone (someone else wrote it);
  - a keyed call with a lookup (``recovery: reconcile``): asked the service by its key
    (``reconcile.lookup_tool``): found -> what was found; not found -> retried with the SAME
    key (the service deduplicates by it): ``reconciled``;
  - a call the contract says is safe to replay (``replay``): run again, ``replayed`` (policy
    ``ask``: only if the person says yes again; no -> ``MANUAL_CHECK_REQUIRED``);
  - anything else (an email): ``SIDE_EFFECT_UNCERTAIN``, never a second send.

A call the SDK stopped for (its ``function_call`` parked in the session without an output)
is answered with its output alone: the session keeps one copy of the call, where the SDK's
own way (ask the model again) parks a second one and leaves the first unanswered.

Without a crash the same rules answer a failure the tool reports: a read-only call that timed
out or lost its response is retried once; a keyed call whose response was lost
(``SIDE_EFFECT_UNCERTAIN``) is reconciled by its key at once.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agents import Agent, AgentHooks, FunctionTool, SQLiteSession

from crashmatrix.harness.agents.frameworks.openai_agents import AgentsContext, rejection
from crashmatrix.harness.core.contracts import ToolContract, default_contract
from crashmatrix.harness.core.tools import ToolObservation

INSTRUCTIONS = "You are a helpful assistant. Use the tools to do what the user asks."
RECONCILE_ROUNDS = 3  # lookups before the answer is "uncertain" (each retry may lose its answer too)


# -- the ledger ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Row:
    site: str  # "<turn>:<call_id>"
    turn: int
    call_id: str
    tool: str
    arguments: str  # the model's JSON text
    status: str  # planned | running | done
    result: str | None
    plan: Mapping[str, Any]  # a whole-file write's path, base and after hashes


class Ledger:
    """One row per call site; every write is its own committed transaction."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)  # autocommit
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS calls (site TEXT PRIMARY KEY, turn INTEGER NOT NULL,"
            " call_id TEXT NOT NULL, tool TEXT NOT NULL, arguments TEXT NOT NULL,"
            " status TEXT NOT NULL, result TEXT, plan TEXT)"
        )

    def planned(self, turn: int, call_id: str, tool: str, arguments: str) -> None:
        # OR IGNORE: a reply asked again after a crash keeps what the first one recorded.
        self.conn.execute(
            "INSERT OR IGNORE INTO calls VALUES (?, ?, ?, ?, ?, 'planned', NULL, NULL)",
            (site_of(turn, call_id), turn, call_id, tool, arguments),
        )

    def running(self, site: str, plan: Mapping[str, Any]) -> None:
        self.conn.execute(
            "UPDATE calls SET status = 'running', plan = ? WHERE site = ?", (json.dumps(dict(plan)), site)
        )

    def done(self, site: str, result: str) -> None:
        self.conn.execute("UPDATE calls SET status = 'done', result = ? WHERE site = ?", (result, site))

    def get(self, site: str) -> Row | None:
        rows = self._rows("WHERE site = ?", (site,))
        return rows[0] if rows else None

    def of_turn(self, turn: int) -> list[Row]:
        return self._rows("WHERE turn = ? ORDER BY rowid", (turn,))

    def _rows(self, where: str, args: tuple[Any, ...]) -> list[Row]:
        query = f"SELECT site, turn, call_id, tool, arguments, status, result, plan FROM calls {where}"
        return [
            Row(r[0], r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7]) if r[7] else {})
            for r in self.conn.execute(query, args)
        ]


def site_of(turn: int, call_id: str) -> str:
    return f"{turn}:{call_id}"


def turn_of(items: Sequence[Mapping[str, Any]]) -> int:
    """The current turn: how many user messages the session holds."""
    return sum(1 for item in items if item.get("role") == "user")


# -- what a call's result says ------------------------------------------------------------------


def _result(observation: ToolObservation, contract: ToolContract, recovery: str | None = None) -> str:
    result = observation.to_result(execution_id=None, idempotency=contract.idempotency)
    if recovery:
        result["recovery"] = recovery
    return json.dumps(result, ensure_ascii=False)


def _marked(result: Mapping[str, Any], recovery: str) -> str:
    return json.dumps({**result, "recovery": recovery}, ensure_ascii=False)


def _parsed(result: str) -> dict[str, Any]:
    try:
        value = json.loads(result)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _uncertain(tool: str, contract: ToolContract) -> str:
    hint = f" Look it up with {contract.lookup_tool}." if contract.lookup_tool else ""
    observation = ToolObservation(
        ok=False,
        code="SIDE_EFFECT_UNCERTAIN",
        uncertain=True,
        content=(
            f"{tool} was cut off by a crash; whether it took effect is unknown. Check before retrying.{hint}"
        ),
    )
    return _result(observation, contract, "side_effect_uncertain")


def _manual(tool: str, contract: ToolContract) -> str:
    observation = ToolObservation(
        ok=False,
        code="MANUAL_CHECK_REQUIRED",
        uncertain=True,
        content=(
            f"{tool} may or may not have run before the agent stopped; a person must check its "
            "effect before anything is repeated."
        ),
    )
    return _result(observation, contract, "manual")


# -- a whole-file write's precondition (seed 004's canReplayFileWrite) --------------------------


def _file_hash(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def _target(workspace: Path, path: str) -> Path | None:
    """The file a write names, or None when it is not inside the workspace."""
    root = workspace.resolve()
    target = (root / path).resolve()
    return target if target.is_relative_to(root) else None


def write_plan(contract: ToolContract, arguments: Mapping[str, Any], workspace: Path) -> dict[str, Any]:
    """What a whole-file write is about to do, saved with its ``running`` row."""
    if contract.recovery != "precondition":
        return {}
    path = arguments.get(contract.path_argument)
    content = arguments.get(contract.content_argument)
    if not isinstance(path, str) or not isinstance(content, str):
        return {"refused": "the call names no path and content to check"}
    target = _target(workspace, path)
    if target is None:
        return {"path": path, "refused": f"{path!r} is outside the workspace"}
    try:
        base = _file_hash(target)
    except OSError as error:  # a directory, no permission: the write fails too
        return {"path": path, "refused": f"cannot read {path!r}: {error.strerror}"}
    return {"path": path, "base": base, "after": hashlib.sha256(content.encode()).hexdigest()}


def check_plan(plan: Mapping[str, Any], workspace: Path) -> tuple[str, str]:
    """(already_applied | apply_again | conflict, why) for an interrupted write."""
    if "refused" in plan or "after" not in plan:
        return "conflict", str(plan.get("refused", "no write plan was saved"))
    target = _target(workspace, str(plan["path"]))
    if target is None:
        return "conflict", f"{plan['path']!r} is outside the workspace"
    try:
        current = _file_hash(target)
    except OSError as error:
        return "conflict", f"cannot read {plan['path']!r}: {error.strerror}"
    # after first: a write that changes nothing (base == after) is already applied.
    if current == plan["after"]:
        return "already_applied", ""
    if current == plan["base"]:
        return "apply_again", ""
    return "conflict", f"{plan['path']!r} changed since the write started (someone else wrote it)"


# -- running a call -----------------------------------------------------------------------------


class Calls:
    """The agent's tool calls through the ledger: the tools' path and the recovery's."""

    def __init__(self, ctx: AgentsContext, ledger: Ledger) -> None:
        self.ctx = ctx
        self.ledger = ledger
        self.sites: dict[str, str] = {}  # call_id -> site, for the reply being run
        self.tools = {tool.name: tool for tool in ctx.tools}

    async def needs_approval(self, row: Row, arguments: Mapping[str, Any]) -> bool:
        """The tool's own ``needs_approval`` (a bool, or the SDK's per-call callable)."""
        tool = self.tools.get(row.tool)
        needs = tool.needs_approval if tool is not None else False
        if callable(needs):
            decided = needs(None, dict(arguments), row.call_id)
            needs = await decided if inspect.isawaitable(decided) else decided
        return bool(needs)

    def contract(self, tool: str, arguments: Mapping[str, Any]) -> ToolContract:
        return (self.ctx.contracts.get(tool) or default_contract(tool)).for_call(arguments)

    def key(self, site: str) -> str:
        return f"{self.ctx.session_id}:{site}"

    def run(self, row: Row, arguments: Mapping[str, Any]) -> str:
        """A call that has not started: ``running`` (with its plan), the effect, ``done``."""
        contract = self.contract(row.tool, arguments)
        self.ledger.running(row.site, write_plan(contract, arguments, self.ctx.workspace))
        result = self._attempt(row, arguments, contract)
        self.ledger.done(row.site, result)
        return result

    def _attempt(self, row: Row, arguments: Mapping[str, Any], contract: ToolContract) -> str:
        told = self.ctx.run_tool(row.tool, arguments, row.call_id, self.key(row.site))
        if contract.idempotency == "idempotent" and not told.get("ok") and _retryable(told):
            # A read lost its answer or timed out: reading again changes nothing.
            told = {**self.ctx.run_tool(row.tool, arguments, row.call_id, self.key(row.site)), "attempts": 2}
        elif told.get("code") == "SIDE_EFFECT_UNCERTAIN" and contract.lookup_tool:
            # Sent, answer lost: the key lets us ask the service instead of guessing.
            return self.reconcile(row, arguments, contract)
        return json.dumps(dict(told), ensure_ascii=False)

    async def recover(self, row: Row) -> str:
        """The answer for a call of an interrupted turn the session does not answer."""
        arguments = _arguments(row.arguments)
        if row.status == "done" and row.result is not None:
            return row.result  # it finished; the model has not seen it yet
        if row.status == "planned":
            # It never started. Approved before the crash or still waiting: ask (again).
            if await self.needs_approval(row, arguments):
                answer = self.ctx.approve(row.tool, row.call_id, arguments)
                if not answer.approved:
                    result = rejection(row.tool, self.ctx.contracts.get(row.tool), again=answer.again)
                    self.ledger.done(row.site, result)
                    return result
                if answer.again:  # approved once more after the restart: say so, as seed 000 does
                    result = _marked(_parsed(self.run(row, arguments)), "reapproval")
                    self.ledger.done(row.site, result)
                    return result
            return self.run(row, arguments)
        contract = self.contract(row.tool, arguments)
        if contract.idempotency == "idempotent":
            result = self._attempt(row, arguments, contract)
        elif contract.recovery == "precondition":
            result = self.precondition(row, arguments, contract)
        elif contract.recovery == "reconcile" and contract.lookup_tool:
            result = self.reconcile(row, arguments, contract)
        elif contract.recovery == "replay" and contract.replay_policy in ("auto", "ask"):
            if (
                contract.replay_policy == "ask"
                and not self.ctx.approve(row.tool, row.call_id, arguments).approved
            ):
                result = _manual(row.tool, contract)  # it may have run: a person must check
            else:
                told = self.ctx.run_tool(row.tool, arguments, row.call_id, self.key(row.site))
                result = _marked(told, "replayed")
        else:
            result = _uncertain(row.tool, contract)
        self.ledger.done(row.site, result)
        return result

    def precondition(self, row: Row, arguments: Mapping[str, Any], contract: ToolContract) -> str:
        verdict, why = check_plan(row.plan, self.ctx.workspace)
        if verdict == "already_applied":
            observation = ToolObservation(
                ok=True,
                data={"path": row.plan.get("path"), "applied": False},
                content="The file already has the requested content; nothing was written again.",
            )
            return _result(observation, contract, "already_applied")
        if verdict == "apply_again":
            told = self.ctx.run_tool(row.tool, arguments, row.call_id, self.key(row.site))
            return _marked(told, "reapplied")
        observation = ToolObservation(
            ok=False, code="CONFLICT", content=f"{row.tool} was not written again: {why}."
        )
        return _result(observation, contract, "conflict")

    def reconcile(self, row: Row, arguments: Mapping[str, Any], contract: ToolContract) -> str:
        """Ask the service by the call's key; retry under the SAME key only when it says the
        first attempt never arrived."""
        lookup = str(contract.lookup_tool)
        key = self.key(row.site)
        for _ in range(RECONCILE_ROUNDS):
            found = self.ctx.run_tool(lookup, {"idempotency_key": key}, row.call_id, key)
            if not found.get("ok"):
                break  # the lookup failed: we cannot know
            if found.get("found"):
                return _marked(found, "reconciled")
            told = self.ctx.run_tool(row.tool, arguments, row.call_id, key)
            if told.get("code") != "SIDE_EFFECT_UNCERTAIN":
                return _marked(told, "reconciled")
        return _uncertain(row.tool, contract)


def _retryable(told: Mapping[str, Any]) -> bool:
    metadata = told.get("metadata")
    return isinstance(metadata, Mapping) and bool(metadata.get("retryable"))


def _arguments(raw: str) -> Mapping[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {"_unparsed": raw}  # the tool answers INVALID_ARGUMENTS, as it did the first time
    return value if isinstance(value, dict) else {"_unparsed": raw}


# -- the SDK's seams ----------------------------------------------------------------------------


class ReplySaved(AgentHooks[Any]):
    """The model's reply goes to the ledger before any of its tools starts."""

    def __init__(self, calls: Calls, session: SQLiteSession) -> None:
        self.calls = calls
        self.session = session

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        made = [item for item in response.output if getattr(item, "type", None) == "function_call"]
        if not made:
            return
        turn = turn_of(await self.session.get_items())
        for item in made:
            self.calls.ledger.planned(turn, item.call_id, item.name, item.arguments or "{}")
            self.calls.sites[item.call_id] = site_of(turn, item.call_id)


def _ledgered(tool: FunctionTool, calls: Calls) -> FunctionTool:
    # No ``await`` before the effect: the SDK starts a step's tools together, and each runs
    # to its end in the order the model gave them.
    async def invoke(tool_context: Any, raw: str) -> str:
        call_id = str(tool_context.tool_call_id)
        row = calls.ledger.get(calls.sites.get(call_id, ""))
        if row is None:  # not recorded by the hook (a reply the hook did not see)
            raise RuntimeError(f"tool call {call_id!r} of {tool.name} is not in the ledger")
        if row.status == "done" and row.result is not None:
            return _marked(_parsed(row.result), "result_replayed")  # already ran: no second effect
        return calls.run(row, _arguments(raw))

    return dataclasses.replace(tool, on_invoke_tool=invoke)


async def _recover(session: SQLiteSession, calls: Calls) -> None:
    """Answer every call of the current turn the ledger knows and the session does not."""
    items = await session.get_items()
    turn = turn_of(items)
    last_user = max((i for i, item in enumerate(items) if item.get("role") == "user"), default=-1)
    this_turn = items[last_user + 1 :]
    answered = {item.get("call_id") for item in this_turn if item.get("type") == "function_call_output"}
    # Calls the SDK parked in the session when it stopped for an approval.
    parked = {item.get("call_id") for item in this_turn if item.get("type") == "function_call"}
    for row in calls.ledger.of_turn(turn):
        if row.call_id in answered:
            continue
        result = await calls.recover(row)
        call = {"type": "function_call", "call_id": row.call_id, "name": row.tool, "arguments": row.arguments}
        output = {"type": "function_call_output", "call_id": row.call_id, "output": result}
        await session.add_items([output] if row.call_id in parked else [call, output])  # type: ignore[list-item]


async def build(ctx: AgentsContext) -> tuple[Agent[Any], SQLiteSession]:
    # It asks a person before a tool the scenario's approvals name acts (ctx.tools then carry
    # needs_approval); said before the recovery below, which asks again through ctx.approve.
    ctx.asks_for_approval()
    session = SQLiteSession(ctx.session_id, ctx.db_path)
    calls = Calls(ctx, Ledger(ctx.db_path.with_name("openai-agents-ledger.db")))
    await _recover(session, calls)
    agent: Agent[Any] = Agent(
        name="assistant",
        instructions=INSTRUCTIONS,
        model=ctx.model,
        tools=[_ledgered(tool, calls) for tool in ctx.tools],
        hooks=ReplySaved(calls, session),
    )
    return agent, session
