"""One life of the agent, inside the agent's process: hooks, mocks, and the real death.

``life_main`` is the child process's entry point. It records every boundary the agent
passes to ``trace.jsonl`` (one ``write`` per line, so the record survives the SIGKILL that
may follow) and, at the planned crash point, kills its own process with SIGKILL: no
``finally`` block, no ``atexit`` handler and no buffered write runs after that.

A torn write is produced the way a dying writer produces it: the first half of the line
reaches the file, then the process is killed before the rest.

The life's stderr (fd 2) goes to ``life-N.stderr`` in the case directory: what an agent
printed before it died abnormally is kept with the case, not lost in the harness's output,
and kept bounded (its head and its tail: ``harness.lives.capped_log``) however much it prints.

SQLite databases opened in a life (``sqlite3.connect``) run ``PRAGMA synchronous=OFF`` unless
the life records its syncs for a power loss (``unsynced_sqlite``): a SIGKILL keeps whatever
SQLite handed to the operating system, so a database left by a killed process is the same
with or without its syncs (SQLite's documentation of ``synchronous``: only an operating
system crash or a power loss can tell them apart), and the harness cuts no SQLite file back
at a power loss (its syncs come from C, unseen). A LangGraph checkpointer or an Agents SDK
session syncs 15-20 times a life, each sync 0.2-3 ms on these shared disks: the largest
part of a framework case's time, paid for nothing a crash here can show.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sqlite3
import ssl
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import respx

from crashmatrix.harness.agents.loading import adapter_for, load_adapter
from crashmatrix.harness.agents.protocol import MODEL_BASE_URL, LifeContext
from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.dialect import NATIVE, Dialect
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.lives import descendants
from crashmatrix.harness.lives.capped_log import cap_file, watch
from crashmatrix.harness.lives.casedir import session_path_of, stderr_path_of
from crashmatrix.harness.lives.gate import GatedTracer
from crashmatrix.harness.lives.parent_death import die_with_parent
from crashmatrix.harness.lives.server_state import in_server
from crashmatrix.harness.lives.tracer import Tracer
from crashmatrix.mock_tools.model import ScriptedModel

__all__ = ["LifeSpec", "life_main", "run_life", "unsynced_sqlite"]

EXIT_AGENT_ERROR = 3

# Loading the CA bundle costs ~150 ms; done once here, in the warm process that lives are
# forked from, instead of in every life. No request leaves the mocks, so it is never used
# for a real handshake; httpx just needs one to build a client.
_TLS = ssl.create_default_context()


@dataclass(frozen=True, slots=True)
class LifeSpec:
    case_dir: str
    scenario: Scenario
    agent: str
    life: int
    crash: CrashPoint | None = None
    # Record the session's size at every fsync, so that after the crash the injector can
    # drop what was never synced (a power loss, not just a process death).
    power_loss: bool = False
    # A clean life that leaves a first crash at every point it passes, in this directory
    # (``harness.lives.snapshots``); "" for none.
    snapshots: str = ""
    # With ``snapshots``, which points: "" every one (a clean life's first crashes), or a
    # recovering life's recovery window (``snapshots.WINDOW``, ``WINDOW_TORN``): the second
    # crashes of ``recovery@P``.
    snapshot_window: str = ""
    # A double resume's concurrent life: held at its first step until the harness opens
    # this gate (a FIFO; ``harness.lives.gate``); "" for none.
    gate: str = ""


class _Mocks:
    """The respx router every HTTP request of a life goes through: the scripted model and
    the world's services, nothing else (``assert_all_mocked``: any other request is an
    error, never a real network call).

    Built once per process, its routes calling the current life's model and services: a
    router per life was ~9% of a life's time (py-spy: its routes, their mock call lists,
    and patching httpx's transports). The fork server starts it once, before any fork
    (``keep_started``, from ``harness.lives.warmup``), so lives forked from it are intercepted
    from their first instruction and never patch anything; anywhere else, each life starts
    and stops it. Lives in one process take turns (the lock): the routes serve one life at
    a time.

    ``serving`` also gives the life its HTTP client. A started-for-good router comes with
    one client built before the fork too (a client is configuration: lives forked from the
    server each get a pristine copy of it); elsewhere each life builds and closes its own.
    """

    def __init__(self) -> None:
        from crashmatrix.mock_tools.order_api import ORDERS_HOST

        self.router = respx.MockRouter(assert_all_mocked=True, assert_all_called=False)
        self.router.post(f"{MODEL_BASE_URL}/chat/completions").mock(side_effect=self._model)
        self.router.route(host=ORDERS_HOST).mock(side_effect=self._orders)
        # crashmatrix's own servers on loopback (the model, services and relays a kind-2 or
        # framework agent's own client reaches): an agent whose client is httpx (PydanticAI
        # 2.0's) would otherwise be refused here, every request "not mocked".
        for loopback in ("127.0.0.1", "localhost"):
            self.router.route(host=loopback).pass_through()
        self._lock = threading.Lock()
        self._kept_started = False
        self._kept_http: httpx.Client | None = None
        self._serving: tuple[ScriptedModel, Any] | None = None  # the model, the order API
        self._world_dir = Path()

    def _model(self, request: httpx.Request) -> httpx.Response:
        assert self._serving is not None, "a model request outside a life"
        return self._serving[0].handle(request)

    def _orders(self, request: httpx.Request) -> httpx.Response:
        assert self._serving is not None, "an order request outside a life"
        model, orders = self._serving
        if orders is None:  # most lives never call the order API: no world opened for it
            from crashmatrix.mock_tools.order_api import OrderAPI
            from crashmatrix.mock_tools.world import World

            orders = OrderAPI(World(self._world_dir))
            self._serving = (model, orders)
        response: httpx.Response = orders.handle(request)
        return response

    def keep_started(self) -> None:
        with self._lock:
            if not self._kept_started:
                self.router.start()
                self._kept_http = _http_client()
                self._kept_started = True

    @contextlib.contextmanager
    def serving(
        self, spec: LifeSpec, case_dir: Path, tracer: Tracer, dialect: Dialect = NATIVE
    ) -> Iterator[httpx.Client]:
        from crashmatrix.harness.agents.tool_faults import UNSCRIPTED_REPLY, armed

        model = ScriptedModel(
            spec.scenario.rules,
            log_path=case_dir / "model_requests.jsonl",
            on_request=tracer.model_request,
            dialect=dialect,
            # A tool-side case: what the agent tells the model after the fault is not scripted.
            unscripted=UNSCRIPTED_REPLY if armed(case_dir) is not None else None,
        )
        with self._lock:
            self._serving = (model, None)
            self._world_dir = case_dir / "world"
            if self._kept_http is not None:
                try:
                    yield self._kept_http
                finally:
                    self._serving = None
                    self.router.reset()  # the call log: the next life's, not this one's
                return
            self.router.start()
            try:
                with _http_client() as http:
                    yield http
            finally:
                self._serving = None
                self.router.stop(quiet=True)


def _http_client() -> httpx.Client:
    return httpx.Client(timeout=30.0, verify=_TLS)


_MOCKS: _Mocks | None = None


def mocks() -> _Mocks:
    """This process's router (see ``_Mocks``)."""
    global _MOCKS
    if _MOCKS is None:
        _MOCKS = _Mocks()
    return _MOCKS


