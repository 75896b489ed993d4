"""A DBOS-durable agent (``framework: dbos`` in an adapter YAML), crashed at DBOS's own seams and
resumed by DBOS's own recovery.

The team's agent is a DBOS workflow: its hand-written loop over its own model client, the
model call a ``@DBOS.step`` returning the assistant message as a dict (``message.model_dump()``),
each tool a ``@DBOS.step`` named as its tool. The factory gets a ``TeamContext`` and returns
that workflow; it configures DBOS as the team's ``main`` does, on the case's system database::

    def build(ctx):
        DBOS(config={"name": "support-agent", "system_database_url": ctx.system_database_url})
        return support_turn  # @DBOS.workflow() def support_turn(messages: list[dict]) -> str

DBOS's system database is the session: SQLite in the case's workspace (``dbos.sqlite``, copied
with the case), one workflow per user turn (id ``turn-N``), called with the conversation so
far and the turn's user message last (the chat messages read back from the earlier turns'
steps). A restarted life calls ``DBOS.launch()``, which recovers the workflows this executor
left PENDING (DBOS's own startup recovery, in its own thread: re-enqueued on DBOS's internal
queue, which a life polls every 0.05 s instead of every second, ``launch``); the life waits for
them, then sends the turns not started.

The seams, nothing of DBOS edited (``install_seams``):

* the step about to run its function (``dbos._core.invoke_step``'s function, called only when
  DBOS found no row to replay): ``after_running``. DBOS writes nothing when a step starts.
* the tool function returned (its output in memory, no row yet): ``after_side_effect``.
* the step's row committed in ``operation_outputs`` (``SystemDatabase.record_operation_result``
  returned): ``before_tool_result`` for a tool's step; for the model's step holding tool calls,
  ``after_tool_call_saved`` (each call).

What DBOS then does on a crash is its contract: a step with a row is replayed from it, a step
without one runs again from its start (at-least-once). A tool that was killed after its effect
and before its row committed acts twice unless it carries its own key and reconciles.

The step table maps onto crashmatrix's vocabulary where it can (``chat_records``): a model
step's output is the assistant's message, a tool step with an output is the Tool Result the
model got (the call succeeded), one with an error a failed call. A step started and not
committed has no row, and DBOS records no running state: there is no ledger of attempts, so
the ledger checks are not applicable (``WHY_NO_LEDGER``).
"""

from __future__ import annotations

import base64
import contextlib
import inspect
import json
import pickle
import re
import sqlite3
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crashmatrix.harness.agents.frameworks.durable_steps import (
    TURN,
    Step,
    Turn,
    calls_of,
    chat_records,
    history,
    plain,
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
    "TURN",
    "WHY_NO_LEDGER",
    "Step",
    "StepSeams",
    "TeamContext",
    "Turn",
    "case_turns",
    "chat_records",
    "check",
    "check_version",
    "configured_dbos",
    "drive",
    "install_seams",
    "launch",
    "read_records",
    "read_turns",
    "running_call",
    "session_records",
    "sqlite_url",
    "turn_result",
]

SUPPORTED = ((3, 0, 0), (4,))
SUPPORTED_TEXT = ">=3.0.0,<4"
DB_NAME = "dbos.sqlite"  # the system database, in the case's workspace: copied with the case
STORE_NAME = "dbos-store.txt"  # in the case directory: sqlite or postgres (options: {store: ...})
STORES = ("sqlite", "postgres")
PG_SCHEMA = "dbos"  # where DBOS keeps its tables on PostgreSQL
_TURN_ID = re.compile(r"^turn-(\d+)$")
# What a failed step reads as: its error's text after this prefix (an adapter's ``results:``
# maps it, e.g. ``{regex: "^DBOS step error", category: error}``).
STEP_ERROR = "DBOS step error"
WHY_NO_LEDGER = (
    "dbos records a step only when it completes (an operation_outputs row with its output or "
    "error); a step started and not committed has no row and no running state: no ledger of attempts"
)


