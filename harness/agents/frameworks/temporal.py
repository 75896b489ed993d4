"""A Temporal agent (``framework: temporal`` in an adapter YAML): the team's worker crashed at
Temporal's own seams and resumed by Temporal's own recovery.

The team's agent is a Temporal workflow: its loop asks the model in an activity (returning the
assistant message as a dict) and runs each tool as an activity named as its tool. The factory
gets a ``TeamContext`` (a client connected to the case's server, the task queue) and returns
the team's ``Worker`` with that workflow and its activities, as its worker's ``main`` builds it::

    def build(ctx):
        return Worker(ctx.client, task_queue=ctx.task_queue, workflows=[SupportWorkflow],
                      activities=[ask_model, send_email, create_order])

The store is the Temporal server's: a dev server (``temporal server start-dev``) on the case's
SQLite file (``temporal.sqlite`` in the workspace, copied with the case), started for each life
by the process that loaded the adapter and stopped after it (``temporal_server``: the worker is
what crashmatrix kills, the server outlives it). One workflow per user turn (id ``turn-N``),
started with the conversation so far and the turn's message last. A restarted life runs the
team's worker again; Temporal recovers what the killed one left: a workflow task it held is
retried after the workflow task timeout, an activity it ran after the activity's
start-to-close timeout (retried by its retry policy). The life waits for each started turn's
result and starts the turns not started.

The seams, nothing of Temporal edited (``_install``, in the life's process):

* an activity about to run the team's function (the worker's innermost inbound interceptor,
  ``_ActivityInboundImpl.execute_activity``): ``after_running`` for a tool's activity.
* the function returned (or raised), nothing sent yet: ``after_side_effect``.
* the activity's completion acknowledged by the server (the worker's
  ``complete_activity_task`` returned: ``ActivityTaskCompleted`` is in the history):
  ``before_tool_result`` for a tool's activity; for the model's activity holding tool calls,
  ``after_tool_call_saved`` (each call).

The event history maps onto crashmatrix's vocabulary the way DBOS's step table does (the same
code: ``frameworks.durable_steps.chat_records``): a completed activity is a step with its result, a
failed one (retries exhausted) a step with its error, an activity scheduled or running has no
completion, and Temporal keeps no running state a reader could tell from a retry: no ledger of
attempts (``WHY_NO_LEDGER``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sqlite3
import sys
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from crashmatrix.harness.agents.frameworks.durable_steps import (
    TURN,
    Step,
    Turn,
    chat_records,
    history,
    running_call,
    sourced_record,
)
from crashmatrix.harness.agents.readonly_db import connect_readonly
from crashmatrix.harness.agents.team_life import AgentFacts, FrameworkInfo, TeamLife
from crashmatrix.harness.errors import InputError

__all__ = [
    "DB_NAME",
    "FRAMEWORK",
    "SUPPORTED",
    "SUPPORTED_TEXT",
    "TASK_QUEUE",
    "WHY_NO_LEDGER",
    "TeamContext",
    "after_life",
    "check",
    "drive",
    "load",
    "read_records",
    "read_turns",
    "session_records",
    "steps_before",
    "turn_of",
]

SUPPORTED = ((1, 20, 0), (2,))
SUPPORTED_TEXT = ">=1.20.0,<2"
DB_NAME = "temporal.sqlite"  # the dev server's database, in the case's workspace
TASK_QUEUE = "crashmatrix-agent"  # the case's own server: one queue is all it needs
_TURN_ID = re.compile(r"^turn-(\d+)$")
# The workflow task timeout crashmatrix starts each turn with (Temporal's default is 10 s): a
# workflow task the killed worker held is given to the next life's worker this much later.
WORKFLOW_TASK_TIMEOUT = timedelta(seconds=2)
# What a failed activity reads as: its failure's message after this prefix (an adapter's
# ``results:`` maps it, e.g. ``{regex: "^Temporal activity error", category: error}``).
ACTIVITY_ERROR = "Temporal activity error"
WHY_NO_LEDGER = (
    "temporal records an activity's result only when it completes (ActivityTaskCompleted, or "
    "ActivityTaskFailed once its retries are spent); an attempt started and killed leaves no event "
    "of its own: no ledger of attempts"
)


@dataclass(frozen=True)
class TeamContext:
    """What the factory gets, once per life."""

    workspace: Path  # the case's workspace, also the working directory
    life: int
    client: Any  # a ``temporalio.client.Client`` connected to the case's server
    task_queue: str


# -- the event history, read (pure below the readers) ----------------------------------------------


def _values(payloads: Iterable[Any]) -> list[Any]:
    """Payloads as Python values (Temporal's default converter: JSON, null, bytes, protobuf)."""
    from temporalio.converter import default

    return list(default().payload_converter.from_payloads(list(payloads)))


def turn_of(number: int, events: Sequence[Any]) -> Turn:
    """A turn's workflow from its history events (``temporalio.api.history.v1.HistoryEvent``):
    its input's messages, its status, and each activity that completed (or failed for good) as a
    step, in the order it was scheduled; one scheduled or running has no step (no completion)."""
    messages: tuple[Mapping[str, Any], ...] = ()
    status = "RUNNING"
    names: dict[int, str] = {}
    done: dict[int, Step] = {}
    for event in events:
        kind = event.WhichOneof("attributes")
        attributes: Any = getattr(event, kind) if kind else None
        if kind == "workflow_execution_started_event_attributes":
            args = _values(attributes.input.payloads)
            first = args[0] if args else ()
            messages = tuple(m for m in first or () if isinstance(m, Mapping))
        elif kind == "activity_task_scheduled_event_attributes":
            names[event.event_id] = attributes.activity_type.name
        elif kind == "activity_task_completed_event_attributes":
            scheduled = attributes.scheduled_event_id
            values = _values(attributes.result.payloads)
            done[scheduled] = Step(scheduled, names.get(scheduled, ""), output=values[0] if values else None)
        elif kind in ("activity_task_failed_event_attributes", "activity_task_timed_out_event_attributes"):
            scheduled = attributes.scheduled_event_id
            failure = attributes.failure
            cause = failure.cause.message if failure.HasField("cause") else ""
            text = f"{ACTIVITY_ERROR}: {failure.message}" + (f": {cause}" if cause else "")
            done[scheduled] = Step(scheduled, names.get(scheduled, ""), error=text)
        elif kind == "workflow_execution_completed_event_attributes":
            status = "COMPLETED"
        elif kind in (
            "workflow_execution_failed_event_attributes",
            "workflow_execution_timed_out_event_attributes",
            "workflow_execution_terminated_event_attributes",
            "workflow_execution_canceled_event_attributes",
        ):
            status = "FAILED"
    return Turn(number, status, messages, tuple(done[e] for e in sorted(done)))


def steps_before(events: Sequence[Any], activity_id: str) -> tuple[str, list[Step]]:
    """The activity ``activity_id``'s name and the steps of the activities that completed before
    it was scheduled (what ``running_call`` finds its tool call from)."""
    mine = next(
        (
            event
            for event in events
            if event.WhichOneof("attributes") == "activity_task_scheduled_event_attributes"
            and event.activity_task_scheduled_event_attributes.activity_id == activity_id
        ),
        None,
    )
    if mine is None:
        return "", []
    before = [step for step in turn_of(0, events).steps if step.function_id < mine.event_id]
    return mine.activity_task_scheduled_event_attributes.activity_type.name, before


def _events(db: sqlite3.Connection, run_id: bytes) -> list[Any]:
    """A run's history events: its history nodes in order, the newest transaction of each."""
    from temporalio.api.history.v1 import History

    newest: dict[int, bytes] = {}
    # Temporal stores a node's transaction id negated: the smallest is the newest write.
    for node_id, data in db.execute(
        "SELECT node_id, data FROM history_node WHERE tree_id = ? ORDER BY node_id, txn_id DESC", (run_id,)
    ):
        newest[int(node_id)] = bytes(data)
    events: list[Any] = []
    for node_id in sorted(newest):
        events.extend(History.FromString(newest[node_id]).events)
    return events


def _workflow_events(db_path: Path) -> dict[str, list[Any]]:
    """Each turn workflow's events (workflow id -> events), read-only, from any process."""
    if not db_path.exists():
        return {}
    with contextlib.closing(connect_readonly(db_path, timeout=30.0)) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "current_executions" not in tables or "history_node" not in tables:
            return {}
        rows = db.execute("SELECT workflow_id, run_id FROM current_executions").fetchall()
        return {str(wid): _events(db, bytes(run)) for wid, run in rows if _TURN_ID.match(str(wid))}


def read_turns(db_path: Path) -> list[Turn]:
    """The turns the server's database holds, by number."""
    turns = []
    for workflow_id, events in _workflow_events(db_path).items():
        matched = _TURN_ID.match(workflow_id)
        assert matched is not None
        turns.append(turn_of(int(matched.group(1)), events))
    return sorted(turns, key=lambda t: t.number)


def read_records(workspace: Path) -> list[Mapping[str, Any]]:
    """The session's reader: the case's event histories as chat records."""
    return chat_records(read_turns(workspace / DB_NAME))


_COMPLETIONS = (
    "activity_task_completed_event_attributes",
    "activity_task_failed_event_attributes",
    "activity_task_timed_out_event_attributes",
)


class HistoryNodes:
    """Where ``crashmatrix doctor`` plants its faults (``harness.agents.session_records``): the
    activity completions in the server's ``history_node`` rows behind the chat records
    ``read_records`` gives (record n is its n-th), rewritten as the server writes them (a
    ``History`` batch, its payloads in Temporal's default JSON encoding)."""

    def __init__(self, workspace: Path) -> None:
        self.path = workspace / DB_NAME

    def name(self) -> str:
        return f"{DB_NAME} history_node"

    def _record(self, number: int) -> tuple[Mapping[str, Any], tuple[str, int]]:
        return sourced_record(read_turns(self.path), number, "an activity's completion")

    def get(self, number: int) -> bytes:
        return json.dumps(self._record(number)[0]["message"], ensure_ascii=False).encode()

    def again(self, number: int) -> str:
        from crashmatrix.harness.agents.session_records import CannotPlant

        raise CannotPlant(
            "the server completes a scheduled activity once (a second completion is refused): never a "
            "second result for one call",
            not_applicable=True,
        )

    def _rewrite(self, workflow_id: str, scheduled: int, change: Callable[[Any], bool]) -> None:
        """Apply ``change`` to the completion event of activity ``scheduled`` (False: drop it)
        in the newest write of its history node."""
        from temporalio.api.history.v1 import History

        with contextlib.closing(sqlite3.connect(self.path, timeout=30.0)) as db, db:
            [(run_id,)] = db.execute(
                "SELECT run_id FROM current_executions WHERE workflow_id = ?", (workflow_id,)
            ).fetchall()
            rows = db.execute(
                "SELECT node_id, txn_id, data FROM history_node WHERE tree_id = ?"
                " ORDER BY node_id, txn_id DESC",
                (run_id,),
            ).fetchall()
            newest: dict[int, tuple[int, bytes]] = {}
            for node_id, txn_id, data in rows:
                newest[int(node_id)] = (int(txn_id), bytes(data))
            for node_id, (txn_id, data) in newest.items():
                batch = History.FromString(data)
                for index, event in enumerate(batch.events):
                    kind = event.WhichOneof("attributes")
                    if kind in _COMPLETIONS and getattr(event, kind).scheduled_event_id == scheduled:
                        if not change(event):
                            del batch.events[index]
                        db.execute(
                            "UPDATE history_node SET data = ?"
                            " WHERE tree_id = ? AND node_id = ? AND txn_id = ?",
                            (batch.SerializeToString(), run_id, node_id, txn_id),
                        )
                        return

    def replace(self, number: int, text: bytes) -> None:
        from temporalio.converter import default

        record, (workflow_id, scheduled) = self._record(number)
        new = json.loads(text)

        def rewrite(event: Any) -> bool:
            attributes = event.activity_task_completed_event_attributes
            [value] = _values(attributes.result.payloads) or [None]
            if record["message"]["role"] == "tool":
                value = new.get("content")
            elif isinstance(value, Mapping):
                value = {**value, "tool_calls": new.get("tool_calls") or [], "content": new.get("content")}
            del attributes.result.payloads[:]
            attributes.result.payloads.extend(default().payload_converter.to_payloads([value]))
            return True

        self._rewrite(workflow_id, scheduled, rewrite)

    def tear(self, number: int) -> str:
        """SQLite commits a write whole: one cut short is the completion never recorded."""
        _, (workflow_id, scheduled) = self._record(number)
        self._rewrite(workflow_id, scheduled, lambda event: False)
        return f"{self.name()}: the completion of {workflow_id}'s activity {scheduled} never recorded"


def session_records(workspace: Path) -> HistoryNodes:
    """The doctor's store: the server's history of each turn."""
    return HistoryNodes(workspace)


# -- a life -----------------------------------------------------------------------------------------


class _Seams:
    """The boundaries, fired from the worker's activity machinery (its event loop)."""

    def __init__(self, life: TeamLife) -> None:
        self.life = life
        self.db = life.ctx.world_dir / "workspace" / DB_NAME
        # task token -> (the tool call it runs or None, the function's result)
        self.ran: dict[bytes, tuple[str | None, Any]] = {}

    def starting(self, info: Any) -> str | None:
        events = _workflow_events(self.db).get(info.workflow_id, [])
        name, steps = steps_before(events, info.activity_id)
        call_id = running_call(steps, name or info.activity_type)
        if call_id is not None:
            self.life.sync()  # the copy with this call in it: its effects are its own
            self.life.hook("after_running", call_id)
        return call_id

    def completed(self, task_token: bytes) -> None:
        """The server acknowledged the completion: a tool's result durable
        (``before_tool_result``), or the model's reply with its calls (``after_tool_call_saved``)."""
        call_id, result = self.ran.pop(task_token, (None, None))
        if call_id is not None:
            self.life.hook("before_tool_result", call_id)
            return
        if isinstance(result, Mapping) and result.get("role") == "assistant":
            for call in result.get("tool_calls") or ():
                if isinstance(call, Mapping):
                    self.life.hook("after_tool_call_saved", str(call.get("id", "")))


def _install(seams: _Seams) -> None:
    """Wrap the worker's activity execution and its completion (class attributes of this life's
    process: each life is a fresh fork)."""
    from temporalio import activity
    from temporalio.worker import _activity

    execute = _activity._ActivityInboundImpl.execute_activity

    async def executing(self: Any, input: Any) -> Any:
        info = activity.info()
        call_id = seams.starting(info)
        try:
            result = await execute(self, input)
        finally:
            if call_id is not None:
                seams.life.hook("after_side_effect", call_id)  # returned or raised: it acted
        seams.ran[info.task_token] = (call_id, result)
        return result

    _activity._ActivityInboundImpl.execute_activity = executing  # type: ignore[method-assign]
    handle = _activity._ActivityWorker._handle_start_activity_task

    async def handling(self: Any, task_token: bytes, start: Any, running: Any) -> None:
        await handle(self, task_token, start, running)
        if task_token in seams.ran:  # it returned, and the server has its completion
            seams.completed(task_token)

    _activity._ActivityWorker._handle_start_activity_task = handling  # type: ignore[method-assign,assignment]


def _built(life: TeamLife, context: TeamContext) -> tuple[Any, str]:
    """The team's worker and the name of its one workflow."""
    from temporalio import workflow
    from temporalio.worker import Worker

    where = str(life.spec.path)
    try:
        worker = life.factory(context)
    except InputError:
        raise
    except Exception as error:
        raise InputError(f"{where}: factory: it raised {type(error).__name__}: {error}") from error
    if not isinstance(worker, Worker):
        raise InputError(
            f"{where}: factory: it returned {type(worker).__name__}; return the team's "
            "temporalio.worker.Worker built on ctx.client and ctx.task_queue"
        )
    config = worker.config()
    workflows = list(config.get("workflows") or ())
    if len(workflows) != 1 or config.get("task_queue") != context.task_queue:
        raise InputError(
            f"{where}: factory: the worker must run one workflow (the turn's) on task_queue=ctx.task_queue; "
            f"it runs {len(workflows)} on {config.get('task_queue')!r}"
        )
    return worker, str(workflow._Definition.must_from_class(workflows[0]).name)


async def _connect(address: str) -> Any:
    from temporalio.client import Client

    for attempt in range(600):
        try:
            return await Client.connect(address)
        except Exception:
            if attempt == 599:
                raise
            await asyncio.sleep(0.05)  # the server's port is open, its frontend not yet ready
    raise AssertionError("unreachable")


async def _status(handle: Any) -> Any:
    """The workflow's status, None when it was never started. A server just started answers
    UNAVAILABLE ("shard status unknown") until its history shards are loaded: asked again."""
    from temporalio.service import RPCError, RPCStatusCode

    for attempt in range(2400):
        try:
            return (await handle.describe()).status
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return None
            if error.status != RPCStatusCode.UNAVAILABLE or attempt == 2399:
                raise
            await asyncio.sleep(0.05)
    raise AssertionError("unreachable")


async def _drive(life: TeamLife, address: str) -> None:
    from temporalio.client import WorkflowExecutionStatus

    client = await _connect(address)
    context = TeamContext(workspace=life.workspace, life=life.ctx.life, client=client, task_queue=TASK_QUEUE)
    worker, workflow_name = _built(life, context)
    workspace = life.ctx.world_dir / "workspace"
    _install(_Seams(life))
    async with worker:
        for number, text in enumerate(life.ctx.scenario.turns, start=1):
            workflow_id = TURN.format(number)
            handle = client.get_workflow_handle(workflow_id)
            try:
                status = await _status(handle)
                if status is None:
                    messages = [*history(read_records(workspace)), {"role": "user", "content": text}]
                    handle = await client.start_workflow(
                        workflow_name,
                        messages,
                        id=workflow_id,
                        task_queue=TASK_QUEUE,
                        task_timeout=WORKFLOW_TASK_TIMEOUT,
                    )
                elif status != WorkflowExecutionStatus.RUNNING:
                    continue
                await handle.result()  # a running one: Temporal's recovery finishes it here
            except Exception:
                # A turn whose workflow failed is the agent's failure (what the model was told
                # is judged); the next turn goes on.
                traceback.print_exc(file=sys.stderr)


def _check_version(where: str) -> None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = version("temporalio")
    except PackageNotFoundError as error:
        raise InputError(
            f"{where}: the temporal adapter needs temporalio: pip install 'crashmatrix[temporal]'"
        ) from error
    parts = tuple(int(p) for p in text.split(".")[:3] if p.isdigit())
    if not SUPPORTED[0] <= parts < SUPPORTED[1]:
        raise InputError(
            f"{where}: temporalio {text} is installed; this adapter supports {SUPPORTED_TEXT}: "
            f"pip install 'temporalio{SUPPORTED_TEXT}'"
        )


def check(spec: Any) -> AgentFacts:
    """At load: the installed temporalio is one this adapter drives and the ``temporal`` CLI is
    there (one line if not); the server manager started in this process, before anything forks,
    so that every life inherits it. The team's module is not imported here. Its tools are the
    catalogue's."""
    from crashmatrix.harness.agents.frameworks.temporal_server import TemporalUnavailable, ensure_manager

    _check_version(str(spec.path))
    try:
        ensure_manager()
    except TemporalUnavailable as error:
        raise InputError(f"{spec.path}: framework: temporal: {error}") from error
    return AgentFacts()


def drive(life: TeamLife) -> None:
    """One life: a server on the case's database, the team's worker built and run with the seams
    installed, every started turn waited for, every other started."""
    from crashmatrix.harness.agents.frameworks.temporal_server import server_for

    _check_version(str(life.spec.path))
    address = server_for(life.ctx.world_dir / "workspace" / DB_NAME)
    asyncio.run(_drive(life, address))


def after_life(case_dir: Path) -> None:
    """In the harness's process, once a life ended: its server stopped, before anything copies,
    judges or restarts the case."""
    from crashmatrix.harness.agents.frameworks.temporal_server import stop_server

    stop_server(case_dir / "world" / "workspace" / DB_NAME)


def load(target: str, *, spec: str, **options: Any) -> Any:
    """``--agent=temporal:package.module:factory``: a Temporal agent is the team's worker on its
    own activities, declared in an adapter YAML (its effects and results are the team's)."""
    raise InputError(
        f"--agent={spec!r}: a Temporal agent runs from an adapter YAML: write 'framework: temporal' and "
        f"'factory: {target}' in one, with its effects: (docs/frameworks.md \"Temporal\")"
    )


# -- what the common part reads ------------------------------------------------------------------

FRAMEWORK = FrameworkInfo(
    boundaries=("after_tool_call_saved", "after_running", "after_side_effect", "before_tool_result"),
    unreachable={
        "after_tool_call_pending": (
            "the model's reply is recorded once, when the server accepts its activity's completion "
            "(after_tool_call_saved)"
        ),
        "after_approved": "a Temporal workflow asks no person here (no approval seam)",
        "after_tool_result": (
            "the activity's completion in the history is the Tool Result's only record "
            "(before_tool_result); the next moment is the model's request"
        ),
    },
    why_not_torn=(
        "its session is the Temporal server's database (SQLite): rows written through its own "
        "journal, there is no appended line to cut"
    ),
    why_no_power=(
        "the session is the Temporal server's database: SQLite syncs from the server's own process, "
        "outside the harness's os.fsync recorder, and a database is not cut back by length"
    ),
    preload=("temporalio.client", "temporalio.worker", __name__),
)