def run_life(spec: LifeSpec, tracer: Tracer) -> None:
    """The life itself, in this process: mocks up, the adapter runs the agent. Raises what
    the agent raises (``life_main`` turns that into the life's verdict)."""
    case_dir = Path(spec.case_dir)
    # Forked from a warm server: the adapter it loaded once (warm_agent.py). Elsewhere (a
    # spawned life, a life run in-process by a test) loaded afresh: nothing carries over.
    adapter = adapter_for(spec.agent) if in_server() else load_adapter(spec.agent)
    with mocks().serving(spec, case_dir, tracer, getattr(adapter, "dialect", NATIVE)) as http:
        ctx = LifeContext(
            case_dir=case_dir,
            session_path=session_path_of(case_dir),
            session_id="case",
            world_dir=case_dir / "world",
            scenario=spec.scenario,
            http=http,
            model_base_url=MODEL_BASE_URL,
            hook=tracer.boundary,
            before_append=tracer.before_append,
            approvals=spec.scenario.approvals,
            approvals_again=spec.scenario.approvals_again,
            life=spec.life,
            model_request=tracer.model_request,
            trace=lambda event: tracer.write({"life": spec.life, **event}),
            arrive=tracer.hold if isinstance(tracer, GatedTracer) else _nothing,
        )
        adapter.run_life(ctx)


