"""The OpenAI Agents SDK (``openai-agents``): an agent built with it, crashed through the SDK's
own seams, selected as ``--agent=openai-agents:package.module:factory``.

The user's factory is ``build(ctx: AgentsContext) -> (agent, session)``: an ``agents.Agent``
whose model is ``ctx.model`` (an ``OpenAIChatCompletionsModel`` served by crashmatrix's
scripted model) and whose tools are ``ctx.tools`` (the scenario's tools as ``FunctionTool``s,
run by crashmatrix's mock tools, so their effects are counted in the world), and an
``agents.SQLiteSession(ctx.session_id, ctx.db_path)``: the conversation store a restarted
life continues from. docs/frameworks.md ("OpenAI Agents SDK") shows it.

What the SDK does, measured with this adapter (docs/frameworks.md): within a turn it saves a
step's items to the session only after the step's tools ran, the model's ``function_call``
and its ``function_call_output`` together. A life killed while a tool runs or after it
returned leaves the session without the call; the restarted life continues the turn
(``Runner.run_sync(agent, [], session=session)``), the model is asked again and the tool
runs again.

Boundaries, each at the SDK moment whose state matches the name:

* ``after_model_reply``: the model's reply with function calls was received (``ctx.model``'s
  ``get_response`` returns it to the SDK); no hook, tool or save has run;
* ``after_running``: the SDK invoked the tool, which is about to act (no effect yet);
* ``during_side_effect``: between the steps of a mock tool's effect (``ToolContext.step``);
* ``after_side_effect``: the tool returned, its output not yet in the session;
* ``after_tool_result``: the session's ``add_items`` that saved the call's output returned.

Approvals, the SDK's human-in-the-loop way: a suite tool the scenario names under
``approvals:`` or ``approvals_again:`` gets ``needs_approval`` (per call: the contract's
``approval`` for these arguments, so ``run_command('ls')`` is not asked). ``Runner.run``
then returns with ``result.interruptions``; the life answers each by tool name from the
scenario (``approvals_again`` when the person was asked about the same call in an earlier
life: ``Approvals``), ``state.approve(item)`` / ``state.reject(item, rejection_message=...)``
on ``result.to_state()``, and runs again with the state. Two more boundaries follow:

* ``after_tool_call_saved``: the SDK saved the parked call (its ``function_call`` without an
  output) when it stopped for the approval; nobody has answered yet;
* ``after_approved``: the answer yes was given on the RunState (and kept, for a factory that
  keeps it) and the resumed run has not started the tool.

A factory may return ``(agent, session, ctx.run_state_path)``: the life then keeps the
RunState there the way the SDK's docs say a durable app does (``to_json`` when the run
stops for approvals and after each answer; ``RunState.from_json`` and ``Runner.run(agent,
state)`` in the next life, the kept answers standing). Without it a stop for approval lives
in memory only, and a crash loses the question and the answer (docs/frameworks.md).

``after_tool_call_pending`` never happens (nothing of the reply is written before its tools
ran or it parked), and ``before_tool_result`` would be the same state as
``after_side_effect`` for an agent without a ledger: each listed in ``unreachable`` with why.
Torn writes and power loss are not applicable: the session is SQLite.

The SDK's event loop, its HTTP client and the model client are created in ``run_life``, never
at import: the fork server imports this module and the user's (``preload``) before it forks.
A model of the agent's own (a model name on the SDK's default client, an ``AsyncOpenAI()``)
reaches the same scripted model on loopback: ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` point at
it before the factory runs, and the SDK's default API is set to Chat Completions.

The same module drives an agent declared in an adapter YAML (``framework: openai-agents``;
``harness.agents.foreign`` does everything kind 2 does, then calls ``drive``): the team's own
``FunctionTool`` instances bracketed (``after_running`` / ``after_side_effect``), its own model
client, its own ``SQLiteSession`` or ``SQLAlchemySession`` on PostgreSQL (``read_records``),
built once at load by ``check``. docs/frameworks.md ("Your own agent in an adapter YAML").
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import json
import os
import shlex
import ssl
import sys
import tempfile
import traceback
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from crashmatrix.harness.agents.foreign_session import LedgerMap, _normalised, _write_copy
from crashmatrix.harness.agents.frameworks.approvals import Answer, Approvals, rejection
from crashmatrix.harness.agents.protocol import MODEL_BASE_URL, LifeContext
from crashmatrix.harness.agents.readonly_db import connect_readonly
from crashmatrix.harness.agents.session_records import SqliteRows
from crashmatrix.harness.agents.team_life import (
    CLIENT_ENV,
    AgentFacts,
    DotModel,
    FrameworkInfo,
    TeamLife,
    client_env,
)
from crashmatrix.harness.core.boundaries import BOUNDARIES, BoundaryHook
from crashmatrix.harness.core.capabilities import Capabilities
from crashmatrix.harness.core.categories import CRASHMATRIX, ResultMapping
from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.dialect import Dialect
from crashmatrix.harness.core.ledger import arguments_sha256
from crashmatrix.harness.core.records import content_text
from crashmatrix.harness.core.session_log import SessionLog
from crashmatrix.harness.core.toolmap import ToolMap, ToolName
from crashmatrix.harness.core.tools import ToolContext
from crashmatrix.harness.errors import InputError
from crashmatrix.harness.session_file import fsync_directory

if TYPE_CHECKING:
    from crashmatrix.harness.core.trace import CaseRun
    from crashmatrix.harness.observation.observation import Observation

__all__ = [
    "ASKING_ONLY",
    "FRAMEWORK",
    "SUPPORTED",
    "AgentsContext",
    "Answer",
    "Approvals",
    "OpenAIAgentsAdapter",
    "TeamContext",
    "check",
    "drive",
    "load",
    "read_records",
    "read_session",
    "rejection",
    "session_records",
]

# [lowest, next major) of openai-agents, the extra's range in pyproject.toml (test_versions.py),
# both ends tested in CI (.ci/frameworks runs this adapter's tests at the lowest). Below 0.21
# the SDK needs openai<3, which crashmatrix's own openai>=3.40 excludes.
SUPPORTED = ((0, 21, 0), (1,))
SUPPORTED_TEXT = ">=0.21.0,<1"
DB_NAME = "openai-agents.db"  # beside crashmatrix's normalised copy, in .agent_state/
MESSAGES_TABLE = "agent_messages"
SESSION_ID = "case"  # the SQLiteSession's id in every case's database
RUN_STATE_NAME = "openai-agents-runstate.json"  # a factory that keeps the RunState: ctx.run_state_path
ASKED_NAME = "openai-agents-approvals.jsonl"  # the person's memory of what they were asked

# A client needs an SSL context to be built; loading the CA bundle costs ~150 ms, so it is
# made once at import (in the fork server, with ``preload``). It is configuration, not a
# connection: every request goes to the life's respx router over plain http.
_TLS = ssl.create_default_context()

# The run's tool result: (suite tool, arguments, tool_call_id, idempotency key or None for
# a fresh key per attempt) -> crashmatrix's Tool Result object (``ToolObservation.to_result``).
RunTool = Callable[[str, Mapping[str, Any], str, "str | None"], Mapping[str, Any]]


@dataclass(frozen=True)
class AgentsContext:
    """What the user's factory gets, once per life."""

    model: Any  # agents.OpenAIChatCompletionsModel, its requests served by the scripted model
    tools: tuple[Any, ...]  # agents.FunctionTool per scenario tool, run by the mock tools
    session_id: str
    db_path: Path  # give it to SQLiteSession: the file the next life continues from
    workspace: Path
    contracts: Mapping[str, ToolContract]  # each tool's idempotency and recovery class
    run_tool: RunTool  # the mock tool itself, for a factory that wraps its own tools
    life: int
    # Return it as the third value to keep the RunState across lives (the SDK's to_json).
    run_state_path: Path
    # The scenario's person, for a factory's own recovery that asks again before acting:
    # (tool, call_id, arguments) -> Answer. The life answers the SDK's interruptions itself.
    approve: Callable[[str, str, Mapping[str, Any]], Answer]
    declared: _Declared = field(default_factory=lambda: _Declared(), compare=False, repr=False)

    def asks_for_approval(self) -> None:
        """Say that this agent asks a person before its tools act: ``ctx.tools`` then carry
        ``needs_approval`` where the scenario answers an approval (per call, by the tool's
        contract), and the approval scenarios apply to it. A factory whose own tools set
        ``needs_approval`` need not say it: the adapter sees it on the built agent."""
        self.declared.asks = True


