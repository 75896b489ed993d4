"""PydanticAI (``pydantic-ai-slim``): a team's PydanticAI agent declared in an adapter YAML
(``framework: pydantic-ai``), tested as it is -- its own tools, its own OpenAI-compatible model
client, its own message history store -- and crashed at PydanticAI's own seams.

The public shape (a factory, and a module driving the same agent durably, build on these):

* the factory: ``build(ctx: TeamContext) -> (agent, store)``, sync or async. ``agent`` is a
  ``pydantic_ai.Agent`` (its model e.g. ``OpenAIChatModel("gpt-4o-mini")``: the default
  provider reads ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, which point at crashmatrix's model
  before the factory runs). ``store`` is the team's conversation, PydanticAI's chat-app
  example's shape: ``get_messages() -> list[ModelMessage]``, ``add_messages(json: bytes)``
  (each sync or async; ``json`` is a run's ``result.new_messages_json()``) and ``path``, the
  SQLite file it keeps them in, one row per ``add_messages`` in table ``messages``, column
  ``message_list`` (``options: {table: ..., column: ...}`` name others; a row may hold a list
  of messages or one message);
* ``drive(life)``: one life, the app's loop -- ``agent.run(text, message_history=
  store.get_messages())`` then ``store.add_messages(result.new_messages_json())`` per turn, a
  run that parks for approval (``DeferredToolRequests``) answered by the scenario's person
  and continued with ``DeferredToolResults``;
* ``read_records(workspace)``: the store as crashmatrix's chat records (``records_of``), the
  running run's messages after it while its tools run;
* ``check(spec)``: the agent built once at load; ``bracket_tools(agent, before, after)``: the
  agent's own function tools bracketed; ``FRAMEWORK`` / ``ASKING_ONLY``: what its seams reach.

What PydanticAI does, measured with this adapter (docs/frameworks.md, "PydanticAI"): a run
keeps its messages in memory; the app writes them when ``agent.run`` returns. A life killed
while a tool runs or after it returned leaves the store without the turn: the restarted app
sends the turn again, the model asks for the same call again, and the tool runs again.

Boundaries, each at the moment whose state matches the name:

* ``after_model_reply``: the loopback model's edge (the team's own client asks it; the common
  part, ``ForeignAdapter``, fires it);
* ``after_running``: PydanticAI validated the call's arguments and its function toolset is
  about to run the team's function (no effect yet);
* ``after_side_effect``: the function returned or raised, nothing of it saved;
* ``after_tool_result``: the store's ``add_messages`` that saved the call's return returned;
* ``after_tool_call_saved``: (an agent that asks) the run parked for approval and the store
  saved the call without its return; nobody has answered;
* ``after_approved``: the answer yes was given and the continuing run has not started.

``after_tool_call_pending`` never happens (nothing of a run is written before it returns) and
``before_tool_result`` is ``after_side_effect`` for an agent without a ledger: each listed in
``unreachable`` with why. Torn writes and power loss are not applicable: the store is SQLite.
Its results are named by the framework (outcome / code not applicable, as for the SDK's).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from crashmatrix.harness.agents.frameworks import dbos as dbos_adapter
from crashmatrix.harness.agents.frameworks.approvals import Approvals, rejection
from crashmatrix.harness.agents.frameworks.pydantic_ai_records import message_records
from crashmatrix.harness.agents.readonly_db import connect_readonly
from crashmatrix.harness.agents.team_life import (
    CLIENT_ENV,
    AgentFacts,
    DotModel,
    FrameworkInfo,
    TeamLife,
    client_env,
)
from crashmatrix.harness.errors import InputError

__all__ = [
    "ASKING_ONLY",
    "FRAMEWORK",
    "SUPPORTED",
    "SUPPORTED_TEXT",
    "TeamContext",
    "bracket_tools",
    "check",
    "drive",
    "read_records",
    "records_of",
    "session_records",
    "store_messages",
]

# [lowest, next major) of pydantic-ai-slim, the extra's range in pyproject.toml
# (test_versions.py), both ends tested in CI (.ci/frameworks runs this adapter's tests at the
# lowest).
SUPPORTED = ((2, 0, 0), (3,))
SUPPORTED_TEXT = ">=2.0.0,<3"
STORE_NAME = "pydantic-ai-store.json"  # in the case directory: where the factory's store is
ASKED_NAME = "pydantic-ai-approvals.jsonl"  # the person's memory of what they were asked
TABLE, COLUMN = "messages", "message_list"  # PydanticAI's chat-app example's table

WHY_NO_APPROVAL = (
    "the agent asks no approval (no tool of its own has requires_approval=True, and no "
    "ApprovalRequiredToolset wraps one)"
)
ASKING_ONLY: Mapping[str, str] = dict.fromkeys(("after_tool_call_saved", "after_approved"), WHY_NO_APPROVAL)
FRAMEWORK = FrameworkInfo(
    # after_model_reply is the loopback model's edge (the team's own client asks it).
    boundaries=(
        "after_tool_call_saved",
        "after_approved",
        "after_running",
        "after_side_effect",
        "after_tool_result",
    ),
    unreachable={
        "after_tool_call_pending": (
            "the app writes a run's messages when agent.run returns (result.new_messages_json()): "
            "nothing of the model's reply is written before its tools ran, or the run parked for "
            "an approval (the call saved without its return: after_tool_call_saved)"
        ),
        "before_tool_result": (
            "no ledger: the moment after the effect and before the return is saved is after_side_effect"
        ),
    },
    why_not_torn=(
        "its store is a SQLite table (one row per saved run): SQLite writes rows through its own "
        "journal, there is no appended line to cut"
    ),
    why_no_power=(
        "the store is a SQLite database: it syncs itself, outside the harness's os.fsync recorder, "
        "and a database is not cut back by length"
    ),
    preload=("pydantic_ai", "pydantic_ai.models.openai", __name__),
    options=("table", "column"),
)


@dataclass(frozen=True)
class TeamContext:
    """What the factory of a ``framework: pydantic-ai`` YAML gets, once per life (and once at
    load, life 0, in a scratch workspace)."""

    workspace: Path  # the case's workspace, also the working directory
    life: int
    # The case's DBOS system database (SQLite in its workspace, copied with the case): the
    # factory of a ``DBOSAgent`` configures DBOS on it, as the team's ``main`` does --
    # ``DBOS(config={"name": ..., "system_database_url": ctx.system_database_url})``.
    system_database_url: str = ""


# -- the store, read as crashmatrix's records -----------------------------------------------


def records_of(messages: Sequence[Any]) -> list[Mapping[str, Any]]:
    """PydanticAI's messages as chat records (the shape crashmatrix's records and the scripted
    model share): a response's text and tool calls one assistant message, each tool's return
    (or retry prompt) the tool message with what the model was told."""
    return [record for message in messages for _, record in message_records(message)]


def _rows(path: Path, table: str, column: str) -> list[str]:
    if not path.exists():
        return []
    conn = connect_readonly(path)
    try:
        try:
            rows = conn.execute(f'SELECT "{column}" FROM "{table}" ORDER BY rowid').fetchall()
        except Exception as error:  # sqlite3.OperationalError: no table yet
            if "no such table" in str(error):
                return []
            raise
    finally:
        conn.close()
    return [row[0].decode() if isinstance(row[0], bytes) else str(row[0]) for row in rows]


def store_messages(path: Path, table: str = TABLE, column: str = COLUMN) -> list[Any]:
    """The messages a store keeps (read-only; any process): each row a list of messages (a
    run's ``new_messages_json()``) or one message, read by PydanticAI's own type adapter."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    messages: list[Any] = []
    for text in _rows(path, table, column):
        stripped = text.lstrip()
        messages += ModelMessagesTypeAdapter.validate_json(
            stripped if stripped.startswith("[") else f"[{text}]"
        )
    return messages


def _case_store(case_dir: Path) -> Mapping[str, str] | None:
    pointer = case_dir / STORE_NAME
    if not pointer.exists():
        return None
    store: Mapping[str, str] = json.loads(pointer.read_text(encoding="utf-8"))
    return store


def _write_store(case_dir: Path, store: Mapping[str, str]) -> None:
    pointer = case_dir / STORE_NAME
    text = json.dumps(dict(store), sort_keys=True)
    if pointer.exists() and pointer.read_text(encoding="utf-8") == text:
        return
    temporary = pointer.with_name(pointer.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, pointer)


# The tool call whose function runs in this task (and the thread it runs a sync tool in): a
# DBOS step it starts runs for it (``StepSeams.starting``).
_CALL: contextvars.ContextVar[str | None] = contextvars.ContextVar("crashmatrix_tool_call", default=None)

# In a life's process, the messages of the run going on now (PydanticAI keeps them in memory
# until the run returns and the app saves them), put after the saved ones while its tools run:
# the size a probe measures places each effect among the calls. Empty in the harness's process.
_RUNNING: list[Any] = []


def read_records(workspace: Path) -> list[Mapping[str, Any]]:
    """The factory's store as chat records (the session source's reader), the running run's
    messages after it; nothing before a life said where its store is."""
    case_dir = workspace.parent.parent  # ForeignAdapter.workspace: case_dir / world / workspace
    store = _case_store(case_dir)
    if store is None:
        return []
    path = Path(store["path"])
    path = path if path.is_absolute() else workspace / path
    return records_of([*store_messages(path, store["table"], store["column"]), *_RUNNING])


def session_records(workspace: Path) -> Any:
    """Where ``crashmatrix doctor`` plants its faults: the store's own rows, the messages
    ``read_records`` reads (``pydantic_ai_records.StoreMessages``)."""
    from crashmatrix.harness.agents.frameworks.pydantic_ai_records import StoreMessages
    from crashmatrix.harness.agents.session_records import CannotPlant

    store = _case_store(workspace.parent.parent)
    if store is None:
        raise CannotPlant("no life said where the agent's message store is")
    path = Path(store["path"])
    return StoreMessages(path if path.is_absolute() else workspace / path, store["table"], store["column"])


# -- the team's agent and store, as the factory returns them ---------------------------------


def _where(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    return f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _store_of(where: str, store: Any, workspace: Path, options: Mapping[str, Any]) -> dict[str, str]:
    """Where the store keeps its rows, as the reader finds them again (a path inside the
    workspace kept relative to it: a copied case's workspace too)."""
    fix = (
        "return (agent, store): store with get_messages(), add_messages(json: bytes) and path, its "
        "SQLite file (PydanticAI's chat-app example's Database)"
    )
    for method in ("get_messages", "add_messages"):
        if not callable(getattr(store, method, None)):
            raise InputError(
                f"{where}: factory: its second value, a {type(store).__name__}, has no {method}(); {fix}"
            )
    raw = getattr(store, "path", None)
    if not isinstance(raw, (str, Path)) or str(raw) in ("", ":memory:"):
        raise InputError(
            f"{where}: factory: the store has no file path (a path attribute), so nothing of it outlives "
            f"a crash for crashmatrix to read; {fix}"
        )
    path = Path(raw) if Path(raw).is_absolute() else (workspace / raw).resolve()
    inside = path.is_relative_to(workspace.resolve())
    shown = str(path.relative_to(workspace.resolve())) if inside else str(path)
    return {
        "path": shown,
        "table": str(options.get("table", TABLE)),
        "column": str(options.get("column", COLUMN)),
    }


async def _build(factory: Callable[..., Any], context: TeamContext, where: str) -> tuple[Any, Any]:
    """The factory's ``(agent, store)``, or one line saying what to return."""
    from pydantic_ai.agent import AbstractAgent

    try:
        built = await _maybe(factory(context))
    except InputError:
        raise
    except Exception as error:
        raise InputError(
            f"{where}: factory: it raised {type(error).__name__}{_where(error)}: {error}"
        ) from error
    fix = "return (agent, store): the Agent (or its DBOSAgent) and the message store its app runs it with"
    if not (isinstance(built, tuple) and len(built) == 2):
        raise InputError(f"{where}: factory: it returned {type(built).__name__}; {fix}")
    if not isinstance(built[0], AbstractAgent):
        raise InputError(
            f"{where}: factory: its first value is a {type(built[0]).__name__}, not an Agent; {fix}"
        )
    return built[0], built[1]


def _function_toolsets(agent: Any) -> list[Any]:
    """Every FunctionToolset the agent runs (its ``@agent.tool`` ones and those it was given,
    wrapped or not): where the team's own functions are called."""
    from pydantic_ai.toolsets import FunctionToolset

    found: list[Any] = []

    def visit(toolset: Any) -> None:
        if isinstance(toolset, FunctionToolset) and all(toolset is not f for f in found):
            found.append(toolset)

    for toolset in agent.toolsets:
        toolset.apply(visit)
    return found


def bracket_tools(agent: Any, before: Callable[[str, Any], None], after: Callable[[str], None]) -> list[str]:
    """Wrap the ``call_tool`` of each FunctionToolset INSTANCE the agent has: ``before(call_id,
    run_context)`` right before the team's function runs (its arguments validated, approval
    given), ``after(call_id)`` right after it returned or raised (nothing of it saved).
    PydanticAI runs a response's calls concurrently; so do the wrappers. Returns the tools'
    names."""
    names: list[str] = []
    for toolset in _function_toolsets(agent):
        names += list(toolset.tools)
        if getattr(toolset.call_tool, "crashmatrix_bracketed", False):
            continue
        toolset.call_tool = _bracketed(toolset.call_tool, before, after)
    return names


def _bracketed(call_tool: Any, before: Callable[[str, Any], None], after: Callable[[str], None]) -> Any:
    async def bracketed(name: str, tool_args: dict[str, Any], ctx: Any, tool: Any) -> Any:
        call_id = str(getattr(ctx, "tool_call_id", "") or "")
        before(call_id, ctx)
        try:
            return await call_tool(name, tool_args, ctx, tool)
        finally:
            after(call_id)  # returned or raised: whatever it did is done

    bracketed.crashmatrix_bracketed = True  # type: ignore[attr-defined]
    return bracketed


def _asks(agent: Any) -> bool:
    """Does the agent ask a person before a tool acts: a tool of its own with
    ``requires_approval=True``, or an ``ApprovalRequiredToolset`` around one."""
    from pydantic_ai.toolsets import ApprovalRequiredToolset

    wrapped: list[bool] = []

    def visit(toolset: Any) -> None:
        wrapped.append(isinstance(toolset, ApprovalRequiredToolset))

    for toolset in agent.toolsets:
        if isinstance(toolset, ApprovalRequiredToolset):
            return True
        toolset.apply(visit)
    own = any(
        getattr(t, "requires_approval", False) for ts in _function_toolsets(agent) for t in ts.tools.values()
    )
    return own or any(wrapped)


def _durable(agent: Any) -> bool:
    """Is the agent PydanticAI's ``DBOSAgent`` (``pydantic_ai.durable_exec.dbos``): its run a
    DBOS workflow, its model requests DBOS steps. Imported only if the team's code did."""
    module = sys.modules.get("pydantic_ai.durable_exec.dbos")
    return module is not None and isinstance(agent, module.DBOSAgent)


def _reply_calls(output: Any) -> list[str]:
    """The tool calls of a DBOS step's output that is a model's reply (a ``ModelResponse``)."""
    from pydantic_ai.messages import ModelResponse, ToolCallPart

    if not isinstance(output, ModelResponse):
        return []
    return [p.tool_call_id for p in output.parts if isinstance(p, ToolCallPart)]


def _open_calls(messages: Sequence[Any]) -> list[Any]:
    """The tool calls of a run that parked for approval: calls of the last response that no
    later request returned."""
    from pydantic_ai.messages import ModelResponse, ToolCallPart

    last = max((i for i, m in enumerate(messages) if isinstance(m, ModelResponse)), default=-1)
    if last < 0:
        return []
    answered = {getattr(p, "tool_call_id", None) for m in messages[last + 1 :] for p in m.parts}
    return [p for p in messages[last].parts if isinstance(p, ToolCallPart) and p.tool_call_id not in answered]


def _turns(messages: Sequence[Any]) -> int:
    from pydantic_ai.messages import UserPromptPart

    return sum(1 for m in messages for p in m.parts if isinstance(p, UserPromptPart))


# -- one life --------------------------------------------------------------------------------


class _App:
    """The team's app loop for one life: each turn one ``agent.run`` on the stored history,
    its new messages saved when it returns; a run parked for approval answered by the
    scenario's person and continued (``DeferredToolResults``)."""

    def __init__(
        self, life: TeamLife, agent: Any, store: Any, approvals: Approvals, turn: Callable[[], int]
    ) -> None:
        self.life = life
        self.agent = agent
        self.store = store
        self.approvals = approvals
        self.turn_number = turn  # the turn the app is on (1-based)
        self.durable = _durable(agent)
        self.base = 0  # the length of the history the running run started from

    async def history(self) -> list[Any]:
        return list(await _maybe(self.store.get_messages()))

    async def turn(self, text: str) -> None:
        await self._settle(await self._run(text, await self.history(), None))

    async def recovered(self) -> None:
        """A ``DBOSAgent``'s turn a previous life started as a workflow (``turn-N``) and did
        not save: its result taken from DBOS -- waited for while ``DBOS.launch()`` recovers it
        (PENDING), read back when done -- and saved, as the app saves a run's."""
        result = await asyncio.to_thread(dbos_adapter.turn_result, self.turn_number())
        await self._save(result)
        await self._settle(result)

    async def resume(self, history: Sequence[Any]) -> None:
        """The run a previous life parked for approval, continued: its calls asked again."""
        await self._settle(await self._run(None, history, self._answer(_open_calls(history))))

    def running(self, run_context: Any) -> None:
        _RUNNING[:] = list(run_context.messages)[self.base :]

    async def _run(self, prompt: str | None, history: Sequence[Any], deferred: Any) -> Any:
        self.base = len(history)
        _RUNNING.clear()
        if self.durable:
            from dbos import SetWorkflowID

            # The app's way with DBOS: each turn a workflow of its own, under an id a restarted
            # app finds again (DBOS.launch() recovers it; its result is DBOS's to give).
            with SetWorkflowID(dbos_adapter.TURN.format(self.turn_number())):
                result = await self.agent.run(prompt, message_history=list(history))
        else:
            result = await self.agent.run(
                prompt, message_history=list(history), deferred_tool_results=deferred
            )
        await self._save(result)
        return result

    async def _save(self, result: Any) -> None:
        """The app's write, then the moments it makes durable: each return saved, and each
        call saved without one (the run parked for approval)."""
        from pydantic_ai import DeferredToolRequests
        from pydantic_ai.messages import ModelResponse, RetryPromptPart, ToolCallPart, ToolReturnPart

        new = result.new_messages()
        await _maybe(self.store.add_messages(result.new_messages_json()))
        _RUNNING.clear()
        returned = [
            p.tool_call_id
            for m in new
            if not isinstance(m, ModelResponse)
            for p in m.parts
            if isinstance(p, (ToolReturnPart, RetryPromptPart)) and p.tool_name is not None
        ]
        for call_id in returned:
            self.life.hook("after_tool_result", call_id)
        if isinstance(result.output, DeferredToolRequests):
            for m in new:
                for p in m.parts if isinstance(m, ModelResponse) else ():
                    if isinstance(p, ToolCallPart) and p.tool_call_id not in returned:
                        self.life.hook("after_tool_call_saved", p.tool_call_id)

    async def _settle(self, result: Any) -> None:
        from pydantic_ai import DeferredToolRequests

        while isinstance(result.output, DeferredToolRequests):
            if result.output.calls:
                raise InputError(
                    f"{self.life.spec.path}: the agent deferred {len(result.output.calls)} call(s) to be run "
                    "outside it (ExternalToolset / CallDeferred): crashmatrix runs no external tool; give "
                    "the agent the tool itself"
                )
            deferred = self._answer(result.output.approvals)
            result = await self._run(None, await self.history(), deferred)

    def _answer(self, calls: Sequence[Any]) -> Any:
        from pydantic_ai import DeferredToolResults, ToolDenied

        answers: dict[str, Any] = {}
        for call in calls:
            answer = self.approvals(call.tool_name, call.tool_call_id, call.args_as_dict())
            if answer.approved:
                answers[call.tool_call_id] = True
                self.life.hook("after_approved", call.tool_call_id)
            else:
                contract = self.life.ctx.scenario.contracts.get(call.tool_name)
                answers[call.tool_call_id] = ToolDenied(
                    rejection(call.tool_name, contract, again=answer.again)
                )
        return DeferredToolResults(approvals=answers)


def drive(life: TeamLife) -> None:
    """One life of a framework YAML's PydanticAI agent: built by the team's factory, a run a
    previous life parked for approval continued, the remaining turns sent."""
    asyncio.run(_drive(life))


async def _drive(life: TeamLife) -> None:
    ctx = life.ctx
    where = str(life.spec.path)
    workspace = ctx.world_dir / "workspace"
    url = dbos_adapter.sqlite_url(workspace)
    context = TeamContext(workspace=life.workspace, life=ctx.life, system_database_url=url)
    agent, store = await _build(life.factory, context, where)
    _write_store(ctx.case_dir, _store_of(where, store, life.workspace, life.options))
    history = list(await _maybe(store.get_messages()))
    turn = [_turns(history)]
    app = _App(
        life, agent, store, Approvals(ctx, ctx.case_dir / ASKED_NAME, lambda: turn[0]), lambda: turn[0]
    )
    # A moment the adapter YAML maps to the team's own function (``boundaries:``, e.g. its
    # ledger's running row committed) is that function's, not the tool's edge: one place each.
    mapped = {rule.boundary for rule in life.spec.rules}
    # A DBOSAgent's DBOS steps: the model's reply saved as its step row commits; a tool of the
    # team's that calls a @DBOS.step acts inside it (the step's seams fire its effect and its
    # row's commit, not the tool's return).
    seams = instance = None
    if app.durable:
        dbos_adapter.check_version(where)
        instance = dbos_adapter.configured_dbos(where, url)
        seams = dbos_adapter.StepSeams(life.hook, lambda step_name: _CALL.get(), _reply_calls)
        dbos_adapter.install_seams(seams)

    def before(call_id: str, run_context: Any) -> None:
        _CALL.set(call_id)  # this call's task (and its thread): a step it starts is its
        app.running(run_context)
        life.sync()  # the copy with this call in it: its effects are its own
        if "after_running" not in mapped:
            life.hook("after_running", call_id)

    def after(call_id: str) -> None:
        _CALL.set(None)
        if "after_side_effect" not in mapped and (seams is None or call_id not in seams.stepped):
            life.hook("after_side_effect", call_id)

    bracket_tools(agent, before, after)
    app.base = len(history)  # a run DBOS recovers starts from the saved history too
    if app.durable:
        # Recovers the turn's workflow a killed life left PENDING, in its own thread.
        dbos_adapter.launch(instance)
        started = {t.number: t.status for t in dbos_adapter.case_turns(workspace)}
        if turn[0] + 1 in started:  # started as a workflow, never saved: DBOS has its result
            turn[0] += 1
            await app.recovered()
    elif _open_calls(history):
        await app.resume(history)
    for text in ctx.scenario.turns[turn[0] :]:
        turn[0] += 1
        await app.turn(text)


# -- the load check of a framework YAML -----------------------------------------------------


@contextlib.contextmanager
def _dot_model() -> Iterator[tuple[str, list[str]]]:
    """A loopback model answering ".", with the client environment pointing at it (as a
    life's does) while the block runs, restored after: its URL and the routes asked."""
    from crashmatrix.harness.agents.loopback import LoopbackServer

    routes: list[str] = []
    server = LoopbackServer(
        cast(Any, DotModel()),
        on_edge=lambda boundary, call_id: None,
        edges=frozenset(),
        on_request=routes.append,
    )
    saved = {key: os.environ.get(key) for key in CLIENT_ENV}
    server.start()
    try:
        os.environ.update(client_env(server.model_url))
        yield server.model_url, routes
    finally:
        server.close()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _check_version(where: str) -> None:
    from importlib.metadata import version

    installed = version("pydantic-ai-slim")
    parts = tuple(int(p) for p in installed.split(".")[:3] if p.isdigit())
    if not (SUPPORTED[0] <= parts < SUPPORTED[1]):
        raise InputError(
            f"{where}: pydantic-ai-slim {installed} is installed; this adapter supports "
            f"{SUPPORTED_TEXT}: pip install 'pydantic-ai-slim{SUPPORTED_TEXT}'"
        )


def check(spec: Any) -> AgentFacts:
    """The team's agent built once at load, as a life builds it (the environment pointing at a
    loopback model answering ".", a scratch workspace as the working directory, the real
    tools): what the factory returns checked, the tools the agent has and whether it asks
    found, and one run through the agent's own model client -- a client that does not reach
    crashmatrix's model is one line here, not an error in every life."""
    where = str(spec.path)
    _check_version(where)
    if spec.tools == "harness":
        raise InputError(
            f"{where}: tools: harness: a PydanticAI agent runs its own tools here; drop tools: "
            "(crashmatrix counts their effects through effects:)"
        )
    from crashmatrix.harness.agents.python_agent import import_agent

    cwd = os.getcwd()
    modules = set(sys.modules)
    with (
        tempfile.TemporaryDirectory(prefix="crashmatrix-pydantic-ai-") as scratch,
        _dot_model() as (url, routes),
    ):
        try:
            os.chdir(scratch)
            try:
                module = import_agent(spec)
            except Exception as error:
                raise InputError(
                    f"{where}: factory: importing {spec.module} raised "
                    f"{type(error).__name__}{_where(error)}: {error}"
                ) from error
            factory = getattr(module, spec.main, None)
            if not callable(factory):
                raise InputError(
                    f"{where}: factory: {spec.module} has no function {spec.main!r} "
                    f"(def {spec.main}(ctx) -> (agent, store))"
                )
            facts = asyncio.run(_check(spec, factory, Path(scratch)))
        finally:
            os.chdir(cwd)
            _forget_dbos()
            # The team's modules run again in each life, in its workspace: not imported here
            # (a module-level connection or file would be the scratch directory's).
            for name in set(sys.modules) - modules:
                origin = str(getattr(sys.modules[name], "__file__", "") or "")
                if origin.startswith(str(spec.here)):
                    del sys.modules[name]
    if "chat" not in routes:
        asked = f" but asked for {', '.join(sorted(set(routes)))}, not a chat completion" if routes else " "
        raise InputError(
            f"{where}: the agent's model client did not reach crashmatrix's model at {url}{asked.rstrip()}; "
            "build OpenAIChatModel(name) with the default provider (it reads OPENAI_BASE_URL), or "
            "OpenAIProvider(base_url=os.environ['OPENAI_BASE_URL'])"
        )
    return facts


async def _check(spec: Any, factory: Callable[..., Any], scratch: Path) -> AgentFacts:
    where = str(spec.path)
    context = TeamContext(workspace=scratch, life=0, system_database_url=dbos_adapter.sqlite_url(scratch))
    _dbos_logs_to_stderr()
    agent, store = await _build(factory, context, where)
    _store_of(where, store, scratch, spec.options)
    names = bracket_tools(agent, lambda call_id, run_context: None, lambda call_id: None)
    durable = _durable(agent)
    if durable:
        dbos_adapter.check_version(where)
        if _asks(agent):
            raise InputError(
                f"{where}: factory: a DBOSAgent whose tools ask for approval: crashmatrix runs each turn "
                "as one DBOS workflow and does not continue a parked run as another yet; test the agent "
                "without requires_approval, or its wrapped Agent"
            )
    with contextlib.suppress(Exception):
        # What the agent makes of "." is its own business, only the request counts. Bounded:
        # a client that escapes to the internet may wait long for an answer. A DBOSAgent's own
        # agent is asked: its run is a workflow, and DBOS is not launched in this process.
        asking = agent.wrapped if durable else agent
        await asyncio.wait_for(asking.run("crashmatrix load check: answer '.'"), 30.0)
    if durable:
        # DBOS's step rows committing: the reply's calls saved, a tool's own step's result.
        return AgentFacts(
            tools=frozenset(names), reaches=frozenset({"after_tool_call_saved", "before_tool_result"})
        )
    return AgentFacts(tools=frozenset(names), approvals=_asks(agent))


def _dbos_logs_to_stderr() -> None:
    """DBOS's console log handler, made once when dbos is imported, bound to the ``sys.stderr``
    of that moment: pointed at this one, so a factory configuring DBOS in a later load of this
    process (a test's in-process run, whose captured stderr the last one closed) can log."""
    if "dbos" in sys.modules:
        import logging

        for handler in logging.getLogger("dbos").handlers:
            if isinstance(handler, logging.StreamHandler) and handler.name == "__dbos_console_log_handler__":
                handler.stream = sys.stderr  # not setStream: it flushes the old one, maybe closed


def _forget_dbos() -> None:
    """What a team's module registered with DBOS at load (a DBOSAgent's workflows and steps, a
    DBOS instance its factory configured) dropped: each life imports it again in a process of
    its own, and a second load in this one would be refused as a duplicate registration."""
    if "dbos" in sys.modules:
        from dbos import DBOS

        DBOS.destroy(destroy_registry=True)
