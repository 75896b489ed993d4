"""Agents the harness did not write, declared in an adapter YAML (``--agent=adapter.yaml``).

Two ways in, both run UNMODIFIED agent code (docs/adapters.md walks through each):

* ``python:`` (kind 2) -- the agent's module is imported in the life process; the functions the
  YAML's ``boundaries`` name are wrapped (module attributes replaced before its ``main`` runs),
  so the life dies exactly where the agent passes a boundary, as a native agent would; the
  tool functions ``intercept`` names are replaced by the harness's mock tools.
* ``command:`` (kind 3) -- any program, any language. The life process is its supervisor: it
  serves the model and the tools on loopback (``harness.agents.loopback``), starts the command, and
  kills it from the edges it sees (a tool request arrived, the effect committed, the model's
  tool calls were sent).

Both talk to the scripted model over loopback HTTP, because an agent's own HTTP client (the
openai package uses ``httpx2``) is not the one respx intercepts; the order and mail services
they call themselves (``services:``) are on the same loopback. Both read the user's turns and
answer approvals on stdin, driven by the YAML's prompt regexes; or, declared in ``input:``, are
started once per user message, the message in their argv, a variable or their whole stdin
(which messages a life starts with after a crash: ``conversation.per_process_messages``).

The agent's session is its own, in its own vocabulary and place (a JSONL file, a SQLite
query, a reader function, or nowhere readable). ``foreign_session.read_foreign`` maps it onto
our records, and a normalised copy is kept where native sessions are (``session_path_of``): at
the start of each life, before every tool or service request, and when a life ends normally.
The world measures ``session_bytes`` on that copy, so "running was on disk before the effect"
is judged in one coordinate system. The agent's own effects (``effects:``) are probed
(``harness.agents.effects``): at every boundary and fsync of a kind-2 agent, at every
loopback request of a kind-3 one, at the start of a life, and after it ended.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO, cast

from crashmatrix.harness.agents.adapter_file import SERVICES, ForeignSpec, load_foreign, module_file
from crashmatrix.harness.agents.conversation import Conversation, _Console, per_process_messages
from crashmatrix.harness.agents.effects import EffectProbe, count_effects, harness_wrote, watched_files
from crashmatrix.harness.agents.foreign_session import (
    AppendWatch,
    Tampered,
    _write_copy,
    read_foreign,
    tamper_saved_arguments,
    tamper_unreachable,
    tear_last_line,
)
from crashmatrix.harness.agents.loopback import LoopbackServer, McpLife
from crashmatrix.harness.agents.mcp_relay import HttpRelay, kill_stdio_relay, relay_command, sdk_problem
from crashmatrix.harness.agents.mcp_tools import mcp_tools, takes_key
from crashmatrix.harness.agents.mcp_warm import PRELOAD as MCP_PRELOAD
from crashmatrix.harness.agents.mcp_warm import WarmRelays
from crashmatrix.harness.agents.mcp_warm import available as warm_relays
from crashmatrix.harness.agents.preload import imports_of
from crashmatrix.harness.agents.protocol import LifeContext
from crashmatrix.harness.agents.python_agent import (
    Marks,
    _resolve,
    import_agent,
    install_boundaries,
    install_intercepts,
    probing_fsyncs,
)
from crashmatrix.harness.agents.supervised import _left_behind, _pump, _stopped
from crashmatrix.harness.agents.team_life import (
    AgentFacts,
    FrameworkModule,
    TeamLife,
    client_env,
    framework_module,
)
from crashmatrix.harness.agents.tool_faults import UNSCRIPTED_REPLY, mock_toolbox, tool_side
from crashmatrix.harness.agents.tool_faults import take as take_tool_side
from crashmatrix.harness.core.boundaries import BOUNDARIES, TORN_WRITE, BoundaryHook, parse_point
from crashmatrix.harness.core.capabilities import Capabilities
from crashmatrix.harness.core.categories import CategoryRule
from crashmatrix.harness.core.ledger import arguments_sha256
from crashmatrix.harness.core.records import ExecutionRecord, MessageEntry
from crashmatrix.harness.core.session_log import SessionLog, prompt_view
from crashmatrix.harness.core.toolmap import ToolMap, ToolName
from crashmatrix.harness.core.tools import ToolContext
from crashmatrix.harness.core.torn_fragments import torn_event
from crashmatrix.harness.core.trace import CaseRun, LifeRecord
from crashmatrix.harness.errors import HarnessError, InputError, SessionCorruption
from crashmatrix.harness.lives.capped_log import CappedLog, cap_file
from crashmatrix.harness.lives.capped_log import watch as watch_log
from crashmatrix.harness.lives.helper_processes import declare_relay_server, relay_server_closed
from crashmatrix.harness.lives.parent_death import die_with_parent
from crashmatrix.harness.lives.threads import quiet
from crashmatrix.harness.observation.conversation import conversation_from_requests
from crashmatrix.harness.observation.observation import Observation
from crashmatrix.harness.observation.reading import read_observation, read_requests
from crashmatrix.harness.session_file import read_session
from crashmatrix.mock_tools.model import ScriptedModel
from crashmatrix.mock_tools.world import World

__all__ = ["ForeignAdapter", "TeamLife"]
_LOOPBACK_EDGES = ("after_running", "after_side_effect")


# -- the adapter ---------------------------------------------------------------------------


def _mcp_preload(spec: ForeignSpec) -> tuple[str, ...]:
    """``tools: mcp``: the SDK, imported once by the fork server, so that each life's warm
    relay server (``harness.agents.mcp_warm``) is forked with it."""
    return MCP_PRELOAD if spec.tools == "mcp" and warm_relays() else ()


def _libraries_of(spec: ForeignSpec) -> tuple[str, ...]:
    """The modules a kind-2 agent's file imports at its top level, minus its own siblings."""
    source = spec.script if spec.script is not None else module_file(spec.module or "", spec.here)
    if source is None:
        return ()
    return imports_of(source, own={source.parent, spec.here})


def _ordered(names: set[str]) -> tuple[str, ...]:
    return tuple(b for b in BOUNDARIES if b in names)


