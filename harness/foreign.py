"""Agents the harness did not write, declared in an adapter YAML (``--agent=adapter.yaml``).

Two ways in, both run UNMODIFIED agent code (docs/adapters.md walks through each):

* ``python:`` (kind 2) -- the agent's module is imported in the life process; the functions the
  YAML's ``boundaries`` name are wrapped (module attributes replaced before its ``main`` runs),
  so the life dies exactly where the agent passes a boundary, as a native agent would.
* ``command:`` (kind 3) -- any program, any language. The life process is its supervisor: it
  serves the model and the tools on loopback (``harness.loopback``), starts the command, and
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
import importlib
import importlib.util
import inspect
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO, cast

from .adapter import LifeContext
from .boundaries import BOUNDARIES, BoundaryHook
from .errors import HarnessError, InputError, SessionCorruption
from .ledger import TERMINAL, normalise_status
from .loopback import LoopbackServer
from .parent_death import die_with_parent
from .records import Entry, MessageEntry, entry_from_json
from .scripted_model import ScriptedModel
from .session import SessionLog, encode_line, fsync_directory, split_lines
from .yamlfile import Located, load_yaml, validate

__all__ = [
    "DEFAULT_SESSION",
    "FIELD_ALIASES",
    "BoundaryRule",
    "ForeignAdapter",
    "ForeignSpec",
    "LedgerMap",
    "load_foreign",
    "read_foreign_session",
]

DEFAULT_SESSION = ".agent_state/agent-session.jsonl"
# Seed 004's ledger entry (callId, stepId, toolName, inputHash, idempotencyKey) and common
# camelCase spellings of seed 000's fields; the YAML's ``fields`` are applied first.
FIELD_ALIASES: Mapping[str, str] = {
    "callId": "tool_call_id",
    "toolCallId": "tool_call_id",
    "stepId": "execution_id",
    "executionId": "execution_id",
    "toolName": "tool_name",
    "inputHash": "arguments_sha256",
    "argumentsSha256": "arguments_sha256",
    "idempotencyKey": "idempotency_key",
}
_OURS = (
    "execution_id",
    "tool_call_id",
    "status",
    "tool_name",
    "idempotency_key",
    "arguments_sha256",
    "result",
)
_LOOPBACK_EDGES = ("after_running", "after_side_effect")
# Output kept to match prompts against: prompts are short, and an agent that prints a lot
# must not make the supervisor hold all of it.
_PROMPT_WINDOW = 8192


# -- the adapter file ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LedgerMap:
    """How to read a foreign session's lines as our records."""

    type_field: str = "type"
    message_type: str = "message"
    ledger_type: str = "tool_execution"
    fields: Mapping[str, str] = field(default_factory=dict)
    statuses: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Where:
    argument: str
    key: str
    test: str  # "equals" | "in" | "present"
    value: Any


@dataclass(frozen=True, slots=True)
class BoundaryRule:
    """``function`` marks ``boundary`` (after it returns, or when it is called) if every
    ``where`` holds; the tool call id comes from ``call_id`` or the last one seen."""

    function: str
    boundary: str
    at: str = "return"
    where: tuple[Where, ...] = ()
    call_id: tuple[str, str] | None = None  # (argument, key)


@dataclass(frozen=True, slots=True)
class ForeignSpec:
    path: Path
    name: str
    kind: str  # "python" | "command"
    script: Path | None = None
    module: str | None = None
    main: str = "main"
    argv: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    cwd: str = "workspace"
    env: Mapping[str, str] = field(default_factory=dict)
    tools: str = "harness"
    input_prompt: str = "> "
    approval_prompt: str | None = None
    approval_yes: str = "y"
    approval_no: str = "n"
    session: str = DEFAULT_SESSION
    keeps_ledger: bool = True
    ledger: LedgerMap = field(default_factory=LedgerMap)
    rules: tuple[BoundaryRule, ...] = ()

    @property
    def here(self) -> Path:
        return self.path.parent


def _regex(doc: Located, key: tuple[str, ...], text: str, groups: Sequence[str] = ()) -> None:
    try:
        compiled = re.compile(text)
    except re.error as error:
        raise doc.error(key, f"not a regular expression ({error}); fix the pattern") from error
    for group in groups:
        if group not in compiled.groupindex:
            raise doc.error(key, f"the regex needs a named group (?P<{group}>...) for the {group} name")