@dataclass(frozen=True)
class TeamContext:
    """What the factory gets, once per life."""

    workspace: Path  # the case's workspace, also the working directory
    life: int
    # The case's system database: ``sqlite:///<workspace>/dbos.sqlite``, or with
    # ``options: {store: postgres}`` the case's own PostgreSQL database.
    system_database_url: str


# -- the step table, read (pure below the readers) -------------------------------------------------


def _decode(text: str | None, serialization: str | None) -> Any:
    """A value as DBOS serialized it: base64 pickle (``py_pickle``, its default) or JSON."""
    if text is None:
        return None
    if serialization in ("portable_json", "json"):
        return json.loads(text)
    return pickle.loads(base64.b64decode(text))  # the team's own database, its own objects


def _error_text(text: str | None, serialization: str | None) -> str:
    try:
        error = _decode(text, serialization)
    except Exception:  # an exception class the reader cannot import: still a failed step
        return STEP_ERROR
    if isinstance(error, BaseException):
        return f"{STEP_ERROR}: {type(error).__name__}: {error}"
    return f"{STEP_ERROR}: {error}"


# A query on the system database: (SQL with ``?`` for each parameter, parameters) -> rows.
Query = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]


def _turns(query: Query, tables: set[str], schema: str = "") -> list[Turn]:
    """The turn workflows with their committed steps, through ``query`` (either backend)."""
    if "workflow_status" not in tables or "operation_outputs" not in tables:
        return []  # DBOS made the database and not yet its tables
    status_table, steps_table = f"{schema}workflow_status", f"{schema}operation_outputs"
    # DBOS 3 keeps a workflow's inputs in workflow_input (earlier: workflow_status.inputs).
    inputs = (
        f"COALESCE((SELECT i.inputs FROM {schema}workflow_input i WHERE i.workflow_uuid = s.workflow_uuid),"
        " s.inputs)"
        if "workflow_input" in tables
        else "s.inputs"
    )
    workflows = query(
        f"SELECT s.workflow_uuid, s.status, {inputs}, s.serialization FROM {status_table} s", ()
    )
    turns = []
    for workflow_id, status, raw_inputs, serialization in workflows:
        matched = _TURN_ID.match(str(workflow_id))
        if matched is None:
            continue
        called = _decode(raw_inputs, serialization) if raw_inputs is not None else {}
        args = (called or {}).get("args") or ()
        messages = tuple(m for m in (args[0] if args else ()) if isinstance(m, Mapping))
        rows = query(
            f"SELECT function_id, function_name, output, error, serialization FROM {steps_table} "
            "WHERE workflow_uuid = ? ORDER BY function_id",
            (workflow_id,),
        )
        steps = tuple(
            Step(
                int(function_id),
                str(name),
                output=_decode(output, row_serialization) if error is None else None,
                error=_error_text(error, row_serialization) if error is not None else None,
            )
            for function_id, name, output, error, row_serialization in rows
        )
        turns.append(Turn(int(matched.group(1)), str(status), messages, steps))
    return sorted(turns, key=lambda t: t.number)


def read_turns(db_path: Path) -> list[Turn]:
    """The SQLite system database's turns (read-only; any process)."""
    if not db_path.exists():
        return []
    with contextlib.closing(connect_readonly(db_path)) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        return _turns(lambda sql, params: db.execute(sql, params).fetchall(), tables)