def _why_not_torn(spec: ForeignSpec) -> str:
    """Why the harness cannot tear this agent's session writes ("" when it can: a JSONL file,
    whose last line a supervisor can cut)."""
    source = spec.source
    if source.kind == "sqlite":
        return (
            f"its session is a SQLite database ({source.path}): SQLite writes rows through its own "
            "journal, there is no appended line to cut"
        )
    if source.kind == "reader":
        return f"its session is read by {source.reader}: the harness does not know which file to tear"
    if source.kind == "none":
        return "the harness cannot read its session (readable: false), so it cannot tear it either"
    return ""


class ForeignAdapter:
    """``AgentAdapter`` for an adapter YAML (kind 2 ``python:``, kind 3 ``command:``)."""

    # Its agent keeps its own session: crashmatrix's copy is rebuilt from it, so a fault that
    # edits the session (tamper_arguments) edits the agent's own file (``tamper_arguments``).
    edits_native_session = False

    def __init__(self, spec: ForeignSpec) -> None:
        self.spec = spec
        self.name = spec.name
        # Not declared (None): judged with a ledger where a case's session shows one (observe).
        self.keeps_ledger = spec.keeps_ledger is not False
        self.dialect = spec.dialect
        served: frozenset[str] | None = None
        if spec.watched is not None:  # its own tools, or a real MCP server's (proxy mode)
            served = frozenset(SERVICES[name] for name in spec.services) | {i.tool for i in spec.intercepts}
        if spec.tools == "mcp" and (problem := sdk_problem()):
            raise InputError(f"{spec.path}: tools: mcp: {problem}")
        self.capabilities = Capabilities(
            tools=spec.dialect.tools,
            served=served,
            approvals=spec.approval_prompt is not None,
            edits_native_session=False,
            own_session_tamper=tamper_unreachable(spec.source),
        )
        # The tool and service requests it makes are edges the harness sees.
        edges = set(_LOOPBACK_EDGES) if spec.tools in ("harness", "mcp") or spec.services else set()
        self.framework: FrameworkModule | None = None
        # A framework runs a message's calls at the same time: its clean run's points are
        # grouped by call, the same in every run (``plan.enumeration.by_call``).
        self.concurrent_calls = spec.kind == "framework"
        # Its first crashes come from the clean life's snapshots wherever nothing but the
        # agent at its boundary could act during the copy (harness.lives.snapshots; the
        # manifest says why a point is left to a killed life). Kind 2 runs in the life's
        # process: the life must be one thread there (its own threads, a relay or a command
        # it started leave the point). Kind 3 is a process of its own, stopped at each edge
        # (``freeze``): it must be stopped there, with no process of its own.
        self.snapshots = spec.kind in ("python", "command")
        self.unreachable: Mapping[str, str] = {}
        if spec.kind == "framework":
            self._as_framework(spec)
            return
        if spec.kind == "python":
            mapped = {rule.boundary for rule in spec.rules}
            # The model's reply is an edge of every agent that asks the loopback model.
            self.loopback_edges = frozenset((edges | {"after_model_reply"}) - mapped)
            # Intercepted tools are the harness's mock tools run in the life: their steps
            # (ToolContext.step) are reachable.
            # So are the mock tools served over MCP (the relay's /mcp/execute runs them here).
            served_mcp = spec.tools == "mcp" and spec.mcp_proxy is None
            inside = {"during_side_effect"} if spec.intercepts or served_mcp else set()
            self.boundaries = _ordered(mapped | self.loopback_edges | inside)
        else:
            # The model edge needs the agent stopped while its reply is delivered: only a
            # separate process can be stopped. (So does an MCP response sent and not read: the
            # relay's after_side_effect, the agent's state after the effect, nothing read.)
            self.loopback_edges = frozenset(edges | {"after_model_reply"})
            self.boundaries = _ordered(set(self.loopback_edges))
        # What the fork server imports once for this agent: the libraries a kind-2 agent
        # imports (its own code runs in each life, after the life's environment is set).
        self.preload = (*(_libraries_of(spec) if spec.kind == "python" else ()), *_mcp_preload(spec))
        # Torn writes: a supervisor can cut the last line of a JSONL session after a kill
        # (see _tear_moment). Why not, for every other session (reports show it where they
        # list what this agent cannot be killed at).
        self.torn_write_unreachable = _why_not_torn(spec)
        self.tears_writes = not self.torn_write_unreachable

    def _as_framework(self, spec: ForeignSpec) -> None:
        """A framework agent (``framework:``): everything above is kind 2's, the boundaries,
        the tools it has and whether it asks are its framework module's to say."""
        self.framework = framework = framework_module(spec.framework, str(spec.path))
        info = framework.FRAMEWORK
        native = set(info.boundaries)
        # Its tools run in this process, under the framework's own tool seams (the driver
        # fires after_running / after_side_effect there); the loopback model's edge only
        # where the framework has no seam for the reply. Service requests are not edges: the
        # tool that makes one is already bracketed by the driver.
        self.loopback_edges = frozenset(set() if "after_model_reply" in native else {"after_model_reply"})
        mapped = {rule.boundary for rule in spec.rules}
        if spec.tools == "mcp":
            # Its MCP client's calls reach the relay: the edges the life sees there (the
            # framework's own seams bracket its function tools, never an MCP server's).
            self.loopback_edges |= frozenset(_LOOPBACK_EDGES) - mapped
        served_mcp = spec.tools == "mcp" and spec.mcp_proxy is None
        inside = {"during_side_effect"} if spec.intercepts or spec.tools == "harness" or served_mcp else set()
        self.boundaries = _ordered(native | mapped | inside | self.loopback_edges)
        self.unreachable = {b: why for b, why in info.unreachable.items() if b not in self.boundaries}
        self.preload = (*info.preload, *_libraries_of(spec), *_mcp_preload(spec))
        self.torn_write_unreachable = info.why_not_torn or _why_not_torn(spec)
        self.tears_writes = False
        facts = framework.check(spec) if hasattr(framework, "check") else AgentFacts()
        if facts.reaches:
            self.boundaries = _ordered(set(self.boundaries) | facts.reaches)
            self.unreachable = {b: why for b, why in self.unreachable.items() if b not in facts.reaches}
        tools = spec.dialect.tools
        if tools.tools is None and facts.tools is not None:
            # No catalogue: the suite's tools are the ones the built agent has, under the
            # suite's names; any other is not applicable to it (never a red for its absence).
            tools = ToolMap({name: ToolName(name) for name in sorted(facts.tools)})
            self.dialect = dataclasses.replace(spec.dialect, tools=tools)
        self.capabilities = dataclasses.replace(self.capabilities, tools=tools, approvals=facts.approvals)
        if not facts.approvals:
            # An agent that asks none never reaches the moments only an asking one does (its
            # framework module names them, ``ASKING_ONLY``): not reachable, with why.
            named: Mapping[str, str] = getattr(framework, "ASKING_ONLY", {})
            asking_only = {b: why for b, why in named.items() if b not in mapped | facts.reaches}
            self.boundaries = tuple(b for b in self.boundaries if b not in asking_only)
            self.unreachable = {**self.unreachable, **asking_only}
        elif not self.dialect.results.choices:
            # The person's no is worded by crashmatrix (its framework module's rejection, code
            # REJECTED), not by the team's tools: read as rejected before the team's results:
            # rules, which know only their own tools' words (a default rule read it succeeded).
            results = self.dialect.results
            rules = (CategoryRule("rejected", "code", "REJECTED"), *results.rules)
            results = dataclasses.replace(results, rules=rules)
            self.dialect = dataclasses.replace(self.dialect, results=results)
        # A store on a server is started before anything forks (harness.lives.postgres).
        self.servers = ("postgres",) if spec.options.get("store") == "postgres" else ()

    # -- sessions ---------------------------------------------------------------------------

    def workspace(self, case_dir: Path) -> Path:
        return case_dir / "world" / "workspace"

    def raw_session(self, case_dir: Path) -> Path:
        return self.workspace(case_dir) / self.spec.session

    def power_session(self, case_dir: Path) -> Path | str:
        """The file a power loss cuts back to its last fsync (``harness.lives.power``), or
        why a power loss cannot act on this agent."""
        if self.framework is not None:
            return self.framework.FRAMEWORK.why_no_power or (
                f"its session is {self.spec.framework}'s store: the harness does not know which file to cut"
            )
        if self.spec.kind != "python":
            return (
                "a black box's fsyncs are not visible to the harness (kind 3: the agent is a "
                "separate process), so its synced bytes cannot be told from the rest"
            )
        source = self.spec.source
        if source.kind == "jsonl":
            return self.raw_session(case_dir)
        if source.kind == "sqlite":
            return (
                f"the session is a SQLite database ({source.path}): SQLite syncs from its C library, "
                "which the harness's os.fsync recorder does not see, and a database is not cut back "
                "by length"
            )
        if source.kind == "reader":
            return f"the session is read by {source.reader}: the harness does not know which file to cut"
        return "the harness cannot read the agent's session (readable: false)"

    def read_session(self, case_dir: Path) -> SessionLog:
        """The agent's session as our records."""
        return read_foreign(self.spec.source, self.workspace(case_dir))[0]

    def _session_size(self, case_dir: Path) -> int:
        """The session's size in the normalised copy's coordinates, now (-1: unreadable).

        A session the agent left unreadable (a line appended after a torn one) is a size
        not known, never an exception: a probe runs in its life and after it, and the
        verdict names the bad line once the case is over (``reading.unreadable_session``)."""
        if not self.spec.source.readable:
            return -1
        try:
            return self.read_session(case_dir).size
        except SessionCorruption:
            return -1

    def observe(self, run: CaseRun) -> Observation:
        """The case as the verdict sees it: the agent's own session mapped onto our records,
        and its own effects counted in the suite's terms."""
        unreadable = "" if self.spec.source.readable else f"adapter {self.name} says session: readable: false"
        observation = read_observation(
            run,
            session=self.read_session,
            keeps_ledger=self.keeps_ledger,
            session_unavailable=unreadable,
            dialect=self.dialect,
        )
        counts = count_effects(self.spec.effects, self.workspace(run.case_dir))
        merged = dict(observation.world.counts)
        for key, value in counts.items():
            merged[key] = merged.get(key, 0) + value
        # A tool its effects: show only as files is seen only where those files are.
        files = watched_files(
            self.spec.effects,
            [SERVICES[name] for name in self.spec.services if name in SERVICES]
            + [intercept.tool for intercept in self.spec.intercepts],
        )
        world = dataclasses.replace(
            observation.world,
            counts=merged,
            watched=self.spec.watched,
            watched_files=files if self.spec.watched is not None else {},
        )
        return dataclasses.replace(observation, world=world, **self._ledger_of(observation))

    def _ledger_of(self, observation: Observation) -> dict[str, Any]:
        """Whether this case is judged with a ledger, and why not.

        Declared (``session.keeps_ledger``, or a ledger mapping): as declared, in every case, so
        a ledgered agent that lost its ledger lines is red (no running record), never excused.
        Not declared: the case's session decides. One that holds a ledger record is judged as a
        ledger; one with none (a naive agent: a conversation and nothing else) is judged on the
        world, its Tool Results and its conversation, the ledger checks not applicable with
        this reason: never red for a ledger it never claimed, never passed on one it lacks (a
        ledgered agent that lost every ledger line of a case is n.a. there unless it declares)."""
        if not self.keeps_ledger:
            if not self.spec.source.readable:
                return {}  # the session cannot be read: read_observation says so
            if self.framework is not None:
                # A framework module may say why its store is no ledger (``WHY_NO_LEDGER``).
                why = getattr(self.framework, "WHY_NO_LEDGER", "")
                default = f"{self.spec.framework} keeps a conversation, no ledger of attempts"
                return {"no_ledger": why or default}
            return {"no_ledger": f"adapter {self.name} says session.keeps_ledger: false"}
        if self.spec.keeps_ledger is not None or observation.session is None:
            return {}
        if any(isinstance(entry, ExecutionRecord) for entry in observation.session.entries):
            return {}
        return {
            "keeps_ledger": False,
            "no_ledger": (
                f"its session holds no {self.spec.ledger.ledger_type!r} record and adapter "
                f"{self.name} does not declare session.keeps_ledger"
            ),
        }

    def _sync(self, ctx: LifeContext) -> SessionLog:
        try:
            log, lines = read_foreign(self.spec.source, self.workspace(ctx.case_dir))
        except SessionCorruption:
            # The agent made its own session unreadable (its bug: the verdict says where):
            # its life goes on, with the copy as it could last be read.
            return read_session(ctx.session_path)
        if self.spec.source.readable:
            _write_copy(ctx.session_path, lines)
        return log

    def _copy(self, ctx: LifeContext) -> None:
        self._sync(ctx)

    # -- effects ----------------------------------------------------------------------------

    def _probe(self, case_dir: Path, world: World, last_bytes: int, recorded: Any) -> EffectProbe:
        return EffectProbe(
            self.spec.effects,
            self.workspace(case_dir),
            world,
            lambda: self._session_size(case_dir),
            last_bytes=last_bytes,
            recorded=recorded,
        )

    def after_life(self, case_dir: Path, life: LifeRecord, trace: Sequence[Mapping[str, Any]]) -> None:
        """In the harness's process, after a life ended (killed or not): the effects that
        appeared after its last probe. They happened after the size that probe saw.

        A life killed at a ``torn_write`` point then has its session's last line torn: the
        harness's write (``harness_wrote``), and a line the writer never finished was never an
        effect, should the session also be an effect source. The probe comes first (a tear
        moment follows a probe, with nothing written since: it finds only the dead life's)."""
        ended = getattr(self.framework, "after_life", None)
        if callable(ended):
            ended(case_dir)  # the framework's own end of a life (Temporal: its server stopped)
        if self.spec.effects:
            mine = [event for event in trace if event.get("life") == life.life]
            probes = [int(e["bytes"]) for e in mine if e.get("event") == "probe"]
            pids = [
                int(e["pid"]) for e in mine if e.get("event") == "start" and isinstance(e.get("pid"), int)
            ]
            with World(case_dir / "world") as world:
                probe = self._probe(case_dir, world, probes[-1] if probes else -1, lambda size: None)
                probe.probe(f"after life {life.life} ({life.status})", pid=pids[-1] if pids else None)
        if life.status == "crashed" and (life.crash or "").startswith(f"{TORN_WRITE}["):
            self._tear(case_dir, life)
            self.harness_wrote(case_dir, TORN_WRITE, erases=True)

    def harness_wrote(self, case_dir: Path, by: str, *, erases: bool = False) -> None:
        """In the harness's process, right after the harness wrote to the agent's world (a
        colleague's edit between lives, a power loss's rollback): what that changed in the
        ``effects:`` sources is recorded as the harness's, never as the agent's effect."""
        if not self.spec.effects:
            return
        with World(case_dir / "world") as world:
            harness_wrote(
                self.spec.effects,
                self.workspace(case_dir),
                world,
                lambda: self._session_size(case_dir),
                by,
                erases=erases,
            )

    def tamper_arguments(self, case_dir: Path, call_id: str, arguments: Mapping[str, Any]) -> Tampered:
        """In the harness's process, between lives: the saved tool call's arguments edited in
        the agent's own session, where its mapping finds the call (``harness.lives.between``),
        under the agent's argument names (its ``catalogue:``), as the model would send them."""
        tools = self.dialect.tools

        def shape(tool: str, suite: Mapping[str, Any]) -> Mapping[str, Any]:
            return tools.agent_arguments(tools.suite_name(tool), suite)

        return tamper_saved_arguments(self.spec.source, self.workspace(case_dir), call_id, arguments, shape)

    def _hooked(self, hook: BoundaryHook, probe: EffectProbe) -> BoundaryHook:
        """The life's hook, with a probe first: the moment the agent passed a boundary is a
        moment its effects are known at (and the hook may never return)."""

        def probed(boundary: str, tool_call_id: str) -> None:
            probe.probe(f"{boundary}[{tool_call_id}]")
            hook(boundary, tool_call_id)

        return probed

    # -- torn writes ------------------------------------------------------------------------
    #
    # A torn write is the writer dying in the middle of a session line. A native agent's
    # appends go through ``ctx.before_append``, which writes half the line and kills. A
    # foreign agent appends with its own code, so the harness tears on the supervisor's side,
    # which both kinds allow honestly: at a moment the agent has done nothing since its last
    # line (kind 2: it fsyncs its session, in our process; kind 3: one of its requests
    # arrives while it waits, stopped first), that line is offered to the tracer as the
    # append it is (``torn_write[call:label]`` in the trace, so a clean run lists it). At the
    # planned point the life dies there and, once it is dead, ``after_life`` cuts the line in
    # half: the file is then exactly what a writer killed in that line leaves. Intercepting
    # the agent's writes instead would mean replacing ``open``/``write`` in its process (and
    # is impossible for a black box); the cut needs neither.

    def _tear_moment(self, ctx: LifeContext, watch: AppendWatch, scratch: Path) -> None:
        line = watch.last_new_line()
        if line is not None:
            # The tracer labels the line in our vocabulary; at the planned point it writes
            # its half to the scratch file (the agent's own line is cut after the death).
            ctx.before_append(scratch, line)

    def _on_session_sync(self, ctx: LifeContext, watch: AppendWatch, scratch: Path) -> Any:
        """Kind 2: after each fsync of the agent's session file (by inode: any fd, any path)."""
        path = self.raw_session(ctx.case_dir)

        def synced(fd: int) -> None:
            try:
                synced_file, session = os.fstat(fd), os.stat(path)
            except (OSError, ValueError):
                return
            if (synced_file.st_dev, synced_file.st_ino) == (session.st_dev, session.st_ino):
                self._tear_moment(ctx, watch, scratch)

        return synced

    def _on_request_tearing(
        self, ctx: LifeContext, watch: AppendWatch, scratch: Path, then: Any, holder: dict[str, int]
    ) -> Any:
        """Kind 3: at the arrival of each of its requests (it waits for the answer, so it
        wrote nothing since). Stopped while the tracer decides, so that a kill there leaves
        it no instant to write another line before the kernel kills it with the life."""
        lock = threading.Lock()

        def arrived(route: str) -> None:
            then(route)
            with lock:
                line = watch.last_new_line()
                if line is None:
                    return
                with _stopped(holder["pid"]) if "pid" in holder else contextlib.nullcontext():
                    ctx.before_append(scratch, line)

        return arrived

    def _tear(self, case_dir: Path, life: LifeRecord) -> None:
        """After a life died at a torn_write point: cut the agent's last line in half, and
        say in the trace whether that happened (a tear that could not act is no pass)."""
        session = self.raw_session(case_dir)
        torn = tear_last_line(session)
        if torn:  # the fragment the cut left, to follow into the final session (torn_fragments)
            start, kept = torn
            with open(session, "rb") as cut:
                cut.seek(start)
                fragment = cut.read(kept)
            point = parse_point(life.crash or "")
            where = str(session.relative_to(case_dir)) if session.is_relative_to(case_dir) else str(session)
            # After the tracer's own (the half line it wrote to the scratch file): the last wins.
            with open(case_dir / "trace.jsonl", "a", encoding="utf-8") as out:  # the harness's own line
                event = torn_event(life.life, point.tool_call_id, point.label, where, start, fragment)
                out.write(json.dumps(event, ensure_ascii=False) + "\n")
        detail = (
            f"cut the last line of {session.name} after {torn[1]} of its bytes"
            if torn
            else f"{session.name} had no complete last line to tear"
        )
        event = {
            "life": life.life,
            "event": "fault",
            "fault": TORN_WRITE,
            "acted": bool(torn),
            "detail": detail,
        }
        with open(case_dir / "trace.jsonl", "a", encoding="utf-8") as out:  # the harness's own line
            out.write(json.dumps(event, ensure_ascii=False) + "\n")

    # -- interception -----------------------------------------------------------------------

    def _run_tool(self, ctx: LifeContext, toolbox: Any) -> Any:
        """An intercepted call, run by the mock tools under the identities the agent's ledger
        gives it now (its latest record of the call: the attempt that is running)."""

        def run(tool: str, arguments: Mapping[str, Any], call_id: str, key: str | None) -> Mapping[str, Any]:
            log = self._sync(ctx)  # the world measures session_bytes on the fresh copy
            latest = next(
                (
                    e
                    for e in reversed(log.entries)
                    if isinstance(e, ExecutionRecord) and e.tool_call_id == call_id
                ),
                None,
            )
            execution_id = latest.execution_id if latest else f"{call_id}:exec"
            # The key the function was given when it takes one (what production would send);
            # else the one the agent's ledger recorded for the running attempt.
            ledger_key = (latest.idempotency_key or "") if latest else ""
            tool_ctx = ToolContext(
                call_id,
                execution_id,
                key if key is not None else ledger_key,
                arguments_sha256(arguments),
                # The mock tool runs in this life: its steps are crash points like the
                # reference agent's (a half-done effect), reached through the same hook.
                step=lambda: ctx.hook("during_side_effect", call_id),
            )
            observation = toolbox.execute(tool, arguments, tool_ctx)
            contract = ctx.scenario.contracts.get(tool)
            idempotency = contract.idempotency if contract else "non_idempotent"
            result: Mapping[str, Any] = observation.to_result(
                execution_id=execution_id, idempotency=idempotency
            )
            return result

        return run

    # -- a life -----------------------------------------------------------------------------

    def _mcp_life(self, ctx: LifeContext, relays: Sequence[HttpRelay]) -> McpLife:
        """What the loopback server's ``/mcp/*`` routes need: the suite's tools as MCP tools,
        the case's tool-side fault, the trace, and how to kill a relay (``tool_server_died``:
        an HTTP relay comes back on its port; a stdio one is the agent's to start again)."""
        contracts = ctx.scenario.contracts

        def kill(pid: int) -> None:
            if relays:
                relays[0].kill(pid)
            else:
                kill_stdio_relay(pid)

        def attempt(call_id: str) -> tuple[str, str] | None:
            if not self.spec.source.readable:
                return None
            log = self._sync(ctx)
            mine = [e for e in log.entries if isinstance(e, ExecutionRecord) and e.tool_call_id == call_id]
            return (mine[-1].execution_id, mine[-1].idempotency_key or "") if mine else None

        def step(call_id: str) -> None:
            ctx.hook("during_side_effect", call_id)

        return McpLife(
            tools=mcp_tools(contracts),
            keyed=frozenset(name for name, contract in contracts.items() if takes_key(contract)),
            take_fault=lambda call_id: take_tool_side(ctx.case_dir, call_id),
            trace=ctx.trace,
            kill_relay=kill,
            attempt=attempt,
            # An agent in this process can die between the steps of an effect, as an
            # intercepted one does; a separate process is killed from the edges it sees.
            step=None if self.spec.kind == "command" else step,
        )

    def _conversation(self, ctx: LifeContext, log: SessionLog) -> SessionLog:
        """What the agent has said and been told so far: its session, or, when the harness
        cannot read that, the conversation the model saw (its requests)."""
        if self.spec.source.readable:
            return log
        return conversation_from_requests(
            read_requests(ctx.case_dir), ctx.scenario.rules, dialect=self.dialect
        )

    def run_life(self, ctx: LifeContext) -> None:
        if ctx.life == 1 and self.spec.workspace_from is not None:
            _seed_workspace(self.spec.workspace_from, ctx.world_dir / "workspace")
        log = self._conversation(ctx, self._sync(ctx))
        received = sum(1 for e in log.entries if isinstance(e, MessageEntry) and e.message.role == "user")
        conversation = Conversation(self.spec, ctx.scenario.turns[received:], ctx)
        # An agent started once per message: the messages of this life's processes.
        messages = per_process_messages(conversation.turns, log.entries) if self.spec.per_process else None
        from crashmatrix.harness.agents.tool_faults import armed

        model = ScriptedModel(
            ctx.scenario.rules,
            log_path=ctx.case_dir / "model_requests.jsonl",
            on_request=ctx.model_request,
            dialect=self.dialect,
            # A tool-side case: what the agent tells the model after the fault is not scripted.
            unscripted=UNSCRIPTED_REPLY if armed(ctx.case_dir) is not None else None,
        )
        world = World(ctx.world_dir)
        probe = self._probe(
            ctx.case_dir, world, -1, lambda size: ctx.trace({"event": "probe", "bytes": size})
        )
        # Before the first life: the world as the scenario made it. Later: effects found now
        # appeared while no life ran (after the harness's probe of the life before).
        probe.probe(f"start of life {ctx.life}", baseline=ctx.life == 1)
        hook = self._hooked(ctx.hook, probe)
        from crashmatrix.mock_tools.toolbox import MockToolbox

        toolbox = MockToolbox(world, ctx.scenario.contracts, ctx.http)  # the loopback's: it is the tool side
        # The mock tools this process runs itself (an ``intercept:``ed function, a framework
        # team's tools: harness): their own tool side, where the tool-side columns act.
        in_process = mock_toolbox(ctx, "in process", world)
        services: dict[str, Any] = {}
        if "orders" in self.spec.services:
            from crashmatrix.mock_tools.order_api import OrderAPI

            services["orders"] = OrderAPI(world)
        if "mail" in self.spec.services:
            from crashmatrix.mock_tools.mail_api import MailAPI

            services["mail"] = MailAPI(world)
        holder: dict[str, int] = {}
        relays: list[HttpRelay] = []  # the HTTP relay, once started (tools: mcp, transport: http)
        self._relays = relays  # this life's (a life is a process of its own)
        on_request = lambda route: probe.probe(f"request {route}")  # noqa: E731
        on_sync: Any = None
        if self.tears_writes:
            watch = AppendWatch(self.raw_session(ctx.case_dir), self.spec.source.ledger)
            scratch = ctx.case_dir / "torn-write.part"
            scratch.touch()
            if self.spec.kind == "python":
                on_sync = self._on_session_sync(ctx, watch, scratch)
            else:
                on_request = self._on_request_tearing(ctx, watch, scratch, on_request, holder)
        # A concurrent life of a double resume is held at its first request, whatever the
        # route (harness.lives.gate): the moment it has read its session and decided.
        on_request = _arriving(ctx.arrive, on_request)
        # tools: mcp: every relay of this life is forked from its warm server, bound here, forked
        # below before the loopback server's threads run (harness.agents.mcp_warm).
        warm = WarmRelays() if self.spec.tools == "mcp" and warm_relays() else None
        self._warm = warm
        server = LoopbackServer(
            model,
            # Proxy mode: the team's own MCP server runs the tools, never the mock ones.
            tools=toolbox if self.spec.watched is None else None,
            services=services,
            idempotency={name: c.idempotency for name, c in ctx.scenario.contracts.items()},
            on_edge=hook,
            edges=self.loopback_edges,
            freeze=lambda: _stopped(holder["pid"]) if "pid" in holder else contextlib.nullcontext(),
            # Only a separate process can be stopped apart from the server.
            stoppable=self.spec.kind == "command",
            before_tool=lambda: self._copy(ctx),
            on_request=on_request,
            mcp=self._mcp_life(ctx, relays) if self.spec.tools == "mcp" else None,
            # The tool-side columns on the tools and services routes (over MCP: the relay's).
            tool_side=None if self.spec.tools == "mcp" else tool_side(ctx.case_dir, ctx.trace, "loopback"),
        )
        server.remember(prompt_view(log.entries))
        workspace = ctx.world_dir / "workspace"
        values = {
            "model_url": server.model_url,
            "tools_url": server.tools_url,
            "orders_url": server.orders_url,
            "mail_url": server.mail_url,
            "workspace": str(workspace),
            "session": str(self.raw_session(ctx.case_dir)),
            "here": str(self.spec.here),
            "python": sys.executable,
            "mcp_command": shlex.join(relay_command(server.base_url)),
            "mcp_url": "",
        }
        # Proxy mode: the relay passes the calls on to the team's server (mcp.proxy, filled in).
        proxy = self.spec.mcp_proxy
        upstream = [] if proxy is None else proxy.formatted(values, here=str(self.spec.here)).relay_args()
        values["mcp_command"] = shlex.join(
            [*relay_command(server.base_url), *upstream]
            if warm is None
            else warm.command(["--life", server.base_url, *upstream])
        )
        if self.spec.tools == "mcp" and self.spec.mcp_transport == "http":
            stderr = ctx.case_dir / f"mcp-relay-{ctx.life}.stderr"
            relays.append(HttpRelay(server.base_url, stderr, ctx.trace, upstream=upstream, warm=warm))
            values["mcp_url"] = relays[0].url
        env = {
            **client_env(server.model_url),
            "CRASHMATRIX_TOOLS_URL": server.tools_url,
            "CRASHMATRIX_ORDERS_URL": server.orders_url,
            "CRASHMATRIX_MAIL_URL": server.mail_url,
            "CRASHMATRIX_SESSION_PATH": values["session"],
            "CRASHMATRIX_WORKSPACE": values["workspace"],
            **(
                {"CRASHMATRIX_MCP_COMMAND": values["mcp_command"], "CRASHMATRIX_MCP_URL": values["mcp_url"]}
                if self.spec.tools == "mcp"
                else {}
            ),
            **{key: value.format(**values) for key, value in self.spec.env.items()},
        }
        cwd = workspace if self.spec.cwd == "workspace" else (self.spec.here / self.spec.cwd)
        try:
            if warm is not None:
                warm.fork()
                assert warm.pid is not None
                # Its relays stop for a copy at an edge where the agent is stopped.
                declare_relay_server(warm.pid, warm.command([]))
            for relay in relays:
                relay.start()  # before the agent, which may connect at once
            if self.spec.kind == "python":
                self._run_python(
                    ctx, server, env, cwd, conversation, hook, probe, in_process, on_sync, messages
                )
            elif self.framework is not None:
                self._run_framework(ctx, server, env, cwd, hook, probe, in_process)
            else:
                self._run_command(ctx, server, env, cwd, conversation, values, holder, messages)
        finally:
            server.close()
            for http_relay in relays:
                http_relay.close()
            if warm is not None:
                if warm.pid is not None:
                    relay_server_closed(warm.pid)
                warm.close()
        if server.errors:
            raise HarnessError(f"loopback server failed: {server.errors[0]}")
        probe.probe(f"end of life {ctx.life}")
        self._sync(ctx)

    def _run_python(
        self,
        ctx: LifeContext,
        server: LoopbackServer,
        env: Mapping[str, str],
        cwd: Path,
        conversation: Conversation,
        hook: BoundaryHook,
        probe: EffectProbe,
        toolbox: Any,
        on_sync: Any = None,
        messages: Sequence[str] | None = None,
    ) -> None:
        """Kind 2: the agent's ``main`` in this process, once (turns on stdin), or once per
        message (``messages``), each a fresh start as a new process would be: its own modules
        imported afresh (its module state is a process's), the functions the rules wrap
        restored first (a library's attribute wrapped twice would fire twice)."""
        server.start()
        os.environ.update(env)
        os.chdir(cwd)
        with (
            CappedLog(ctx.case_dir / f"agent-{ctx.life}.log") as log,
            probing_fsyncs(probe, on_sync),
        ):
            if messages is None:
                self._main(ctx, hook, toolbox, conversation, log, (), None)
                return
            environ = dict(os.environ)
            for number, message in enumerate(messages):
                if number:
                    # The previous start's modules: a new process imports them again (a
                    # life's first start is a fresh fork, its preloaded libraries kept);
                    # and it starts where the last one was started, with its environment.
                    for name in [name for name in sys.modules if self._owns(name)]:
                        del sys.modules[name]
                    os.chdir(cwd)
                    os.environ.clear()
                    os.environ.update(environ)
                self._main(ctx, hook, toolbox, self._conversation_for(ctx, message), log, (message,), message)

    def _main(
        self,
        ctx: LifeContext,
        hook: BoundaryHook,
        toolbox: Any,
        conversation: Conversation,
        log: CappedLog,
        turn: tuple[str, ...],
        message: str | None,
    ) -> None:
        """One start of a kind-2 agent: imported, its rules installed, ``main`` called with the
        message where ``input.via`` puts it (``turn``: the message, for ``{turn}``). Its argv,
        stdin, stdout and message variable are in place before the import: a script may read
        them at its top level, as it runs."""
        saved = sys.argv, sys.stdin, sys.stdout
        variable = self.spec.input_name if self.spec.input_via == "env" else ""
        console = _Console(conversation, log)
        args = [part.replace("{turn}", turn[0]) if turn else part for part in self.spec.argv]
        sys.argv = [str(self.spec.script or self.spec.module), *args]
        sys.stdin = sys.stdout = cast(TextIO, console)
        if variable:
            os.environ[variable] = message or ""
        originals: list[tuple[Any, str, Any]] = []
        try:
            module = import_agent(self.spec)
            named = [rule.function for rule in self.spec.rules] + [i.function for i in self.spec.intercepts]
            originals = [_resolve(module, dotted, "the adapter's rules") for dotted in named]
            # Intercepted first: a boundary rule on the same function then wraps the mock tool.
            marks = Marks(hook, ctx.trace)  # the trace says which adapter rule fired (collection reads it)
            run_tool = self._run_tool(ctx, toolbox)
            install_intercepts(module, self.spec.intercepts, marks, run_tool, self.spec.here)
            install_boundaries(module, self.spec.rules, hook, marks)
            main = getattr(module, self.spec.main, None)
            if not callable(main):
                raise InputError(f"{self.spec.path}: {module.__name__} has no function {self.spec.main!r}")
            try:
                # What main() returns is its exit status, as under ``sys.exit(main())``.
                code = main()
            except SystemExit as stop:
                code = stop.code
        finally:
            sys.argv, sys.stdin, sys.stdout = saved
            console.flush()  # what it printed last, into its log before that closes
            if variable:
                os.environ.pop(variable, None)
            # The next start wraps the originals again, never a wrapper (it would fire twice).
            for owner, attr, original in reversed(originals):
                setattr(owner, attr, original)
        if code not in (None, 0):
            raise HarnessError(f"agent {self.name} exited with {code!r}{_resumed(message)}")

    def _owns(self, name: str) -> bool:
        """Whether module ``name`` is the agent's own code (imported afresh at each start of an
        agent started per message): its script and what lies beside it, or its package."""
        if self.spec.module:
            top = self.spec.module.partition(".")[0]
            return name == top or name.startswith(f"{top}.")
        assert self.spec.script is not None
        if name == f"crashmatrix_agent_{self.spec.script.stem}":
            return True
        file = getattr(sys.modules.get(name), "__file__", None)
        # Its siblings are imported from the script's resolved folder (import_agent puts it
        # on sys.path): a prefix says it, where resolving every module's path would cost a
        # tenth of a second a start. A virtualenv inside that folder holds libraries.
        folder = f"{self.spec.script.parent}{os.sep}"
        return isinstance(file, str) and file.startswith(folder) and "site-packages" not in file

    def _conversation_for(self, ctx: LifeContext, message: str) -> Conversation:
        """The stdin of an agent started for ``message``: the message, then end of input,
        when stdin is how it takes it; else only the approvals it asks (a turn prompt: end of
        input)."""
        text = [message] if self.spec.input_via == "stdin" and message else []
        return Conversation(self.spec, text, ctx)

    def _run_framework(
        self,
        ctx: LifeContext,
        server: LoopbackServer,
        env: Mapping[str, str],
        cwd: Path,
        hook: BoundaryHook,
        probe: EffectProbe,
        toolbox: Any,
    ) -> None:
        """A framework agent's life: prepared as kind 2's (server, environment, workspace, the
        team's module with its rules), then driven by its framework module (``drive``) instead
        of a ``main()``: the team's agent built by its factory, resumed, sent the turns."""
        assert self.framework is not None
        server.start()
        os.environ.update(env)
        os.chdir(cwd)
        module = import_agent(self.spec)
        marks = Marks(hook, ctx.trace)
        run_tool = self._run_tool(ctx, toolbox)
        install_intercepts(module, self.spec.intercepts, marks, run_tool, self.spec.here)
        install_boundaries(module, self.spec.rules, hook, marks)
        factory = getattr(module, self.spec.main, None)
        if not callable(factory):
            raise InputError(
                f"{self.spec.path}: factory: {module.__name__} has no function {self.spec.main!r}"
            )
        life = TeamLife(
            spec=self.spec,
            ctx=ctx,
            hook=hook,
            model_url=server.model_url,
            toolbox=toolbox,
            run_tool=run_tool,
            sync=lambda: self._sync(ctx),
            workspace=cwd,
            module=module,
            factory=factory,
            options=self.spec.options,
        )
        with CappedLog(ctx.case_dir / f"agent-{ctx.life}.log") as log, probing_fsyncs(probe):
            saved = sys.stdout
            sys.stdout = cast(TextIO, _Printed(log))  # what the team's code prints, kept bounded
            try:
                self.framework.drive(life)
            finally:
                sys.stdout = saved

    def _run_command(
        self,
        ctx: LifeContext,
        server: LoopbackServer,
        env: Mapping[str, str],
        cwd: Path,
        conversation: Conversation,
        values: Mapping[str, str],
        holder: dict[str, int],
        messages: Sequence[str] | None = None,
    ) -> None:
        """Kind 3: the command, once (turns on stdin), or once per message (``messages``),
        one after the other, each waited for before the next starts."""
        if ctx.life > 1:
            cap_file(ctx.case_dir / f"agent-{ctx.life - 1}.stderr")  # killed before its last cut
        if messages is None:
            self._start_command(ctx, server, env, cwd, conversation, values, holder, None)
            return
        for number, message in enumerate(messages):
            conversation = self._conversation_for(ctx, message)
            self._start_command(ctx, server, env, cwd, conversation, values, holder, message, number == 0)

    def _start_command(
        self,
        ctx: LifeContext,
        server: LoopbackServer,
        env: Mapping[str, str],
        cwd: Path,
        conversation: Conversation,
        values: Mapping[str, str],
        holder: dict[str, int],
        message: str | None,
        first: bool = True,
    ) -> None:
        """One process of a kind-3 agent, run to its end: ``message`` (None: turns on stdin)
        in its argv, its environment or as its whole stdin, as ``input.via`` says. ``first``:
        the life's first process, which starts the server once it is running."""
        via = self.spec.input_via
        argv = [part.format(**values, turn=message or "") for part in self.spec.command]
        if message is not None and via == "env":
            env = {**env, self.spec.input_name: message}
        # Per message, stdin is the message (via: stdin) or the approvals; an agent that asks
        # none reads end of input at once, as a command started with no one typing does.
        closed = message is not None and via != "stdin" and self.spec.approval_prompt is None
        stderr_path = ctx.case_dir / f"agent-{ctx.life}.stderr"
        with open(stderr_path, "ab") as stderr:
            # The first is started before any thread of ours runs (the server only binds so
            # far; the life's stderr watcher sleeps holding no lock): the child's pre-exec code
            # then cannot inherit a lock another thread held. A later one (one process per
            # message) starts while the server's threads wait for a request no agent can send.
            process = subprocess.Popen(
                argv,
                cwd=cwd,
                env={**os.environ, **env},
                stdin=subprocess.DEVNULL if closed else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                start_new_session=True,  # its own group: stop/kill it and its children together
                # The life's SIGKILL takes the agent with it (the life's pid, known here).
                preexec_fn=functools.partial(die_with_parent, os.getpid()),
            )
        holder["pid"] = process.pid
        # Its stderr is written by the kernel for it: kept bounded by cutting it as it grows.
        capping = watch_log(stderr_path)
        with open(ctx.case_dir / "agent-pids.txt", "a", encoding="utf-8") as pids:
            pids.write(f"{ctx.life} {process.pid}\n")
        if message is not None and via == "stdin" and process.stdin is not None:
            # Its whole stdin, as ``echo "$message" | agent`` gives it ("" resumes: nothing).
            with contextlib.suppress(BrokenPipeError):
                process.stdin.write((f"{message}\n" if message else "").encode("utf-8"))
            with contextlib.suppress(BrokenPipeError):
                process.stdin.close()
        if first:
            server.start()
        pump = threading.Thread(
            target=_pump, args=(process, conversation, ctx.case_dir / f"agent-{ctx.life}.log"), daemon=True
        )
        pump.start()
        try:
            with quiet():  # it only waits: a snapshot at the agent's edge need not wait for it
                code = process.wait()
            # The life's MCP relays are the harness's, not something the agent left: its HTTP
            # relay, and the warm server with every relay forked there (the agent's own child
            # is the launcher it spawned, harness.agents.mcp_launch).
            own = [relay.pid for relay in self._relays if relay.pid is not None]
            if self._warm is not None and self._warm.pid is not None:
                own.append(self._warm.pid)
            _left_behind(ctx.trace, own)
        finally:
            # Whatever it left running in its group goes with it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        pump.join(5)
        capping.stop()
        if conversation.unanswered is not None:
            raise conversation.unanswered  # the pump killed it: an approval no answer fits
        if code < 0:
            # Killed by a signal nobody planned (a tool that kills it, the OOM killer): the
            # agent died, as in a crash. Its life dies with it, so the injector restarts it
            # like any crash and names the unplanned death (not an error of the harness).
            _die_with_agent(ctx, -code)
        if code != 0:
            tail = stderr_path.read_text(encoding="utf-8", errors="replace")[-400:].strip()
            raise HarnessError(
                f"agent {self.name} exited with {code}{_resumed(message)}: {tail or '(no stderr)'}"
            )