def load_foreign(path: Path | str) -> ForeignSpec:
    """Read and check an adapter YAML; every problem is one ``path:line:col: key: problem``."""
    doc = load_yaml(path)
    if not isinstance(doc.data, dict):
        raise doc.error((), "an adapter file is a mapping; start with 'name:'")
    validate(doc, "adapter.schema.json")
    data: dict[str, Any] = doc.data
    here = doc.path.resolve().parent
    python = data.get("python")
    script: Path | None = None
    module: str | None = None
    if python is not None:
        if ("script" in python) == ("module" in python):
            raise doc.error(("python",), "give exactly one of 'script:' (a .py file) or 'module:'")
        if "script" in python:
            script = (here / python["script"]).resolve()
            if not script.is_file():
                raise doc.error(("python", "script"), f"no file {script}; the path is relative to this YAML")
        module = python.get("module")
    elif data.get("boundaries"):
        raise doc.error(("boundaries",), "boundaries wrap Python functions: only a 'python:' agent has them")
    approvals = data.get("approvals") or {}
    if approvals:
        _regex(doc, ("approvals", "prompt"), approvals["prompt"], ("tool",))
    prompt = (data.get("input") or {}).get("prompt", "> ")
    _regex(doc, ("input", "prompt"), prompt)
    session = data.get("session") or {}
    session_path = session.get("path", DEFAULT_SESSION)
    if Path(session_path).is_absolute() or ".." in Path(session_path).parts:
        raise doc.error(
            ("session", "path"), "write a path inside the case workspace, e.g. .agent_state/s.jsonl"
        )
    if Path(session_path) == Path(".agent_state/session-case.jsonl"):
        raise doc.error(
            ("session", "path"), "crashmatrix keeps its normalised copy there; choose another name"
        )
    rules: list[BoundaryRule] = []
    for index, raw in enumerate(data.get("boundaries") or ()):
        where: list[Where] = []
        for number, cond in enumerate(raw.get("where") or ()):
            tests = [name for name in ("equals", "in", "present") if name in cond]
            if len(tests) != 1:
                raise doc.error(
                    ("boundaries", index, "where", number), "give exactly one of equals:, in:, present:"
                )
            where.append(Where(cond["argument"], cond.get("key", ""), tests[0], cond[tests[0]]))
        call = raw.get("call_id")
        rules.append(
            BoundaryRule(
                raw["function"],
                raw["boundary"],
                raw.get("at", "return"),
                tuple(where),
                (call["argument"], call.get("key", "")) if call else None,
            )
        )
    return ForeignSpec(
        path=doc.path.resolve(),
        name=data["name"],
        kind="python" if python is not None else "command",
        script=script,
        module=module,
        main=(python or {}).get("main", "main"),
        argv=tuple((python or {}).get("argv", ())),
        command=tuple(data.get("command", ())),
        cwd=data.get("cwd", "workspace"),
        env=dict(data.get("env") or {}),
        tools=data.get("tools", "harness"),
        input_prompt=prompt,
        approval_prompt=approvals.get("prompt"),
        approval_yes=approvals.get("approve", "y"),
        approval_no=approvals.get("deny", "n"),
        session=session_path,
        keeps_ledger=session.get("keeps_ledger", True),
        ledger=LedgerMap(
            type_field=session.get("type_field", "type"),
            message_type=session.get("message_type", "message"),
            ledger_type=session.get("ledger_type", "tool_execution"),
            fields=dict(session.get("fields") or {}),
            statuses=dict(session.get("statuses") or {}),
        ),
        rules=tuple(rules),
    )


# -- foreign sessions ----------------------------------------------------------------------


def _ledger_record(
    raw: Mapping[str, Any], mapping: LedgerMap, executions: dict[str, tuple[str, str, int]]
) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_execution"}
    extra: dict[str, Any] = {}
    for key, value in raw.items():
        if key == mapping.type_field:
            continue
        ours = mapping.fields.get(key) or FIELD_ALIASES.get(key) or key
        if ours in _OURS:
            out[ours] = value
        else:
            extra[key] = value
    if "tool_call_id" not in out or "status" not in out:
        raise ValueError("ledger line has no tool call id or status; map its fields under session.fields")
    call_id = str(out["tool_call_id"])
    status = normalise_status(str(out["status"]), mapping.statuses)
    out["status"] = status
    current, previous, count = executions.get(call_id, ("", "", 0))
    if "execution_id" in out:
        current = str(out["execution_id"])
    elif not current or previous in TERMINAL:
        # No attempt id (seed 004 has none of its own): a new attempt starts after a terminal
        # status, the way our ledger gives a retry a new execution_id.
        count += 1
        current = f"{call_id}#{count}"
    out["execution_id"] = current
    executions[call_id] = (current, status, count)
    for key, value in extra.items():
        out.setdefault(key, value)
    return out


def normalise_line(
    raw: Any, mapping: LedgerMap, executions: dict[str, tuple[str, str, int]]
) -> dict[str, Any] | None:
    """One foreign JSON line as a record of ours, or None for a line we do not judge
    (the agent's own metadata). Raises ValueError for a ledger or message line that is
    malformed."""
    if not isinstance(raw, dict):
        return None
    kind = raw.get(mapping.type_field)
    if kind == mapping.ledger_type:
        return _ledger_record(raw, mapping, executions)
    if kind == mapping.message_type or (kind is None and "role" in raw):
        message = raw.get("message")
        if not isinstance(message, dict):
            message = {k: v for k, v in raw.items() if k != mapping.type_field}
        return {"type": "message", "message": message}
    if kind == "compaction":
        return dict(raw)
    return None