def _nothing() -> None:
    """A life's ``arrive`` outside a double resume: no gate to stop at."""


def _stderr_to(path: Path) -> None:
    """Send this process's fd 2 to ``path``: the file descriptor, not just ``sys.stderr``, so
    what the interpreter, C code or a child of the agent writes there is kept too. A life
    that dies abnormally is explained with its tail (``harness.lives.injector``)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)
    os.close(fd)


def unsynced_sqlite() -> None:
    """From now on in this process, every ``sqlite3.connect`` returns a connection with
    ``synchronous=OFF`` (the module's docstring says why that changes nothing a SIGKILL can
    show). Called in the life's own process only, never in the fork server: it dies with the
    life. A library that took ``connect`` by name before the life (``from sqlite3 import
    connect`` at import) keeps the original: slower, not wrong."""
    original: Callable[..., sqlite3.Connection] = sqlite3.connect
    if getattr(original, "crashmatrix_unsynced", False):
        return

    @functools.wraps(original)
    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = original(*args, **kwargs)
        # A connection that refuses (a read-only wrapper of some library) stays as opened.
        with contextlib.suppress(sqlite3.Error):
            conn.execute("PRAGMA synchronous=OFF")
        return conn

    connect.crashmatrix_unsynced = True  # type: ignore[attr-defined]
    # setattr: the module attribute the agent's code looks up at call time.
    setattr(sqlite3, "connect", connect)  # noqa: B010


def life_main(spec: LifeSpec) -> None:
    """Entry point of the agent's process for one life."""
    die_with_parent()
    # Whatever the agent starts stays under this process while it lives, even a setsid'd
    # daemon; when it dies, the process that started it adopts them (descendants.py).
    descendants.become_subreaper()
    case_dir = Path(spec.case_dir)
    _stderr_to(stderr_path_of(case_dir, spec.life))
    # The kernel writes there for the agent and its children, unseen: cut as it grows, and
    # once more when the life ends; a life killed before that is cut by the next one.
    capping = watch(stderr_path_of(case_dir, spec.life))
    if spec.life > 1:
        cap_file(stderr_path_of(case_dir, spec.life - 1))
    if spec.power_loss:
        from crashmatrix.harness.lives.power import record_for

        record_for(spec.agent, case_dir)  # the agent's own session file, if it can (power.py)
    else:
        unsynced_sqlite()
    snapshots = None
    if spec.snapshots and spec.crash is None:
        from crashmatrix.harness.lives.snapshots import Snapshotter

        snapshots = Snapshotter(case_dir, Path(spec.snapshots), spec.life, spec.snapshot_window)
    tracer = Tracer(case_dir / "trace.jsonl", spec.life, spec.crash, snapshots)
    if spec.gate:
        tracer = GatedTracer(tracer, spec.gate)
    tracer.write({"life": spec.life, "event": "start", "pid": os.getpid()})
    try:
        run_life(spec, tracer)
    except BaseException as error:  # the life's verdict goes to a file the parent reads
        text = "".join(traceback.format_exception_only(type(error), error)).strip()
        tracer.write(
            {"life": spec.life, "event": "error", "error": text, "traceback": traceback.format_exc()}
        )
        capping.stop()
        os._exit(EXIT_AGENT_ERROR)
    capping.stop()
    tracer.write({"life": spec.life, "event": "exit"})