class _Printed:
    """``sys.stdout`` of a framework agent's life: what the team's code prints, into its
    bounded log (nobody reads its output: its turns go through the framework's API)."""

    def __init__(self, log: CappedLog) -> None:
        self._log = log

    def write(self, text: str) -> int:
        self._log.write(text.encode("utf-8", "replace"))
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _arriving(arrive: Any, on_request: Any) -> Any:
    """``on_request`` that first passes the life's gate (``arrive``: a no-op outside a double
    resume)."""

    def arrived(route: str) -> None:
        arrive()
        on_request(route)

    return arrived


def _resumed(message: str | None) -> str:
    """What to add to "the agent exited with N" when it was started with no new message."""
    if message != "":
        return ""
    return (
        " when started with an empty message to finish a turn a killed process left unfinished "
        "(an agent started once per message must take an empty one as 'resume only': recover, "
        "finish the turn, exit 0)"
    )


def _seed_workspace(folder: Path, workspace: Path) -> None:
    """``workspace:``: the folder's files copied into the case workspace, before the first
    life, so that they are the world as the case starts (the baseline, never an effect). A
    file the scenario placed there already is the scenario's and stays."""
    for source in sorted(folder.rglob("*")):
        relative = source.relative_to(folder)
        if "__pycache__" in relative.parts:
            continue
        target = workspace / relative
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def _die_with_agent(ctx: LifeContext, number: int) -> None:
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    ctx.trace({"event": "agent_died", "signal": name})
    os.kill(os.getpid(), signal.SIGKILL)


def load_foreign_adapter(path: Path | str) -> ForeignAdapter:
    return ForeignAdapter(load_foreign(path))