class _Declared:
    """What a factory said of its agent while building it (mutable: the context is frozen)."""

    def __init__(self) -> None:
        self.asks = False


class KeptState:
    """The RunState a durable app keeps while a run waits for approvals (the SDK's
    ``to_json``), with the answers the app gave: written whole (temporary file, fsync,
    rename), removed when the run ends."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def save(self, state: Any, answered: Mapping[str, bool]) -> None:
        temporary = self.path.with_name(self.path.name + ".tmp")
        with temporary.open("w", encoding="utf-8") as out:
            json.dump({"state": state.to_json(), "answered": dict(answered)}, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.path)
        fsync_directory(self.path.parent)

    def load(self) -> tuple[Mapping[str, Any], dict[str, bool]] | None:
        if not self.path.exists():
            return None
        kept = json.loads(self.path.read_text(encoding="utf-8"))
        return kept["state"], {str(k): bool(v) for k, v in kept["answered"].items()}

    def clear(self) -> None:
        if self.path.exists():
            self.path.unlink()
            fsync_directory(self.path.parent)


# -- the session, read as crashmatrix's records ---------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) for part in content if isinstance(part, Mapping) and "text" in part
        )
    return "" if content is None else str(content)


def _records(items: Sequence[tuple[int, Mapping[str, Any]]]) -> list[tuple[int, Any]]:
    """The SDK's items as chat messages (the shape our records and the scripted model share):
    consecutive ``function_call`` items are one assistant message with its tool calls."""
    out: list[tuple[int, Any]] = []
    for number, item in items:
        kind = item.get("type")
        if kind == "function_call":
            call = {
                "id": str(item.get("call_id", "")),
                "type": "function",
                "function": {"name": str(item.get("name", "")), "arguments": str(item.get("arguments", ""))},
            }
            last = out[-1][1]["message"] if out else None
            if (
                last is not None
                and last.get("role") == "assistant"
                and last.get("tool_calls")
                # The same id again is another reply asking it (a stop for approval saved the
                # call, the next life's reply saved it again), not a second call of one step.
                and all(c["id"] != call["id"] for c in last["tool_calls"])
            ):
                last["tool_calls"].append(call)
                continue
            out.append(
                (
                    number,
                    {
                        "type": "message",
                        "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                    },
                )
            )
        elif kind == "function_call_output":
            # An MCP tool's output is its content blocks, text parts (``content_text``).
            content = content_text(item.get("output")) or ""
            message = {"role": "tool", "tool_call_id": str(item.get("call_id", "")), "content": content}
            out.append((number, {"type": "message", "message": message}))
        elif item.get("role") in ("user", "assistant", "system", "developer") and kind in (None, "message"):
            out.append(
                (
                    number,
                    {
                        "type": "message",
                        "message": {"role": item["role"], "content": _text(item.get("content"))},
                    },
                )
            )
        # reasoning, handoffs, hosted tools: not part of what the suite judges
    return out


def _items(db_path: Path, session_id: str, table: str = MESSAGES_TABLE) -> list[Mapping[str, Any]]:
    if not db_path.exists():
        return []
    conn = connect_readonly(db_path)
    try:
        try:
            rows = conn.execute(
                f'SELECT message_data FROM "{table}" WHERE session_id = ? ORDER BY id', (session_id,)
            ).fetchall()
        except Exception as error:  # sqlite3.OperationalError: no table yet
            if "no such table" in str(error):
                return []
            raise
    finally:
        conn.close()
    return [json.loads(row[0]) for row in rows]


def read_session(
    db_path: Path, session_id: str, pending: Sequence[Mapping[str, Any]] = ()
) -> tuple[SessionLog, list[bytes]]:
    """The SDK's SQLite session as our records plus the normalised lines (read-only).
    ``pending``: items the run holds in memory, put after the saved ones (see ``_copy``)."""
    saved = _items(db_path, session_id)
    # Saved already in this turn (a provider may reuse a call id in a later turn).
    last_user = max((i for i, item in enumerate(saved) if item.get("role") == "user"), default=-1)
    known = {item.get("call_id") for item in saved[last_user + 1 :] if item.get("type") == "function_call"}
    extra = [item for item in pending if item.get("call_id") not in known]
    items = list(enumerate([*saved, *extra], start=1))
    entries, lines, ends = _normalised(db_path, _records(items), LedgerMap())
    return SessionLog(db_path, tuple(entries), None, ends[-1] if ends else 0, tuple(ends)), lines


# -- the adapter ------------------------------------------------------------------------------


# The SDK moments with no such state (OpenAIAgentsAdapter.unreachable).
_UNREACHABLE: Mapping[str, str] = {
    "after_tool_call_pending": (
        "the SDK writes nothing of the model's reply before its tools ran (the step's "
        "function_call items saved with their outputs, in one add_items) or it stopped for "
        "an approval (the call saved to the session itself: after_tool_call_saved)"
    ),
    "before_tool_result": (
        "no ledger: the moment after the effect and before the output is saved is after_side_effect"
    ),
}


# Its Tool Results are crashmatrix's shape (ctx.tools return them), but its recovery is the
# SDK's, not crashmatrix's: the reference agent's outcome / code vocabulary is not applicable
# (verdict._VOCABULARY), what the model was told is. As LangGraph's.
RESULTS = ResultMapping("openai-agents", CRASHMATRIX.rules)
DIALECT = Dialect(RESULTS, ToolMap.identity())
WHY_NO_APPROVAL = (
    "the agent asks no approval (no tool of its own has needs_approval, and its factory did not "
    "call ctx.asks_for_approval())"
)
# The approval moments, reached only by an agent that asks (load() finds out).
_APPROVAL_BOUNDARIES = ("after_tool_call_saved", "after_approved")


class OpenAIAgentsAdapter:
    """``AgentAdapter`` for an Agents SDK agent (see the module docstring)."""

    keeps_ledger = False  # the SDK keeps a conversation, no ledger of attempts
    # A step's calls run at the same time (asyncio): points grouped by call (``by_call``).
    concurrent_calls = True
    # Its session is its framework's store: the double@P column is not reachable, with why
    # (``enumeration.adapter_double_unreachable``).
    framework_store = True
    dialect = DIALECT
    # Said in the matrix where a column is "not reachable"; the agent reaches every other
    # named boundary (derived, so the two cannot disagree). An agent that asks no approval
    # has the approval moments unreachable too (load(): _found).
    unreachable: Mapping[str, str] = _UNREACHABLE
    boundaries: tuple[str, ...] = tuple(b for b in BOUNDARIES if b not in _UNREACHABLE)
    tears_writes = False
    torn_write_unreachable = (
        "its session is a SQLite database (agents.SQLiteSession): SQLite writes rows through its own "
        "journal, there is no appended line to cut"
    )
    edits_native_session = False  # crashmatrix's copy is rebuilt from the SDK's session
    # Until load() built the agent: what it asks and which suite tools it has decide (_found).
    capabilities = Capabilities(approvals=True, edits_native_session=False)

    def __init__(self, spec: str, module: str, factory: Callable[[AgentsContext], Any]) -> None:
        self.agent_spec = spec
        self.name = f"openai-agents:{module}"
        self.factory = factory
        # The fork server imports these once (the lead's launcher reads it).
        self.preload: tuple[str, ...] = ("agents", __name__, module)

    def _found(self, tools: ToolMap, asks: bool) -> None:
        """What the agent the factory built at load has: the suite's tools it lacks are not
        applicable ("the agent has no read_file"), and an agent that asks no approval has the
        approval scenarios not applicable and their two moments not reachable, with why."""
        self.capabilities = Capabilities(tools=tools, approvals=asks, edits_native_session=False)
        if not asks:
            self.unreachable = {**_UNREACHABLE, **dict.fromkeys(_APPROVAL_BOUNDARIES, WHY_NO_APPROVAL)}
            self.boundaries = tuple(b for b in BOUNDARIES if b not in self.unreachable)

    # -- sessions ---------------------------------------------------------------------------

    @staticmethod
    def db_path(case_dir: Path) -> Path:
        return case_dir / "world" / "workspace" / ".agent_state" / DB_NAME

    def power_session(self, case_dir: Path) -> Path | str:
        return (
            "the session is a SQLite database (agents.SQLiteSession): SQLite syncs from its C library, "
            "which the harness's os.fsync recorder does not see, and a database is not cut back by length"
        )

    def session_records(self, case_dir: Path) -> SqliteRows:
        """Where ``crashmatrix doctor`` plants its faults: the SDK's own session table, the
        rows ``observe`` reads (record n is the n-th item of the session)."""
        order = "WHERE session_id = ? ORDER BY id"
        return SqliteRows(self.db_path(case_dir), MESSAGES_TABLE, "message_data", order, (SESSION_ID,))

    def observe(self, run: CaseRun) -> Observation:
        from crashmatrix.harness.observation.reading import read_observation

        return read_observation(
            run,
            session=lambda case_dir: read_session(self.db_path(case_dir), SESSION_ID)[0],
            keeps_ledger=False,
            dialect=self.dialect,
        )

    def _copy(self, ctx: LifeContext, pending: Sequence[Mapping[str, Any]] = ()) -> None:
        """crashmatrix's normalised copy, where the world measures ``session_bytes``: it
        places each effect among the calls (``harness.verdict.invariants``' attribution by
        tool call id: the latest such call in the copy when the effect happened).

        While a step's tools run, the copy holds the step's function calls after the saved
        items, although the SDK saves them only after the tools: the call an effect belongs
        to is known to the run when it acts, and a second turn reusing a call id must not
        have its effect given to the first turn's call. It is no durability claim: this
        agent keeps no ledger (``keeps_ledger = False``), so no check reads the copy as one."""
        _write_copy(ctx.session_path, read_session(self.db_path(ctx.case_dir), ctx.session_id, pending)[1])

    # -- a life -----------------------------------------------------------------------------

    def run_life(self, ctx: LifeContext) -> None:
        with _scripted_loopback(ctx, self.dialect):
            asyncio.run(self._life(ctx))

    async def _life(self, ctx: LifeContext) -> None:
        import httpx

        from crashmatrix.harness.agents.tool_faults import mock_toolbox

        _prepare_sdk()  # tracing off (it exports to OpenAI), chat completions, a fresh client
        self._copy(ctx)
        # Its function tools run the mock tools: the tool-side columns act between them and the world.
        toolbox = mock_toolbox(ctx)
        pending: list[Mapping[str, Any]] = []  # the function calls of the step running now
        run_tool = self._run_tool(ctx, toolbox, pending)
        hooks = _step_calls(pending)
        db_path = self.db_path(ctx.case_dir)
        turn = [sum(1 for item in _items(db_path, ctx.session_id) if item.get("role") == "user")]
        approvals = Approvals(ctx, db_path.with_name(ASKED_NAME), lambda: turn[0])
        named = _asking(ctx.approvals, ctx.approvals_again)
        declared = _Declared()
        # An httpx (not httpx2) client: the one the life's respx router intercepts.
        async with httpx.AsyncClient(timeout=30.0, verify=_TLS) as http:
            # after_model_reply: the reply with its calls is in memory, nothing of it saved.
            def replied(call_id: str) -> None:
                ctx.hook("after_model_reply", call_id)

            model = chat_model(ctx.model_base_url, http, replied)
            context = AgentsContext(
                model=model,
                tools=tuple(
                    # needs_approval only where the factory said its agent asks (a scenario's
                    # approvals never make an agent that never asks ask).
                    _function_tool(c, run_tool, _asked(declared, named, c.name))
                    for c in ctx.scenario.contracts.values()
                ),
                session_id=ctx.session_id,
                db_path=db_path,
                workspace=ctx.world_dir / "workspace",
                contracts=ctx.scenario.contracts,
                run_tool=run_tool,
                life=ctx.life,
                run_state_path=db_path.with_name(RUN_STATE_NAME),
                approve=approvals,
                declared=declared,
            )
            built = self.factory(context)
            if inspect.isawaitable(built):  # an async factory may read its session first
                built = await built
            agent, session, keeps = _checked(self.agent_spec, built, context)
            _hook_saves(session, ctx.hook)
            run = _Run(
                ctx, agent, session, hooks, approvals, KeptState(context.run_state_path) if keeps else None
            )
            items = await session.get_items()
            started = sum(1 for item in items if item.get("role") == "user")
            if started and not _finished(items):
                # The turn a previous life was in: from the RunState it kept, if it kept one
                # for a stop still open in the session; else the SDK's own way to continue a
                # turn, a run with no new input on the same session.
                await run.resume(items)
            for text in ctx.scenario.turns[started:]:
                turn[0] += 1
                await run.turn(text)
        self._copy(ctx)

    def _run_tool(self, ctx: LifeContext, toolbox: Any, pending: Sequence[Mapping[str, Any]]) -> RunTool:
        def run(tool: str, arguments: Mapping[str, Any], call_id: str, key: str | None) -> Mapping[str, Any]:
            # The world measures session_bytes on the fresh copy. A call no reply of this
            # life made (a factory finishing a previous life's call before the run, as
            # fixed.py does) is put there too, or its effect would belong to no call.
            running = [*pending]
            if all(item.get("call_id") != call_id for item in pending):
                arguments_text = json.dumps(arguments)
                running.append(
                    {"type": "function_call", "call_id": call_id, "name": tool, "arguments": arguments_text}
                )
            self._copy(ctx, running)
            execution_id = f"{call_id}:{uuid.uuid4().hex[:8]}"
            tool_ctx = ToolContext(
                call_id,
                execution_id,
                # The SDK gives a tool no key: a tool that needs one makes it up per attempt.
                key if key is not None else f"sdk:{execution_id}",
                arguments_sha256(arguments),
                step=lambda: ctx.hook("during_side_effect", call_id),
            )
            ctx.hook("after_running", call_id)
            observation = toolbox.execute(tool, arguments, tool_ctx)
            ctx.hook("after_side_effect", call_id)
            contract = ctx.scenario.contracts.get(tool)
            idempotency = contract.idempotency if contract else "non_idempotent"
            result: Mapping[str, Any] = observation.to_result(
                execution_id=execution_id, idempotency=idempotency
            )
            return result

        return run


class _Run:
    """One life's runs of the agent, the stops for approval answered the SDK's way."""

    def __init__(
        self,
        ctx: LifeContext,
        agent: Any,
        session: Any,
        hooks: Any,
        approvals: Approvals,
        kept: KeptState | None,
        hook: BoundaryHook | None = None,
    ) -> None:
        self.ctx = ctx
        self.hook = hook or ctx.hook  # a framework YAML's life: the probed hook (TeamLife.hook)
        self.agent = agent
        self.session = session
        self.hooks = hooks
        self.approvals = approvals
        self.kept = kept

    async def turn(self, text: str) -> None:
        await self._until_done(await self._run(text), {})

    async def resume(self, items: Sequence[Mapping[str, Any]]) -> None:
        loaded = self.kept.load() if self.kept is not None else None
        if loaded is not None:
            from agents import RunState

            state_json, answered = loaded
            state = await RunState.from_json(self.agent, dict(state_json))
            open_calls = {str(item.call_id) for item in state.get_interruptions()}
            if open_calls - _answered_calls(items):
                # The stop it kept is still open in the session: continue from it. The answers
                # it kept stand (the SDK's durable way); the others are asked now.
                await self._answer(state, answered)
                await self._until_done(await self._run(state), answered)
                return
        if self.kept is not None:
            # Kept for a stop the session has since answered: resuming it would run its
            # approved calls again and save their outputs twice.
            self.kept.clear()
        await self._until_done(await self._run([]), {})

    async def _run(self, start: Any) -> Any:
        from agents import Runner

        return await Runner.run(self.agent, start, session=self.session, hooks=self.hooks)

    async def _until_done(self, result: Any, answered: dict[str, bool]) -> None:
        while result.interruptions:
            state = result.to_state()
            answered = {}
            if self.kept is not None:
                self.kept.save(state, answered)  # the question survives a crash
            await self._answer(state, answered)
            result = await self._run(state)
        if self.kept is not None:
            self.kept.clear()

    async def _answer(self, state: Any, answered: dict[str, bool]) -> None:
        for item in state.get_interruptions():
            call_id = str(item.call_id)
            if call_id in answered:
                continue  # kept from an earlier life: the SDK's durable answer stands
            tool = str(item.tool_name)
            answer = self.approvals(tool, call_id, _arguments(item.arguments))
            answered[call_id] = answer.approved
            if answer.approved:
                state.approve(item)
            else:
                contract = self.ctx.scenario.contracts.get(tool)
                state.reject(item, rejection_message=rejection(tool, contract, again=answer.again))
            if self.kept is not None:
                self.kept.save(state, answered)
            if answer.approved:
                self.hook("after_approved", call_id)


@contextlib.contextmanager
def _scripted_loopback(ctx: LifeContext, dialect: Dialect) -> Iterator[None]:
    """The scripted model on loopback too, for an agent whose model is its own (a model name
    on the SDK's default client, or an ``AsyncOpenAI()`` of its own): OPENAI_BASE_URL and
    OPENAI_API_KEY point at it before the factory runs. ``ctx.model``'s requests still go
    through the life's router. The reply's edge is ``after_model_reply`` for such a client
    (``ctx.model`` reports its own): reached just before the reply is written, the agent in
    this process (``stoppable=False``)."""
    from crashmatrix.harness.agents.loopback import LoopbackServer
    from crashmatrix.mock_tools.model import ScriptedModel

    model = ScriptedModel(
        ctx.scenario.rules,
        log_path=ctx.case_dir / "model_requests.jsonl",
        on_request=ctx.model_request,
        dialect=dialect,
    )
    server = LoopbackServer(model, on_edge=ctx.hook, edges=frozenset({"after_model_reply"}), stoppable=False)
    server.start()
    os.environ.update(client_env(server.model_url))  # the life's own process: nothing to restore
    try:
        yield
    finally:
        server.close()


def _arguments(raw: str | None) -> Mapping[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {"_unparsed": raw}
    return value if isinstance(value, dict) else {"_unparsed": raw}


def _answered_calls(items: Sequence[Mapping[str, Any]]) -> set[str]:
    return {str(item.get("call_id")) for item in items if item.get("type") == "function_call_output"}


def _asking(approvals: Mapping[str, str], again: Mapping[str, str]) -> Callable[[str], bool]:
    """Which suite tools ask for approval: those the scenario names. ``*`` is not one: it is
    the answer to anything else asked (a factory's own ``needs_approval``), and a scenario
    without ``approvals:`` reads as ``{"*": "yes"}``."""
    named = {*approvals, *again} - {"*"}
    return lambda tool: tool in named


def chat_model(base_url: str, http: Any, on_reply: Callable[[str], None] | None = None) -> Any:
    """The SDK's Chat Completions model on ``http``, an ``httpx.AsyncClient``: openai 3.x
    sends through httpx2 unless handed an httpx client, and respx (the life's router, the
    scripted model behind it) patches httpx only.

    ``on_reply(first_call_id)`` runs when a reply with function calls has been received, as
    ``get_response`` returns it to the SDK: before the SDK's hooks, its tools and any save."""
    from agents import OpenAIChatCompletionsModel
    from openai import AsyncOpenAI

    client = AsyncOpenAI(
        base_url=base_url,
        api_key="crashmatrix",
        http_client=cast(Any, http),  # typed httpx2; an httpx client works the same
        max_retries=0,  # a retry would be a second request the script did not plan
    )
    if on_reply is None:
        return OpenAIChatCompletionsModel(model="crashmatrix-scripted", openai_client=client)
    model = _replying_model()(model="crashmatrix-scripted", openai_client=client)
    model.on_reply = on_reply
    return model


_REPLYING: list[type] = []  # the subclass below, made once (agents is imported lazily)


def _replying_model() -> type:
    """``OpenAIChatCompletionsModel`` that reports each reply with function calls."""
    if not _REPLYING:
        from agents import OpenAIChatCompletionsModel

        class ReplyingModel(OpenAIChatCompletionsModel):
            on_reply: Callable[[str], None]

            async def get_response(self, *args: Any, **kwargs: Any) -> Any:
                response = await super().get_response(*args, **kwargs)
                calls = [item for item in response.output if getattr(item, "type", None) == "function_call"]
                if calls:
                    self.on_reply(str(getattr(calls[0], "call_id", "")))
                return response

        _REPLYING.append(ReplyingModel)
    return _REPLYING[0]


def _step_calls(pending: list[Mapping[str, Any]]) -> Any:
    """Run hooks keeping ``pending`` = the function calls of the model's latest reply."""
    from agents import RunHooks

    class StepCalls(RunHooks[Any]):
        async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
            pending.clear()
            for item in response.output:
                if getattr(item, "type", None) == "function_call":
                    pending.append(item.model_dump(exclude_unset=True))

    return StepCalls()


def _function_tool(
    contract: ToolContract, run_tool: RunTool, asks: Callable[[], bool] = lambda: False
) -> Any:
    """The suite's tool as an SDK ``FunctionTool``, run by the mock tools; ``asks()``: it
    needs approval where its contract requires one for the call's arguments (asked per call:
    the factory declares its agent asks while it builds, after the tools were made)."""
    from agents import FunctionTool

    async def invoke(tool_context: Any, raw: str) -> str:
        try:
            arguments = json.loads(raw or "{}")
        except ValueError:
            arguments = {"_unparsed": raw}  # the mock tool answers INVALID_ARGUMENTS
        result = run_tool(contract.name, arguments, str(tool_context.tool_call_id), None)
        return json.dumps(dict(result), ensure_ascii=False)

    schema = dict(contract.parameters) or {"type": "object", "properties": {}}
    return FunctionTool(
        name=contract.name,
        description=contract.description or contract.name,
        params_json_schema=schema,
        on_invoke_tool=invoke,
        strict_json_schema=False,  # the suite's schemas are not all strict-mode schemas
        needs_approval=_needs_approval(contract, asks),
    )


def _needs_approval(
    contract: ToolContract, asks: Callable[[], bool]
) -> Callable[[Any, dict[str, Any], str], Awaitable[bool]]:
    # Per call, as the reference agent decides: run_command('ls') is read-only, 'npm test' asks.
    async def needs(context: Any, arguments: dict[str, Any], call_id: str) -> bool:
        return asks() and contract.for_call(arguments).approval == "required"

    needs.crashmatrix_scenario = True  # type: ignore[attr-defined]  # ours, not the team's (_asks)
    return needs


def _asked(declared: _Declared, named: Callable[[str], bool], tool: str) -> Callable[[], bool]:
    """Whether ``tool`` asks now: the factory declared its agent asks, and the scenario
    answers an approval for it."""
    return lambda: declared.asks and named(tool)


def _asks(agent: Any, declared: bool) -> bool:
    """Does the built agent ask a person before a tool acts: its factory said so
    (``ctx.asks_for_approval()``), or one of its tools has a ``needs_approval`` of the
    team's own (``True`` or a callable; ``ctx.tools``' own callable is the scenario's, and
    asks nothing unless the factory declared)."""
    if declared:
        return True
    for tool in getattr(agent, "tools", ()):
        needs = getattr(tool, "needs_approval", False)
        if needs is True or (callable(needs) and not getattr(needs, "crashmatrix_scenario", False)):
            return True
    return False


def _suite_tools(agent: Any, offered: Sequence[str]) -> ToolMap:
    """The suite's tools the built agent has, by name: every one offered (``ctx.tools``
    whole) is all of them, a scenario's own ``mock:`` tools too; a subset is those only, and
    a scenario needing another is not applicable ("the agent has no read_file")."""
    names = {str(getattr(tool, "name", "")) for tool in getattr(agent, "tools", ())}
    if set(offered) <= names:
        return ToolMap.identity()
    return ToolMap({name: ToolName(name) for name in offered if name in names})


def _finished(items: Sequence[Mapping[str, Any]]) -> bool:
    """Did the last turn end: an assistant message after the last user message, and every
    function_call answered?"""
    last_user = max((i for i, item in enumerate(items) if item.get("role") == "user"), default=-1)
    after = items[last_user + 1 :]
    calls = {item.get("call_id") for item in after if item.get("type") == "function_call"}
    outputs = {item.get("call_id") for item in after if item.get("type") == "function_call_output"}
    answered = any(item.get("role") == "assistant" for item in after)
    return answered and calls <= outputs


def _hook_saves(session: Any, hook: BoundaryHook) -> None:
    """``after_tool_result`` once the session's ``add_items`` that saved an output returned,
    ``after_tool_call_saved`` once one saved a call without its output (the instance's
    method, so the SDK's own call reaches it)."""
    original = session.add_items

    async def add_items(items: list[Any]) -> None:
        await original(items)
        outputs = {
            item.get("call_id")
            for item in items
            if isinstance(item, Mapping) and item.get("type") == "function_call_output"
        }
        for item in items:
            if not isinstance(item, Mapping):
                continue
            if item.get("type") == "function_call" and item.get("call_id") not in outputs:
                # Saved without its output: the SDK stopped for an approval (it parks the
                # call in the session before anyone answers).
                hook("after_tool_call_saved", str(item.get("call_id", "")))
            elif item.get("type") == "function_call_output":
                hook("after_tool_result", str(item.get("call_id", "")))

    session.add_items = add_items


def _checked(spec: str, built: Any, ctx: AgentsContext) -> tuple[Any, Any, bool]:
    """The factory's ``(agent, session)`` or ``(agent, session, ctx.run_state_path)`` and
    whether it keeps the RunState, or one line saying what to return instead."""
    from agents import Agent, SQLiteSession

    fix = "return (agent, SQLiteSession(ctx.session_id, ctx.db_path))"
    if isinstance(built, Agent):
        raise InputError(f"--agent={spec!r}: the factory returned an Agent without a session; {fix}")
    if not (isinstance(built, tuple) and len(built) in (2, 3)):
        raise InputError(f"--agent={spec!r}: the factory returned {type(built).__name__}; {fix}")
    agent, session = built[:2]
    if not isinstance(agent, Agent):
        raise InputError(
            f"--agent={spec!r}: the factory's first value is a {type(agent).__name__}, not an Agent; {fix}"
        )
    if session is None:
        raise InputError(f"--agent={spec!r}: the factory returned no session; {fix}")
    if not isinstance(session, SQLiteSession):
        raise InputError(
            f"--agent={spec!r}: the session is a {type(session).__name__}; crashmatrix reads an "
            f"agents.SQLiteSession: {fix}"
        )
    if Path(str(session.db_path)) != ctx.db_path or session.session_id != ctx.session_id:
        raise InputError(
            f"--agent={spec!r}: the SQLiteSession is not at ctx.db_path under ctx.session_id "
            f"(an in-memory or other file does not outlive a crash); {fix}"
        )
    if getattr(session, "messages_table", MESSAGES_TABLE) != MESSAGES_TABLE:
        raise InputError(f"--agent={spec!r}: keep SQLiteSession's default tables; {fix}")
    if len(built) == 3 and not (isinstance(built[2], Path) and built[2] == ctx.run_state_path):
        raise InputError(
            f"--agent={spec!r}: the factory's third value is {built[2]!r}; to keep the RunState "
            "across lives return (agent, session, ctx.run_state_path), the file the next life reads"
        )
    return agent, session, len(built) == 3


# -- loading ----------------------------------------------------------------------------------


def _check_version(spec: str) -> None:
    from importlib.metadata import version

    text = version("openai-agents")
    parts = tuple(int(p) for p in text.split(".")[:3] if p.isdigit())
    if not SUPPORTED[0] <= parts < SUPPORTED[1]:
        raise InputError(
            f"--agent={spec!r}: openai-agents {text} is installed; this adapter supports {SUPPORTED_TEXT}: "
            f"pip install 'openai-agents{SUPPORTED_TEXT}'"
        )


def load(target: str, *, spec: str) -> OpenAIAgentsAdapter:
    """``package.module:factory`` -> the adapter. The factory is called once here, on a
    scratch database, so a wrong return is one line at load (exit 2), not an error in every life."""
    _check_version(spec)
    module_name, _, attr = target.partition(":")
    module = _import(spec, module_name)
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise InputError(
            f"--agent={spec!r}: {module_name} has no function {attr!r} (def {attr}(ctx) -> (agent, session))"
        )
    adapter = OpenAIAgentsAdapter(spec, module_name, factory)
    adapter._found(*_try_factory(spec, factory))
    return adapter


def _import(spec: str, module_name: str) -> Any:
    """The team's module, or one line naming ``--agent``, the module and the error (where it
    was raised in the team's code): an import error, a syntax error, anything its top level
    raises, never a traceback."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and f"{module_name}.".startswith(f"{error.name}."):
            raise InputError(
                f"--agent={spec!r}: cannot import {module_name!r} ({error}); is it on sys.path? "
                "(run from the directory that holds it)"
            ) from error
        raise InputError(
            f"--agent={spec!r}: importing {module_name!r} failed{_where(error)}: {error} "
            f"(install it, or fix the import)"
        ) from error
    except Exception as error:
        raised = f"{type(error).__name__}{_where(error)}: {error}"
        raise InputError(f"--agent={spec!r}: importing {module_name!r} raised {raised}") from error


def _where(error: BaseException) -> str:
    """`` at path:line``: where the team's code raised it (a syntax error's own place)."""
    if isinstance(error, SyntaxError) and error.filename:
        return f" at {error.filename}:{error.lineno}"
    frames = [f for f in traceback.extract_tb(error.__traceback__) if "importlib" not in f.filename]
    return f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""


def _try_factory(spec: str, factory: Callable[[AgentsContext], Any]) -> tuple[ToolMap, bool]:
    """Build the agent once, with every built-in suite tool in ``ctx.tools`` (as a life
    gives them: a factory picking ``tools["send_email"]`` finds it), and say which of them it
    took and whether it asks for approvals."""
    from crashmatrix.mock_tools.registry import catalogue

    contracts = catalogue()
    # The environment a life gives the factory: a client it builds from it reaches this
    # loopback model (a life's reaches the scripted one).
    with tempfile.TemporaryDirectory(prefix="crashmatrix-openai-agents-") as scratch, _dot_model() as dot:
        _prepare_sdk()
        db_path = Path(scratch) / DB_NAME
        import httpx

        # Never sends: the factory only builds. An httpx client, like a life's.
        http = httpx.AsyncClient(verify=_TLS)
        context = AgentsContext(
            model=chat_model(MODEL_BASE_URL, http),
            tools=tuple(_function_tool(contract, _no_tool) for contract in contracts.values()),
            session_id=SESSION_ID,
            db_path=db_path,
            workspace=Path(scratch),
            contracts={},
            run_tool=_no_tool,
            life=0,
            run_state_path=db_path.with_name(RUN_STATE_NAME),
            approve=_no_question,
        )
        try:
            built = factory(context)
            if inspect.isawaitable(built):
                built = asyncio.run(_awaited(built))
        except InputError:
            raise
        except Exception as error:
            raise InputError(
                f"--agent={spec!r}: the factory raised {type(error).__name__}: {error}"
            ) from error
        agent, session, _ = _checked(spec, built, context)
        close = getattr(session, "close", None)
        if callable(close):
            close()
        own_model = agent.model is not context.model
        if own_model:
            # Its own model (a model name on the SDK's default client, or a client of its
            # own): one real request through it.
            asyncio.run(_one_request(agent))
    if own_model:
        dot.reached(f"--agent={spec!r}")
    return _suite_tools(agent, tuple(contracts)), _asks(agent, context.declared.asks)


async def _awaited(built: Any) -> Any:
    return await built


def _no_question(tool: str, call_id: str, arguments: Mapping[str, Any]) -> Answer:
    raise AssertionError("the load-time check asks nobody")


def _no_tool(tool: str, arguments: Mapping[str, Any], call_id: str, key: str | None) -> Mapping[str, Any]:
    raise AssertionError("the load-time check runs no tool")


# -- a framework agent declared in an adapter YAML (``framework: openai-agents``) ----------------
#
# The team's own agent: its own FunctionTools writing its own world (``effects:`` counts them),
# its own model client (the SDK's default one, from OPENAI_BASE_URL / OPENAI_API_KEY, which
# ForeignAdapter points at the loopback model before the factory runs), its own session. The
# common part (world, probes, services, loopback, env, intercepts, catalogue, results) is
# ``harness.agents.foreign.ForeignAdapter``'s; this module only builds, drives and reads.

STORE_NAME = "openai-agents-store.json"  # in the case directory: where the factory's session is
STORES = ("sqlite", "postgres")  # options: {store: ...}
WHY_NO_POWER = (
    "the session is a database (SQLite, or a PostgreSQL server): it syncs itself, outside the "
    "harness's os.fsync recorder, and a database is not cut back by length"
)
# The moments only an agent that asks for approval reaches (its factory said so, or a tool of
# its own has needs_approval): for one that asks none, not reachable, with why.
ASKING_ONLY: Mapping[str, str] = dict.fromkeys(_APPROVAL_BOUNDARIES, WHY_NO_APPROVAL)
FRAMEWORK = FrameworkInfo(
    # after_model_reply is the loopback model's edge (the team's own client asks it): not a
    # seam of the SDK's this module fires.
    boundaries=(
        "after_tool_call_saved",
        "after_approved",
        "after_running",
        "after_side_effect",
        "after_tool_result",
    ),
    unreachable=_UNREACHABLE,
    why_not_torn=(
        "its session is a database (agents.SQLiteSession, or SQLAlchemySession on PostgreSQL): it "
        "writes rows through its own journal, there is no appended line to cut"
    ),
    why_no_power=WHY_NO_POWER,
    preload=("agents", __name__),
    options=("store",),
)


@dataclass(frozen=True)
class TeamContext:
    """What the factory of a framework YAML gets, once per life (and once at load)."""

    workspace: Path  # the case's workspace, also the working directory
    life: int  # 0 at load
    # ``options: {store: postgres}``: the case's own database (psycopg's URL) and the same
    # database as SQLAlchemy's async URL (``SQLAlchemySession.from_url(id, url=...)``).
    postgres_url: str | None
    sqlalchemy_url: str | None
    # ``tools: harness``: the scenario's tools as FunctionTools run by crashmatrix's mock tools
    # (their effects counted in the world); with the team's own tools, empty.
    tools: tuple[Any, ...] = ()
    declared: _Declared = field(default_factory=lambda: _Declared(), compare=False, repr=False)

    def asks_for_approval(self) -> None:
        """As ``AgentsContext.asks_for_approval``: ``tools`` (``tools: harness``) then carry
        ``needs_approval`` where the scenario answers an approval. The team's own tools ask
        with their own ``needs_approval``, which the adapter sees without this."""
        self.declared.asks = True


def _sqlalchemy_url(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    return f"postgresql+psycopg://{rest}" if sep and scheme in ("postgres", "postgresql") else url


def _team_checked(where: str, built: Any) -> tuple[Any, Any]:
    """The factory's ``(agent, session)``, or one line saying what to return."""
    from agents import Agent

    fix = "return (agent, session): the Agent and the session its app runs it with"
    if not (isinstance(built, tuple) and len(built) == 2):
        raise InputError(f"{where}: factory: it returned {type(built).__name__}; {fix}")
    agent, session = built
    if not isinstance(agent, Agent):
        raise InputError(
            f"{where}: factory: its first value is a {type(agent).__name__}, not an Agent; {fix}"
        )
    if not (callable(getattr(session, "get_items", None)) and callable(getattr(session, "add_items", None))):
        raise InputError(
            f"{where}: factory: its second value is a {type(session).__name__}, not a session; {fix}"
        )
    return agent, session


def _store_of(where: str, session: Any, workspace: Path) -> dict[str, str]:
    """Where the session keeps its items, as the reader finds it again (a copied case's
    workspace too: a path inside the workspace is kept relative to it)."""
    kind = type(session).__name__
    table = str(getattr(session, "messages_table", MESSAGES_TABLE))
    if kind == "SQLiteSession":
        raw = str(session.db_path)
        if raw == ":memory:":
            raise InputError(
                f"{where}: factory: the SQLiteSession is in memory, which does not outlive a crash; "
                "give it a file (SQLiteSession(session_id, 'conversations.db'))"
            )
        path = (workspace / raw).resolve() if not Path(raw).is_absolute() else Path(raw)
        inside = path.is_relative_to(workspace.resolve())
        shown = str(path.relative_to(workspace.resolve())) if inside else str(path)
        return {"kind": "sqlite", "path": shown, "session_id": str(session.session_id), "table": table}
    if kind == "SQLAlchemySession":
        table = str(getattr(getattr(session, "_messages", None), "name", "agent_messages"))
        return {"kind": "postgres", "session_id": str(session.session_id), "table": table}
    raise InputError(
        f"{where}: factory: the session is a {kind}; crashmatrix reads agents.SQLiteSession (store: "
        "sqlite) and SQLAlchemySession on PostgreSQL (options: {store: postgres})"
    )


def _store_items(store: Mapping[str, str], case_dir: Path) -> list[Mapping[str, Any]]:
    """The session's items as the SDK saved them (read-only; in any process)."""
    if store["kind"] == "sqlite":
        path = Path(store["path"])
        if not path.is_absolute():
            path = case_dir / "world" / "workspace" / path
        return _items(path, store["session_id"], store["table"])
    from crashmatrix.harness.lives.postgres import _psycopg, case_database_url

    psycopg = _psycopg()
    with psycopg.connect(case_database_url(case_dir), autocommit=True) as conn:
        try:
            rows = conn.execute(
                psycopg.sql.SQL("SELECT message_data FROM {} WHERE session_id = %s ORDER BY id").format(
                    psycopg.sql.Identifier(store["table"])
                ),
                (store["session_id"],),
            ).fetchall()
        except psycopg.errors.UndefinedTable:
            return []
    return [json.loads(row[0]) if isinstance(row[0], str) else row[0] for row in rows]


def _case_store(case_dir: Path) -> Mapping[str, str] | None:
    pointer = case_dir / STORE_NAME
    if not pointer.exists():
        return None
    store: Mapping[str, str] = json.loads(pointer.read_text(encoding="utf-8"))
    return store


# In a life's process, the function calls of the step running now (the driver's list): the
# SDK saves them only after the step's tools ran, yet an effect a tool makes belongs to its
# call. read_records puts them after the saved items while they run, as
# ``OpenAIAgentsAdapter._copy`` does, so the size a probe measures (ForeignAdapter's
# ``_session_size`` reads through here) places each effect among the calls. Empty in the
# harness's process: what it reads after a life is the store alone. No durability claim:
# this agent keeps no ledger, no check reads the copy as one.
_RUNNING: list[Mapping[str, Any]] = []


def read_records(workspace: Path) -> list[Mapping[str, Any]]:
    """The factory's session as chat records (the session source's reader: ``read_foreign``
    normalises them), the running step's calls after it; nothing before a life said where
    its session is."""
    case_dir = workspace.parent.parent  # ForeignAdapter.workspace: case_dir / world / workspace
    store = _case_store(case_dir)
    if store is None:
        return []
    items = _with_running(_store_items(store, case_dir), _RUNNING)
    return [record for _, record in _records(list(enumerate(items, start=1)))]


def _with_running(
    saved: Sequence[Mapping[str, Any]], running: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """``saved``, then the running calls it does not hold yet (in this turn: a provider may
    reuse a call id in a later one)."""
    last_user = max((i for i, item in enumerate(saved) if item.get("role") == "user"), default=-1)
    known = {item.get("call_id") for item in saved[last_user + 1 :] if item.get("type") == "function_call"}
    return [*saved, *(item for item in running if item.get("call_id") not in known)]


def session_records(workspace: Path) -> SqliteRows:
    """Where ``crashmatrix doctor`` plants its faults: the SQLite session's own rows."""
    case_dir = workspace.parent.parent
    store = _case_store(case_dir)
    if store is None or store["kind"] != "sqlite":
        raise InputError("crashmatrix doctor plants faults in an Agents SDK SQLiteSession only")
    path = Path(store["path"])
    path = path if path.is_absolute() else workspace / path
    order = "WHERE session_id = ? ORDER BY id"
    return SqliteRows(path, store["table"], "message_data", order, (store["session_id"],))


def _bracket_tools(agent: Any, before: Callable[[str], None], after: Callable[[str], None]) -> list[str]:
    """Wrap each FunctionTool INSTANCE the agent (and a handoff's agent) has: ``before(call_id)``
    right before the team's function runs, ``after(call_id)`` right after it returned (its
    output not yet saved). The SDK runs a step's calls concurrently; so do the wrappers.
    Returns the tools' names."""
    from agents import Agent, FunctionTool

    names: list[str] = []
    seen: set[int] = set()
    agents = [agent]
    while agents:
        current = agents.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for tool in current.tools:
            if not isinstance(tool, FunctionTool):
                continue  # hosted tools act outside the process: nothing to bracket
            names.append(tool.name)
            if not getattr(tool.on_invoke_tool, "crashmatrix_bracketed", False):
                tool.on_invoke_tool = _bracketed(tool.on_invoke_tool, before, after)
        agents += [h for h in getattr(current, "handoffs", ()) if isinstance(h, Agent)]
    return names


def _bracketed(
    invoke: Callable[[Any, str], Awaitable[Any]], before: Callable[[str], None], after: Callable[[str], None]
) -> Callable[[Any, str], Awaitable[Any]]:
    async def bracketed(tool_context: Any, raw: str) -> Any:
        call_id = str(getattr(tool_context, "tool_call_id", ""))
        before(call_id)
        try:
            return await invoke(tool_context, raw)
        finally:
            after(call_id)  # returned or raised: whatever it did is done

    bracketed.crashmatrix_bracketed = True  # type: ignore[attr-defined]
    return bracketed


async def _build(factory: Callable[..., Any], context: TeamContext, where: str) -> tuple[Any, Any]:
    try:
        built = factory(context)
        if inspect.isawaitable(built):  # an async factory may read its session first
            built = await built
    except InputError:
        raise
    except Exception as error:
        raise InputError(
            f"{where}: factory: it raised {type(error).__name__}{_where(error)}: {error}"
        ) from error
    return _team_checked(where, built)


def _prepare_sdk() -> None:
    """Before the factory runs: the SDK's tracing off (it exports to OpenAI), and its
    default model API set to Chat Completions, the API crashmatrix's model serves (the
    SDK's default, the Responses API, would ask /v1/responses, which it does not)."""
    from agents import set_default_openai_api, set_tracing_disabled
    from agents.models import openai_provider

    set_tracing_disabled(True)
    set_default_openai_api("chat_completions")
    # The SDK's default client sends through one module-level httpx2 client, bound to the
    # event loop of its first use: a life forked from a process that ran one (the fork
    # server's warm-up life) would inherit a client of a closed loop. A restarted process
    # starts without one; so does each life.
    openai_provider._http_client = None


def drive(life: TeamLife) -> None:
    """One life of a framework YAML's Agents SDK agent: built by the team's factory, the
    turn a previous life left unfinished continued the SDK's way, the remaining turns sent."""
    asyncio.run(_drive(life))


async def _drive(life: TeamLife) -> None:
    ctx = life.ctx
    where = str(life.spec.path)
    _prepare_sdk()
    store_option = str(life.options.get("store", "sqlite"))
    postgres_url = None
    if store_option == "postgres":
        from crashmatrix.harness.lives.postgres import case_database_url

        postgres_url = case_database_url(ctx.case_dir)
    declared = _Declared()
    named = _asking(ctx.approvals, ctx.approvals_again)
    tools: tuple[Any, ...] = ()
    if life.spec.tools == "harness":
        tools = tuple(
            _function_tool(c, life.run_tool, _asked(declared, named, c.name))
            for c in ctx.scenario.contracts.values()
        )
    context = TeamContext(
        workspace=life.workspace,
        life=ctx.life,
        postgres_url=postgres_url,
        sqlalchemy_url=_sqlalchemy_url(postgres_url) if postgres_url else None,
        tools=tools,
        declared=declared,
    )
    agent, session = await _build(life.factory, context, where)
    store = _store_of(where, session, life.workspace)
    _write_store(ctx.case_dir, store)
    pending = _RUNNING  # the function calls of the step running now (read_records shows them)
    pending.clear()
    # A moment the adapter YAML maps to the team's own function (``boundaries:``, e.g. its
    # ledger's running row committed) is that function's, not the tool's edge: one place each.
    mapped = {rule.boundary for rule in life.spec.rules}

    def before(call_id: str) -> None:
        life.sync()  # the copy with this call in it: its effects are its own
        if "after_running" not in mapped:
            life.hook("after_running", call_id)

    def after(call_id: str) -> None:
        if "after_side_effect" not in mapped:
            life.hook("after_side_effect", call_id)

    _bracket_tools(agent, before, after)
    _hook_saves(session, life.hook)
    items = await session.get_items()
    turn = [sum(1 for item in items if item.get("role") == "user")]
    approvals = Approvals(ctx, ctx.case_dir / ASKED_NAME, lambda: turn[0])
    run = _Run(ctx, agent, session, _step_calls(pending), approvals, None, life.hook)
    async with contextlib.AsyncExitStack() as servers:
        await _connect_mcp(agent, servers)
        if turn[0] and not _finished(items):
            await run.resume(items)  # the SDK's way: a run with no new input on the same session
        for text in ctx.scenario.turns[turn[0] :]:
            turn[0] += 1
            await run.turn(text)
    close = getattr(session, "close", None)
    if callable(close):
        result = close()
        if inspect.isawaitable(result):
            await result


def _mcp_servers(agent: Any) -> list[Any]:
    """The MCP servers of the agent and of its handoffs' agents, each once."""
    from agents import Agent

    found: dict[int, Any] = {}
    agents, seen = [agent], set()
    while agents:
        current = agents.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for server in getattr(current, "mcp_servers", None) or ():
            found.setdefault(id(server), server)
        agents += [h for h in getattr(current, "handoffs", ()) if isinstance(h, Agent)]
    return list(found.values())


async def _connect_mcp(agent: Any, stack: contextlib.AsyncExitStack) -> None:
    """Connect the agent's MCP servers the factory built (its ``MCPServerStdio`` spawns
    ``{mcp_command}`` now), cleaned up when ``stack`` closes at the end of the life, as the
    app's ``async with server:`` does: a factory returns its agent and could close nothing.
    A server the factory connected itself is left to it."""
    for server in _mcp_servers(agent):
        if getattr(server, "session", None) is not None:
            continue
        await server.connect()
        stack.push_async_callback(server.cleanup)


def _write_store(case_dir: Path, store: Mapping[str, str]) -> None:
    pointer = case_dir / STORE_NAME
    text = json.dumps(dict(store), sort_keys=True)
    if pointer.exists() and pointer.read_text(encoding="utf-8") == text:
        return
    temporary = pointer.with_name(pointer.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, pointer)


# -- the load check of a framework YAML -----------------------------------------------------------


class _DotModel:
    """The load check's loopback model, and the routes its requests asked for."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.routes: list[str] = []

    def reached(self, where: str) -> None:
        """One line, unless a chat completion was asked for."""
        if "chat" in self.routes:
            return
        if self.routes:
            raise InputError(
                f"{where}: the agent's model client reached crashmatrix's model at {self.url} but "
                "asked for no chat completion (the Responses API?): crashmatrix's model speaks Chat "
                "Completions; build the Agent's model with OpenAIChatCompletionsModel, or give it a model "
                "name (the harness sets the SDK's default API to chat_completions)"
            )
        raise InputError(
            f"{where}: the agent's model client did not reach crashmatrix's model at {self.url}; "
            "build AsyncOpenAI() without a base_url, or with base_url=os.environ['OPENAI_BASE_URL'] "
            "(or give the Agent a model name: the SDK's default client reads the environment)"
        )


@contextlib.contextmanager
def _dot_model() -> Iterator[_DotModel]:
    """A loopback model answering ".", with the client environment pointing at it (as a
    life's does) while the block runs, restored after."""
    from crashmatrix.harness.agents.loopback import LoopbackServer

    routes: list[str] = []
    server = LoopbackServer(
        cast(Any, DotModel()),
        on_edge=lambda boundary, call_id: None,
        edges=frozenset(),
        on_request=routes.append,
    )
    dot = _DotModel(server.model_url)
    dot.routes = routes
    saved = {key: os.environ.get(key) for key in CLIENT_ENV}
    server.start()
    try:
        os.environ.update(client_env(server.model_url))
        yield dot
    finally:
        server.close()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


async def _one_request(agent: Any) -> None:
    """One turn through the agent's own model client (its tools never run: the model answers
    "."); what the agent makes of "." is its own business, only the request counts."""
    from agents import Runner

    with contextlib.suppress(Exception):
        # Bounded: a client that escapes to the internet may wait long for an answer.
        await asyncio.wait_for(Runner.run(agent, "crashmatrix load check: answer '.'", max_turns=1), 30.0)


def check(spec: Any) -> AgentFacts:
    """The team's agent built once at load, as a life builds it (the environment pointing at
    a loopback model, a scratch workspace as the working directory, the real tools): what the
    factory returns checked, the tools the agent has and whether it asks found, and one run
    through the agent's own model client -- a client that does not reach crashmatrix's model
    is one line here, not an error in every life."""
    where = str(spec.path)
    store = str(spec.options.get("store", "sqlite"))
    if store not in STORES:
        raise InputError(
            f"{where}: options.store: {store!r} is not a store this adapter reads; write sqlite or postgres"
        )
    cwd = os.getcwd()
    modules = set(sys.modules)
    with (
        tempfile.TemporaryDirectory(prefix="crashmatrix-openai-agents-") as scratch,
        _dot_model() as dot,
        _mcp_environment(spec, dot.url),
    ):
        try:
            os.chdir(scratch)
            if str(spec.here) not in sys.path:
                sys.path.insert(0, str(spec.here))  # the factory's module beside the YAML, as in a life
            module = _import(where, spec.module)
            factory = getattr(module, spec.main, None)
            if not callable(factory):
                raise InputError(
                    f"{where}: factory: {spec.module} has no function {spec.main!r} "
                    f"(def {spec.main}(ctx) -> (agent, session))"
                )
            facts = asyncio.run(_check(spec, factory, Path(scratch), store))
        finally:
            os.chdir(cwd)
            # The team's modules run again in each life, in its workspace: not imported here
            # (a module-level connection or file would be the scratch directory's).
            for name in set(sys.modules) - modules:
                origin = str(getattr(sys.modules[name], "__file__", "") or "")
                if origin.startswith(str(spec.here)):
                    del sys.modules[name]
    dot.reached(where)
    return facts


@contextlib.contextmanager
def _mcp_environment(spec: Any, url: str) -> Iterator[None]:
    """For ``tools: mcp``, the MCP server's configuration as a life sets it (the
    ``CRASHMATRIX_MCP_*`` variables, the adapter's ``env:`` with ``{mcp_command}`` /
    ``{mcp_url}``) while the load check builds the agent, restored after: a factory that
    configures its server from them builds at load too. Nothing connects to it (the check's
    request runs without MCP servers); an ``env:`` entry naming a placeholder only a life has
    is left out."""
    if spec.tools != "mcp":
        yield
        return
    from crashmatrix.harness.agents.mcp_relay import relay_command

    command = shlex.join(relay_command(url))
    values = {"mcp_command": command, "mcp_url": f"{url.rstrip('/')}/mcp", "here": str(spec.here)}
    values |= {"python": sys.executable, "model_url": url}
    env = {"CRASHMATRIX_MCP_COMMAND": command, "CRASHMATRIX_MCP_URL": ""}
    if spec.mcp_transport == "http":
        env["CRASHMATRIX_MCP_URL"] = values["mcp_url"]
    for key, value in spec.env.items():
        with contextlib.suppress(KeyError, IndexError, ValueError):
            env[key] = value.format(**values)
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


async def _check(spec: Any, factory: Callable[..., Any], scratch: Path, store: str) -> AgentFacts:
    from crashmatrix.mock_tools.registry import catalogue

    _prepare_sdk()
    postgres_url = None
    if store == "postgres":
        from crashmatrix.harness.lives.postgres import PostgresUnavailable, case_database_url, ensure_server

        try:
            # Started here, in the process that loads the adapter (pytest's controller, the
            # CLI), before any worker or fork server: they and every life inherit it.
            ensure_server()
            postgres_url = case_database_url(scratch)
        except PostgresUnavailable as error:
            raise InputError(f"{spec.path}: options.store: postgres: {error}") from error
    contracts = catalogue()
    declared = _Declared()
    harness_tools = spec.tools == "harness"
    tools = (
        tuple(_function_tool(c, _no_tool, lambda: declared.asks) for c in contracts.values())
        if harness_tools
        else ()
    )
    context = TeamContext(
        workspace=scratch,
        life=0,
        postgres_url=postgres_url,
        sqlalchemy_url=_sqlalchemy_url(postgres_url) if postgres_url else None,
        tools=tools,
        declared=declared,
    )
    agent, session = await _build(factory, context, str(spec.path))
    _store_of(str(spec.path), session, scratch)
    names = _bracket_tools(agent, lambda call_id: None, lambda call_id: None)
    try:
        # An MCP server exists only in a life (``tools: mcp``: the relay the life serves):
        # the model client is checked without one, never connecting what the factory built.
        await _one_request(agent.clone(mcp_servers=[]) if _mcp_servers(agent) else agent)
    finally:
        close = getattr(session, "close", None)
        if callable(close):
            result = close()
            if inspect.isawaitable(result):
                await result
        if store == "postgres":
            from crashmatrix.harness.lives.postgres import drop_case_databases

            drop_case_databases(scratch)
    asks = _asks(agent, declared.asks)
    if spec.tools == "mcp":
        # Its tools are the ones crashmatrix's MCP server serves: every tool of a scenario.
        return AgentFacts(tools=None, approvals=asks)
    if harness_tools:
        offered = tuple(contracts)
        found = _suite_tools(agent, offered)
        have = None if found.tools is None else frozenset(found.tools)
        return AgentFacts(tools=have, approvals=asks)
    return AgentFacts(tools=frozenset(names), approvals=asks)