def read_foreign_session(path: Path, mapping: LedgerMap) -> tuple[SessionLog, list[bytes]]:
    """The foreign session as our ``SessionLog`` plus the normalised lines.

    Offsets are those of the normalised lines (the copy the judge reads), not of the foreign
    file. Torn final line: dropped and reported, as ``read_session`` does; a complete line
    that is not JSON is corruption, named by the foreign file's line."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return SessionLog(path, ()), []

    entries: list[Entry] = []
    lines: list[bytes] = []
    ends: list[int] = []
    executions: dict[str, tuple[str, str, int]] = {}
    size = 0
    complete, torn = split_lines(path, data)
    for line in complete:
        text = line.data.strip()
        if not text:
            continue
        try:
            raw = json.loads(text)
            record = normalise_line(raw, mapping, executions)
            if record is not None:
                entry = entry_from_json(record, line=line.number)
                encoded = encode_line(entry.to_json())
                entries.append(entry)
                lines.append(encoded)
                size += len(encoded)
                ends.append(size)
        except ValueError as error:
            raise SessionCorruption(path, line.number, line.offset, str(error)) from error
    return SessionLog(path, tuple(entries), torn, size, tuple(ends)), lines


def _write_copy(target: Path, lines: Sequence[bytes]) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(target.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b"".join(lines))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, target)
    fsync_directory(target.parent)


# -- stdin: turns and approvals ------------------------------------------------------------


class Conversation:
    """Answers what the agent asks on stdin: approvals by the scenario, turns in order."""

    def __init__(self, spec: ForeignSpec, turns: Sequence[str], ctx: LifeContext) -> None:
        self.turns = list(turns)
        self.approvals = ctx.approvals
        self.again = ctx.approvals_again or ctx.approvals
        self.spec = spec
        self._approval = (
            re.compile(rf"(?:\A|\n)(?:{spec.approval_prompt})[ \t]*\Z") if spec.approval_prompt else None
        )
        self._input = re.compile(rf"(?:\A|\n)(?:{spec.input_prompt})[ \t]*\Z")

    def _approve(self, match: re.Match[str]) -> str:
        table = self.again if match.groupdict().get("again") else self.approvals
        tool = match.group("tool")
        answer = table.get(tool, table.get("*", "yes"))
        return (
            self.spec.approval_yes if str(answer).lower() in ("yes", "y", "true") else self.spec.approval_no
        )

    def answer(self, output: str, *, waiting: bool) -> str | None:
        """The line to write for ``output`` (what the agent printed since the last answer):
        an approval, the next turn, or "" for end of input. None: not a prompt (yet).
        ``waiting``: the agent is known to be reading (in-process), so anything is a turn prompt."""
        if self._approval is not None:
            match = self._approval.search(output)
            if match:
                return self._approve(match) + "\n"
        if waiting or self._input.search(output):
            return self.turns.pop(0) + "\n" if self.turns else ""
        return None


class _Console:
    """The in-process agent's stdout (kept to match prompts, copied to a log) and stdin."""

    def __init__(self, conversation: Conversation, log: TextIO) -> None:
        self.conversation = conversation
        self.log = log
        self.pending = ""

    def write(self, text: str) -> int:
        self.log.write(text)
        self.pending = (self.pending + text)[-_PROMPT_WINDOW:]
        return len(text)

    def flush(self) -> None:
        self.log.flush()

    def readline(self, size: int | None = -1) -> str:
        line = self.conversation.answer(self.pending, waiting=True) or ""
        self.log.write(line)
        self.pending = ""
        return line

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return "utf-8"


# -- kind 2: boundaries in the agent's own functions -----------------------------------------


def _lookup(value: Any, key: str) -> list[Any]:
    values = [value]
    for part in key.split(".") if key else ():
        found: list[Any] = []
        for item in values:
            if part == "*" and isinstance(item, list | tuple):
                found.extend(item)
            elif isinstance(item, Mapping) and part in item:
                found.append(item[part])
            elif isinstance(item, list | tuple) and part.isdigit() and int(part) < len(item):
                found.append(item[int(part)])
            elif not isinstance(item, Mapping | list | tuple) and hasattr(item, part):
                found.append(getattr(item, part))
        values = found
    return values


def _holds(cond: Where, arguments: Mapping[str, Any]) -> bool:
    if cond.argument not in arguments:
        return False
    values = _lookup(arguments[cond.argument], cond.key)
    if cond.test == "equals":
        return any(v == cond.value for v in values)
    if cond.test == "in":
        return any(v in cond.value for v in values)
    present = any(v not in (None, "", [], {}) for v in values)
    return present == bool(cond.value)


