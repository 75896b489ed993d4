"""Agents the harness did not write, declared in an adapter YAML (``--agent=adapter.yaml``).

Two ways in, both run UNMODIFIED agent code (docs/adapters.md walks through each):

* ``python:`` (kind 2) -- the agent's module is imported in the life process; the functions the
  YAML's ``boundaries`` name are wrapped (module attributes replaced before its ``main`` runs),
  so the life dies exactly where the agent passes a boundary, as a native agent would.
* ``command:`` (kind 3) -- any program, any language. The life process is its supervisor: it
  serves the model and the tools on loopback (``harness.agents.loopback``), starts the command, and
  kills it from the edges it sees (a tool request arrived, the effect committed, the model's
  tool calls were sent).

Both talk to the scripted model over loopback HTTP, because an agent's own HTTP client (the
openai package uses ``httpx2``) is not the one respx intercepts. Both read the user's turns and
answer approvals on stdin, driven by the YAML's prompt regexes.

The agent's session file is its own, in its own vocabulary. ``read_foreign_session`` maps it
onto our records (field and status names: seed 000 and seed 004 out of the box, more from the
YAML), and a normalised copy is kept where the judge reads sessions (``session_path_of``): at
the start of each life, before every tool request, and when a life ends normally. The world
measures ``session_bytes`` on that copy, so "running was on disk before the effect" is judged
in one coordinate system.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO, cast

from crashmatrix.harness.agents.adapter_file import (
    ForeignSpec,
    load_foreign,
)
from crashmatrix.harness.agents.conversation import Conversation, _Console
from crashmatrix.harness.agents.foreign_session import (
    _write_copy,
    read_foreign_session,
)
from crashmatrix.harness.agents.loopback import LoopbackServer
from crashmatrix.harness.agents.protocol import LifeContext
from crashmatrix.harness.agents.python_agent import (
    _import_agent,
    install_boundaries,
)
from crashmatrix.harness.agents.supervised import _pump, _stopped
from crashmatrix.harness.core.boundaries import BOUNDARIES
from crashmatrix.harness.core.records import MessageEntry
from crashmatrix.harness.core.session_log import SessionLog
from crashmatrix.harness.core.trace import CaseRun
from crashmatrix.harness.errors import HarnessError, InputError
from crashmatrix.harness.lives.parent_death import die_with_parent
from crashmatrix.harness.observation.observation import Observation
from crashmatrix.harness.observation.reading import read_observation
from crashmatrix.mock_tools.model import ScriptedModel

__all__ = ["ForeignAdapter"]
_LOOPBACK_EDGES = ("after_running", "after_side_effect")


# -- the adapter ---------------------------------------------------------------------------


def _ordered(names: set[str]) -> tuple[str, ...]:
    return tuple(b for b in BOUNDARIES if b in names)


class ForeignAdapter:
    """``AgentAdapter`` for an adapter YAML (kind 2 ``python:``, kind 3 ``command:``)."""

    def __init__(self, spec: ForeignSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.keeps_ledger = spec.keeps_ledger
        edges = set(_LOOPBACK_EDGES) if spec.tools == "harness" else set()
        if spec.kind == "python":
            mapped = {rule.boundary for rule in spec.rules}
            self.loopback_edges = frozenset(edges - mapped)
            self.boundaries = _ordered(mapped | edges)
        else:
            # The model edge needs the agent stopped while its reply is delivered: only a
            # separate process can be stopped.
            self.loopback_edges = frozenset(edges | {"after_tool_call_saved"})
            self.boundaries = _ordered(set(self.loopback_edges))

    # -- sessions ---------------------------------------------------------------------------

    def raw_session(self, case_dir: Path) -> Path:
        return case_dir / "world" / "workspace" / self.spec.session

    def read_session(self, case_dir: Path) -> SessionLog:
        """The agent's session as our records."""
        return read_foreign_session(self.raw_session(case_dir), self.spec.ledger)[0]

    def observe(self, run: CaseRun) -> Observation:
        """The case as the verdict sees it: the agent's own session mapped onto our records."""
        return read_observation(run, session=self.read_session, keeps_ledger=self.keeps_ledger)

    def _sync(self, ctx: LifeContext) -> SessionLog:
        log, lines = read_foreign_session(self.raw_session(ctx.case_dir), self.spec.ledger)
        _write_copy(ctx.session_path, lines)
        return log

    def _copy(self, ctx: LifeContext) -> None:
        self._sync(ctx)

    # -- a life -----------------------------------------------------------------------------

    def run_life(self, ctx: LifeContext) -> None:
        log = self._sync(ctx)
        received = sum(1 for e in log.entries if isinstance(e, MessageEntry) and e.message.role == "user")
        conversation = Conversation(self.spec, ctx.scenario.turns[received:], ctx)
        model = ScriptedModel(
            ctx.scenario.rules, log_path=ctx.case_dir / "model_requests.jsonl", on_request=ctx.model_request
        )
        tools = None
        if self.spec.tools == "harness":
            from crashmatrix.mock_tools.toolbox import MockToolbox
            from crashmatrix.mock_tools.world import World

            tools = MockToolbox(World(ctx.world_dir), ctx.scenario.contracts, ctx.http)
        holder: dict[str, int] = {}
        server = LoopbackServer(
            model,
            tools=tools,
            idempotency={name: c.idempotency for name, c in ctx.scenario.contracts.items()},
            on_edge=ctx.hook,
            edges=self.loopback_edges,
            freeze=lambda: _stopped(holder["pid"]) if "pid" in holder else contextlib.nullcontext(),
            before_tool=lambda: self._copy(ctx),
        )
        workspace = ctx.world_dir / "workspace"
        values = {
            "model_url": server.model_url,
            "tools_url": server.tools_url,
            "workspace": str(workspace),
            "session": str(self.raw_session(ctx.case_dir)),
            "here": str(self.spec.here),
            "python": sys.executable,
        }
        env = {
            "OPENAI_BASE_URL": server.model_url,
            "OPENAI_API_KEY": "crashmatrix",
            "CRASHMATRIX_TOOLS_URL": server.tools_url,
            "CRASHMATRIX_SESSION_PATH": values["session"],
            "CRASHMATRIX_WORKSPACE": values["workspace"],
            **{key: value.format(**values) for key, value in self.spec.env.items()},
        }
        cwd = workspace if self.spec.cwd == "workspace" else (self.spec.here / self.spec.cwd)
        try:
            if self.spec.kind == "python":
                self._run_python(ctx, server, env, cwd, conversation)
            else:
                self._run_command(ctx, server, env, cwd, conversation, values, holder)
        finally:
            server.close()
        if server.errors:
            raise HarnessError(f"loopback server failed: {server.errors[0]}")
        self._sync(ctx)

    def _run_python(
        self,
        ctx: LifeContext,
        server: LoopbackServer,
        env: Mapping[str, str],
        cwd: Path,
        conversation: Conversation,
    ) -> None:
        server.start()
        os.environ.update(env)
        os.chdir(cwd)
        module = _import_agent(self.spec)
        install_boundaries(module, self.spec.rules, ctx.hook)
        main = getattr(module, self.spec.main, None)
        if not callable(main):
            raise InputError(f"{self.spec.path}: {module.__name__} has no function {self.spec.main!r}")
        saved = sys.argv, sys.stdin, sys.stdout
        with open(ctx.case_dir / f"agent-{ctx.life}.log", "a", encoding="utf-8") as log:
            console = _Console(conversation, log)
            sys.argv = [str(self.spec.script or self.spec.module), *self.spec.argv]
            sys.stdin = sys.stdout = cast(TextIO, console)
            try:
                main()
            except SystemExit as stop:
                if stop.code not in (None, 0):
                    raise HarnessError(f"agent {self.name} exited with {stop.code!r}") from stop
            finally:
                sys.argv, sys.stdin, sys.stdout = saved

    def _run_command(
        self,
        ctx: LifeContext,
        server: LoopbackServer,
        env: Mapping[str, str],
        cwd: Path,
        conversation: Conversation,
        values: Mapping[str, str],
        holder: dict[str, int],
    ) -> None:
        argv = [part.format(**values) for part in self.spec.command]
        stderr_path = ctx.case_dir / f"agent-{ctx.life}.stderr"
        with open(stderr_path, "ab") as stderr:
            # Started before any thread of ours runs (the server only binds so far): the
            # child's pre-exec code then cannot inherit a lock another thread held.
            process = subprocess.Popen(
                argv,
                cwd=cwd,
                env={**os.environ, **env},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                start_new_session=True,  # its own group: stop/kill it and its children together
                preexec_fn=die_with_parent,  # the life's SIGKILL takes the agent with it
            )
        holder["pid"] = process.pid
        with open(ctx.case_dir / "agent-pids.txt", "a", encoding="utf-8") as pids:
            pids.write(f"{ctx.life} {process.pid}\n")
        server.start()
        pump = threading.Thread(
            target=_pump, args=(process, conversation, ctx.case_dir / f"agent-{ctx.life}.log"), daemon=True
        )
        pump.start()
        try:
            code = process.wait()
        finally:
            # Whatever it left running in its group goes with it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        pump.join(5)
        if code != 0:
            tail = stderr_path.read_text(encoding="utf-8", errors="replace")[-400:].strip()
            raise HarnessError(f"agent {self.name} exited with {code}: {tail or '(no stderr)'}")


def load_foreign_adapter(path: Path | str) -> ForeignAdapter:
    return ForeignAdapter(load_foreign(path))