def read_postgres_turns(url: str) -> list[Turn]:
    """The turns of a system database on PostgreSQL (DBOS's tables in its ``dbos`` schema)."""
    from crashmatrix.harness.lives.postgres import _psycopg

    psycopg = _psycopg()
    with psycopg.connect(url, autocommit=True) as conn:
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (PG_SCHEMA,)
            ).fetchall()
        }

        def query(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
            rows: list[tuple[Any, ...]] = conn.execute(sql.replace("?", "%s"), params).fetchall()
            return rows

        return _turns(query, tables, f"{PG_SCHEMA}.")


def _store_of(case_dir: Path) -> str:
    """Which system database a case's lives use (``STORE_NAME``; SQLite before any life)."""
    pointer = case_dir / STORE_NAME
    return pointer.read_text(encoding="utf-8").strip() if pointer.exists() else "sqlite"


def case_turns(workspace: Path) -> list[Turn]:
    """The case's turns, from its SQLite file or its own PostgreSQL database."""
    case_dir = workspace.parent.parent  # ForeignAdapter.workspace: case_dir / world / workspace
    if _store_of(case_dir) == "postgres":
        from crashmatrix.harness.lives.postgres import case_database_url

        return read_postgres_turns(case_database_url(case_dir))
    return read_turns(workspace / DB_NAME)


def _steps_of(workspace: Path, workflow_id: str) -> list[Step]:
    matched = _TURN_ID.match(workflow_id)
    for turn in case_turns(workspace):
        if matched is not None and turn.number == int(matched.group(1)):
            return list(turn.steps)
    return []


def read_records(workspace: Path) -> list[Mapping[str, Any]]:
    """The session's reader: the case's system database as chat records."""
    return chat_records(case_turns(workspace))


class StepRows:
    """Where ``crashmatrix doctor`` plants its faults (``harness.agents.session_records``): the
    rows of DBOS's SQLite ``operation_outputs`` behind the chat records ``read_records`` gives
    (record n is its n-th). A record's row is rewritten as DBOS writes it (pickled, base64)."""

    def __init__(self, workspace: Path) -> None:
        self.path = workspace / DB_NAME

    def name(self) -> str:
        return f"{DB_NAME} operation_outputs"

    def _record(self, number: int) -> tuple[Mapping[str, Any], tuple[str, int]]:
        return sourced_record(read_turns(self.path), number, "a step's row")

    def get(self, number: int) -> bytes:
        return json.dumps(self._record(number)[0]["message"], ensure_ascii=False).encode()

    def again(self, number: int) -> str:
        from crashmatrix.harness.agents.session_records import CannotPlant

        raise CannotPlant(
            "a DBOS step row answers the next call of its reply: a second row is another step, "
            "never a second result for one call",
            not_applicable=True,
        )

    def replace(self, number: int, text: bytes) -> None:
        record, (workflow_id, function_id) = self._record(number)
        new = json.loads(text)
        with contextlib.closing(sqlite3.connect(self.path)) as db, db:
            row = db.execute(
                "SELECT output, serialization FROM operation_outputs"
                " WHERE workflow_uuid = ? AND function_id = ?",
                (workflow_id, function_id),
            ).fetchone()
            value = plain(_decode(row[0], row[1]))
            if record["message"]["role"] == "tool":
                value = new.get("content")
            elif isinstance(value, Mapping):
                value = {**value, "tool_calls": new.get("tool_calls") or [], "content": new.get("content")}
            encoded = base64.b64encode(pickle.dumps(value)).decode()
            db.execute(
                "UPDATE operation_outputs SET output = ?, serialization = 'py_pickle' "
                "WHERE workflow_uuid = ? AND function_id = ?",
                (encoded, workflow_id, function_id),
            )

    def tear(self, number: int) -> str:
        """SQLite commits a row whole: a write cut short is the step's row never committed."""
        _, (workflow_id, function_id) = self._record(number)
        with contextlib.closing(sqlite3.connect(self.path)) as db, db:
            db.execute(
                "DELETE FROM operation_outputs WHERE workflow_uuid = ? AND function_id = ?",
                (workflow_id, function_id),
            )
        return f"{self.name()}: the row of {workflow_id}'s step {function_id} never committed"


def session_records(workspace: Path) -> StepRows:
    """The doctor's store: DBOS's SQLite step rows (a PostgreSQL one is not planted into)."""
    from crashmatrix.harness.agents.session_records import CannotPlant

    if _store_of(workspace.parent.parent) == "postgres":
        raise CannotPlant("its step rows are on PostgreSQL, where the doctor plants no fault (only SQLite)")
    return StepRows(workspace)


# -- a life -----------------------------------------------------------------------------------------


class StepSeams:
    """The boundaries at DBOS's step machinery, fired on the thread running the step (and on
    the one recording its row): a tool's step function returned (``after_side_effect``), its
    row committed (``before_tool_result``); a model step's row holding tool calls committed
    (``after_tool_call_saved``, each call). Shared by ``framework: dbos`` (a workflow with
    tools as steps) and a PydanticAI ``DBOSAgent`` (its model request a step; a tool of the
    team's may call a step), which differ only in how a starting step's call is found
    (``starting``) and how a reply's calls are read (``replied``)."""

    def __init__(
        self,
        hook: Callable[[str, str], None],
        starting: Callable[[str], str | None],
        replied: Callable[[Any], Sequence[str]],
    ) -> None:
        self.hook = hook
        self.starting = starting  # step name -> the tool call it runs (None: no tool's step)
        self.replied = replied  # a step's output -> the tool calls it holds (a model's reply)
        # (workflow id, step id) -> the call its function ran for: the row, recorded maybe on
        # another thread (an async step's), is matched by its own ids.
        self.running: dict[tuple[str, int], str] = {}
        self.stepped: set[str] = set()  # calls whose effect ran inside a step

    def bracket(self, step_name: str, func: Callable[..., Any]) -> Callable[..., Any]:
        """``func`` (a step's function, run only where DBOS found no row to replay) with
        ``after_side_effect`` after it, when it is a tool's."""

        def starting() -> str | None:
            from dbos import DBOS

            call_id = self.starting(step_name)
            if call_id is not None:
                self.running[(DBOS.workflow_id or "", int(DBOS.step_id or 0))] = call_id
            return call_id

        def finished(call_id: str | None) -> None:
            if call_id is not None:
                self.stepped.add(call_id)
                self.hook("after_side_effect", call_id)  # returned or raised: it acted

        if inspect.iscoroutinefunction(func):

            async def bracketed_async(*args: Any, **kwargs: Any) -> Any:
                call_id = starting()
                try:
                    return await func(*args, **kwargs)
                finally:
                    finished(call_id)

            return bracketed_async

        def bracketed(*args: Any, **kwargs: Any) -> Any:
            call_id = starting()
            try:
                return func(*args, **kwargs)
            finally:
                finished(call_id)

        return bracketed

    def committed(self, result: Mapping[str, Any]) -> None:
        """A step's row committed: the tool's result durable (``before_tool_result``), or the
        model's reply with its calls saved (``after_tool_call_saved``, each call)."""
        row = (str(result.get("workflow_uuid", "")), int(result.get("function_id") or 0))
        call_id = self.running.pop(row, None)
        if call_id is not None:
            self.hook("before_tool_result", call_id)
            return
        if result.get("error") is not None or result.get("output") is None:
            return
        try:
            calls = self.replied(_decode(result["output"], result.get("serialization")))
        except Exception:
            return
        for call in calls:
            self.hook("after_tool_call_saved", call)


def install_seams(seams: StepSeams) -> None:
    """Wrap DBOS's step invocation and its step-row write (module and class attributes of this
    life's process: each life is a fresh fork)."""
    from dbos import _core
    from dbos._sys_db import SystemDatabase

    invoke_step = _core.invoke_step

    def invoking(dbos: Any, step_ctx: Any, func: Any, args: Any, kwargs: Any, **options: Any) -> Any:
        name = str(options.get("step_name", ""))
        return invoke_step(dbos, step_ctx, seams.bracket(name, func), args, kwargs, **options)

    _core.invoke_step = invoking
    record = SystemDatabase.record_operation_result

    def recording(self: Any, result: Any, **options: Any) -> None:
        record(self, result, **options)
        seams.committed(result)

    SystemDatabase.record_operation_result = recording  # type: ignore[method-assign]


def _workflow_seams(life: TeamLife) -> StepSeams:
    """A team's workflow with its tools as steps: a step is a tool's when the model's last
    committed reply holds a call of its name not yet answered; ``after_running`` as it starts
    (DBOS writes nothing when a step starts)."""
    workspace = life.ctx.world_dir / "workspace"

    def starting(step_name: str) -> str | None:
        from dbos import DBOS

        call_id = running_call(_steps_of(workspace, DBOS.workflow_id or ""), step_name)
        if call_id is not None:
            life.sync()  # the copy with this call in it: its effects are its own
            life.hook("after_running", call_id)
        return call_id

    def replied(output: Any) -> list[str]:
        return [str(call.get("id", "")) for call in calls_of(output) or ()]

    return StepSeams(life.hook, starting, replied)


def _built(life: TeamLife, context: TeamContext) -> Callable[..., Any]:
    where = str(life.spec.path)
    try:
        workflow = life.factory(context)
    except InputError:
        raise
    except Exception as error:
        raise InputError(f"{where}: factory: it raised {type(error).__name__}: {error}") from error
    if not callable(workflow):
        raise InputError(
            f"{where}: factory: it returned {type(workflow).__name__}; return the @DBOS.workflow() "
            "function that runs one turn (called with the conversation's messages, the user's last)"
        )
    built: Callable[..., Any] = workflow
    return built


def configured_dbos(where: str, url: str) -> Any:
    """The DBOS instance the factory configured, on the case's system database (one the factory
    did not make is made here, as the team's ``main`` would)."""
    from dbos import DBOS
    from dbos import _dbos as dbos_module

    instance = getattr(dbos_module, "_dbos_global_instance", None)
    if instance is None:
        return DBOS(config={"name": "crashmatrix-agent", "system_database_url": url})
    configured = (getattr(instance, "_config", None) or {}).get("system_database_url")
    if configured != url:
        raise InputError(
            f"{where}: factory: DBOS is configured on {configured!r}; give it "
            "system_database_url=ctx.system_database_url (the case's own database, copied with the case)"
        )
    return instance


def check_version(where: str) -> None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = version("dbos")
    except PackageNotFoundError as error:
        raise InputError(f"{where}: the dbos adapter needs DBOS: pip install 'crashmatrix[dbos]'") from error
    parts = tuple(int(p) for p in text.split(".")[:3] if p.isdigit())
    if not SUPPORTED[0] <= parts < SUPPORTED[1]:
        raise InputError(
            f"{where}: dbos {text} is installed; this adapter supports {SUPPORTED_TEXT}: "
            f"pip install 'dbos{SUPPORTED_TEXT}'"
        )


_check_version = check_version  # every framework module's name for it (test_versions.py)


def _store_option(spec: Any) -> str:
    store = str(spec.options.get("store", "sqlite"))
    if store not in STORES:
        raise InputError(
            f"{spec.path}: options.store: {store!r} is not a system database this adapter reads; "
            "write sqlite or postgres"
        )
    return store


def check(spec: Any) -> AgentFacts:
    """At load: the installed DBOS is one this adapter reads, and its store one it knows (one
    line if not); a PostgreSQL store's server started here, before anything forks. The team's
    module is not imported: DBOS registers its workflows in a process-wide registry, and this
    process (pytest's, the CLI's) forks the lives. Its tools are the catalogue's."""
    check_version(str(spec.path))
    if _store_option(spec) == "postgres":
        from crashmatrix.harness.lives.postgres import PostgresUnavailable, ensure_server

        try:
            ensure_server()  # the lives inherit it (CRASHMATRIX_POSTGRES_URL)
        except PostgresUnavailable as error:
            raise InputError(f"{spec.path}: options.store: postgres: {error}") from error
    return AgentFacts()


def _system_database_url(life: TeamLife, store: str) -> str:
    """The case's system database: SQLite in its workspace, or its own PostgreSQL database
    (``harness.lives.postgres``: copied with the case, dropped with it). Which one is written
    down for the readers (``STORE_NAME``)."""
    case_dir = life.ctx.case_dir
    pointer = case_dir / STORE_NAME
    if not pointer.exists():
        pointer.write_text(store, encoding="utf-8")
    if store == "postgres":
        from crashmatrix.harness.lives.postgres import case_database_url

        return case_database_url(case_dir)
    return sqlite_url(life.ctx.world_dir / "workspace")


def sqlite_url(workspace: Path) -> str:
    """The SQLite system database of a case's workspace (copied with the case)."""
    return f"sqlite:///{workspace / DB_NAME}"


# How often a life's DBOS polls its internal queue. DBOS.launch()'s recovery re-enqueues each
# workflow a killed life left PENDING on that queue, and its worker polls it every second (DBOS's
# default), its first poll a full interval after launch: every recovering life waited ~1.1 s
# for its turn to start again, most of a crash case. Polled this often, the same queue hands
# the same workflow to the same worker (ENQUEUED -> PENDING, then run from its step rows).
RECOVERY_POLL_SEC = 0.05


def launch(instance: Any) -> None:
    """``DBOS.launch()`` on the configured ``instance``: DBOS's own startup and recovery, its
    internal queue (where the recovery re-enqueues what a killed life left PENDING) polled every
    ``RECOVERY_POLL_SEC`` instead of every second. A DBOS that keeps no such queue is launched as
    it is."""
    from dbos import DBOS

    internal_queue = getattr(getattr(instance, "_registry", None), "get_internal_queue", None)
    queue: Any = internal_queue() if callable(internal_queue) else None
    if isinstance(getattr(queue, "_polling_interval_sec", None), float):
        queue._polling_interval_sec = min(queue._polling_interval_sec, RECOVERY_POLL_SEC)
    DBOS.launch()


def turn_result(number: int) -> Any:
    """Turn ``number``'s workflow's result, as DBOS keeps it: waited for while
    ``DBOS.launch()``'s recovery runs it in its own thread (a killed life left it PENDING),
    read back when it is done; its error raised."""
    from dbos import DBOS

    return DBOS.retrieve_workflow(TURN.format(number)).get_result(polling_interval_sec=0.02)


def drive(life: TeamLife) -> None:
    """One life: DBOS configured on the case's database, the seams installed, DBOS launched
    (recovering what a killed life left pending), then every turn not yet started run."""
    from dbos import SetWorkflowID

    where = str(life.spec.path)
    check_version(where)
    workspace = life.ctx.world_dir / "workspace"
    url = _system_database_url(life, _store_option(life.spec))
    context = TeamContext(workspace=life.workspace, life=life.ctx.life, system_database_url=url)
    workflow = _built(life, context)
    instance = configured_dbos(where, url)
    install_seams(_workflow_seams(life))
    launch(instance)
    started = {turn.number: turn.status for turn in case_turns(workspace)}
    for number, text in enumerate(life.ctx.scenario.turns, start=1):
        workflow_id = TURN.format(number)
        try:
            if number in started:
                if started[number] in ("PENDING", "ENQUEUED"):
                    turn_result(number)  # DBOS.launch() recovers it in its own thread
                continue
            messages = [*history(read_records(workspace)), {"role": "user", "content": text}]
            with SetWorkflowID(workflow_id):
                workflow(messages)
        except Exception:
            # A turn whose workflow raised is the agent's failure (its workflow is ERROR in
            # DBOS's table, what the model was told is judged); the next turn goes on.
            traceback.print_exc(file=sys.stderr)


# -- what the common part reads ------------------------------------------------------------------

FRAMEWORK = FrameworkInfo(
    boundaries=("after_tool_call_saved", "after_running", "after_side_effect", "before_tool_result"),
    unreachable={
        "after_tool_call_pending": (
            "DBOS writes the model's reply once, when its step's row commits (after_tool_call_saved)"
        ),
        "after_approved": "a DBOS workflow asks no person here (no approval seam)",
        "after_tool_result": (
            "the tool step's committed row is the Tool Result's only record (before_tool_result); "
            "the next moment is the model's request"
        ),
    },
    why_not_torn=(
        "its session is DBOS's system database (SQLite): rows written through its own journal, "
        "there is no appended line to cut"
    ),
    why_no_power=(
        "the session is DBOS's system database: SQLite syncs from its C library, outside the "
        "harness's os.fsync recorder, and a database is not cut back by length"
    ),
    preload=("dbos", __name__),
    options=("store",),
)