class _Boundaries:
    """Calls the life's hook where the agent's wrapped functions say a boundary is."""

    def __init__(self, hook: BoundaryHook) -> None:
        self.hook = hook
        self.last_call_id = ""

    def fire(self, rules: Sequence[BoundaryRule], arguments: Mapping[str, Any]) -> None:
        for rule in rules:
            if not all(_holds(cond, arguments) for cond in rule.where):
                continue
            if rule.call_id is not None:
                ids = [str(v) for v in _lookup(arguments.get(rule.call_id[0]), rule.call_id[1]) if v]
            else:
                ids = [self.last_call_id] if self.last_call_id else []
            for call_id in ids:
                self.last_call_id = call_id
                self.hook(rule.boundary, call_id)


def _wrap(
    original: Callable[..., Any], rules: Sequence[BoundaryRule], marks: _Boundaries
) -> Callable[..., Any]:
    signature = inspect.signature(original)
    before = [r for r in rules if r.at == "call"]
    after = [r for r in rules if r.at == "return"]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
        except TypeError:
            arguments = {}  # the call itself will raise the agent's own TypeError
        marks.fire(before, arguments)
        result = original(*args, **kwargs)
        marks.fire(after, {**arguments, "return": result})
        return result

    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(original, "__name__", "wrapped")
    return wrapper


def install_boundaries(module: ModuleType, rules: Sequence[BoundaryRule], hook: BoundaryHook) -> None:
    """Replace each named function of ``module`` (or ``Class.method``) by a wrapper that
    calls ``hook``. The agent's code looks its functions up by name at call time, so it calls
    the wrappers without a line of it changing."""
    marks = _Boundaries(hook)
    by_function: dict[str, list[BoundaryRule]] = {}
    for rule in rules:
        by_function.setdefault(rule.function, []).append(rule)
    for dotted, group in by_function.items():
        owner: Any = module
        *parents, attr = dotted.split(".")
        for part in parents:
            owner = getattr(owner, part, None)
        original = getattr(owner, attr, None) if owner is not None else None
        if not callable(original):
            raise InputError(f"{module.__name__} has no function {dotted!r}; fix boundaries[].function")
        setattr(owner, attr, _wrap(original, group, marks))


def _import_agent(spec: ForeignSpec) -> ModuleType:
    if spec.module:
        return importlib.import_module(spec.module)
    assert spec.script is not None
    # Its siblings must import as they do when it runs as a script.
    sys.path.insert(0, str(spec.script.parent))
    name = f"crashmatrix_agent_{spec.script.stem}"
    loaded = importlib.util.spec_from_file_location(name, spec.script)
    if loaded is None or loaded.loader is None:
        raise InputError(f"{spec.path}: cannot load {spec.script} as Python")
    module = importlib.util.module_from_spec(loaded)
    sys.modules[name] = module
    loaded.loader.exec_module(module)
    return module


# -- kind 3: a supervised process ----------------------------------------------------------


@contextlib.contextmanager
def _stopped(pid: int) -> Iterator[None]:
    """The agent's process group is stopped inside the block (so it cannot act on a reply
    the hook may be about to kill it after). A stopped process still dies of SIGKILL, and
    the kernel SIGKILLs the agent when the life dies (PR_SET_PDEATHSIG)."""
    try:
        os.killpg(pid, signal.SIGSTOP)
        # kill() only queues the signal; wait until the stop took effect (or it exited).
        os.waitid(os.P_PID, pid, os.WSTOPPED | os.WEXITED | os.WNOWAIT)
    except (ProcessLookupError, ChildProcessError):
        pass
    try:
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGCONT)


def _pump(process: subprocess.Popen[bytes], conversation: Conversation, log: Path) -> None:
    """Read the agent's stdout; answer prompts on its stdin. Runs until the agent's stdout closes."""
    assert process.stdout is not None and process.stdin is not None
    pending = ""
    with open(log, "ab") as copy:
        while True:
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                return
            copy.write(chunk)
            copy.flush()
            pending = (pending + chunk.decode("utf-8", "replace"))[-_PROMPT_WINDOW:]
            line = conversation.answer(pending, waiting=False)
            if line is None:
                continue
            pending = ""
            copy.write(line.encode("utf-8"))
            try:
                if line:
                    process.stdin.write(line.encode("utf-8"))
                    process.stdin.flush()
                else:
                    process.stdin.close()  # no turns left: end of input, the agent exits
            except (BrokenPipeError, ValueError):
                return


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
        """The agent's session as our records (what the judge should observe)."""
        return read_foreign_session(self.raw_session(case_dir), self.spec.ledger)[0]

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
