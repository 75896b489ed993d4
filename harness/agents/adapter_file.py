"""The adapter YAML of an agent the harness did not write (kind 2 ``python:``, kind 3
``command:``): read, checked, every problem one ``path:line:col`` line."""

from __future__ import annotations

import ast
import importlib.util
import re
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashmatrix.harness.agents.effects import EffectSpec
from crashmatrix.harness.agents.foreign_session import LedgerMap, SessionSource
from crashmatrix.harness.agents.mcp_upstream import UpstreamSpec
from crashmatrix.harness.core.categories import BUILTIN_MAPPINGS, CategoryRule, ResultMapping
from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.dialect import Dialect
from crashmatrix.harness.core.toolmap import ToolMap, ToolName
from crashmatrix.harness.input.yamlfile import Located, load_yaml, validate

__all__ = ["DEFAULT_SESSION", "SERVICES", "BoundaryRule", "ForeignSpec", "Intercept", "load_foreign"]

# The loopback services an adapter can ask for, and the tool each one's effects belong to.
SERVICES: Mapping[str, str] = {"orders": "create_order", "mail": "send_email"}

DEFAULT_SESSION = ".agent_state/agent-session.jsonl"


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
    position: str = ""  # adapter.yaml:line:col of the rule, for "this rule never fired"


@dataclass(frozen=True, slots=True)
class Intercept:
    """A kind-2 agent's tool function replaced by the harness's mock tool ``tool``."""

    tool: str
    function: str
    arguments: Mapping[str, str]  # the tool's argument -> the function's parameter
    returns: str = "result"  # "result" | "json" | "module:function"
    call_id: tuple[str, str] | None = None  # (argument, key)
    key: str = ""  # the function's parameter holding the idempotency key it would send
    position: str = ""  # adapter.yaml:line:col of the entry, for "this intercept never ran"


@dataclass(frozen=True, slots=True)
class ForeignSpec:
    path: Path
    name: str
    kind: str  # "python" | "command" | "framework"
    script: Path | None = None
    module: str | None = None
    main: str = "main"
    argv: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    cwd: str = "workspace"
    env: Mapping[str, str] = field(default_factory=dict)
    tools: str = "harness"
    input_prompt: str = "> "
    # How each user message reaches the agent (``input.via``): "stdin" lines to one process,
    # or one process per message (``per_process``), the message in its argv ({turn}), in
    # the variable ``input_name`` or as its whole stdin.
    input_via: str = "stdin"
    input_name: str = ""
    per_process: bool = False
    # ``workspace:``: the folder the case workspace starts as (copied before the first life).
    workspace_from: Path | None = None
    approval_prompt: str | None = None
    approval_where: str = ""  # path:line:col of approvals.prompt, for messages at run time
    approval_yes: str = "y"
    approval_no: str = "n"
    # (suite tool, regex): a prompt whose text the regex finds is about that tool
    # (``approvals.prompts``), for prompts that do not name their tool.
    approval_prompts: tuple[tuple[str, str], ...] = ()
    session: str = DEFAULT_SESSION
    # True: the agent keeps a ledger (declared, or a ledger mapping given), judged in every case;
    # False: it keeps none; None (not declared): each case's session decides (foreign.py).
    keeps_ledger: bool | None = None
    ledger: LedgerMap = field(default_factory=LedgerMap)
    rules: tuple[BoundaryRule, ...] = ()
    source: SessionSource = field(default_factory=SessionSource)
    effects: tuple[EffectSpec, ...] = ()
    services: tuple[str, ...] = ()
    intercepts: tuple[Intercept, ...] = ()
    dialect: Dialect = field(default_factory=Dialect)
    # kind "framework": which one (``harness.agents.team_life.FRAMEWORKS``) and its options; the
    # factory is ``module:main``.
    framework: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)
    # tools: mcp: how the agent reaches the relay (``mcp.transport``): "stdio" (it spawns
    # {mcp_command}) or "http" (the life starts it; {mcp_url}).
    mcp_transport: str = "stdio"
    # ``mcp.proxy``: the team's real MCP server the relay passes the calls on to (proxy mode,
    # ``harness.agents.mcp_upstream``); None: the relay serves the suite's mock tools.
    mcp_proxy: UpstreamSpec | None = None

    @property
    def here(self) -> Path:
        return self.path.parent

    @property
    def watched(self) -> frozenset[str] | None:
        """The suite's tools whose side effects the world records, None for every tool (the
        agent calls the harness's mock tools). A tool outside it may act unseen: "it happened
        twice" and "told success, nothing happened" cannot be judged for it."""
        if self.tools == "harness" or (self.tools == "mcp" and self.mcp_proxy is None):
            return None  # over MCP too, the harness runs every tool the agent calls
        # A proxied MCP server's effects are its own: seen where effects: says, as an agent's.
        return frozenset(
            [effect.tool for effect in self.effects]
            + [SERVICES[name] for name in self.services if name in SERVICES]
            + [intercept.tool for intercept in self.intercepts]
        )


def _regex(doc: Located, key: tuple[str | int, ...], text: str) -> None:
    try:
        re.compile(text)
    except re.error as error:
        raise doc.error(key, f"not a regular expression ({error}); fix the pattern") from error


def load_foreign(path: Path | str) -> ForeignSpec:
    """Read and check an adapter YAML; every problem is one ``path:line:col: key: problem``."""
    doc = load_yaml(path)
    if not isinstance(doc.data, dict):
        raise doc.error((), "an adapter file is a mapping; start with 'name:'")
    validate(doc, "adapter.schema.json")
    data: dict[str, Any] = doc.data
    here = doc.path.resolve().parent
    python = data.get("python")
    framework = data.get("framework")
    script: Path | None = None
    module: str | None = None
    if framework is not None:
        _framework_keys(doc, data)
        module, _, factory = data["factory"].partition(":")
        python = {"module": module, "main": factory}
    elif python is not None:
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
        # A prompt may leave the tool unnamed (no (?P<tool>...) group, no prompts: entry it
        # matches): it is then answered only where the scenario gives every tool one answer,
        # else the case is not applicable (conversation.py), which only a life can tell.
        _regex(doc, ("approvals", "prompt"), approvals["prompt"])
    prompt = (data.get("input") or {}).get("prompt", "> ")
    _regex(doc, ("input", "prompt"), prompt)
    via, per_process = _turn_delivery(doc, data)
    workspace_from: Path | None = None
    if "workspace" in data:
        workspace_from = (here / data["workspace"]).resolve()
        if not workspace_from.is_dir():
            raise doc.error(("workspace",), f"no folder {workspace_from}; the path is relative to this YAML")
    session = data.get("session") or {}
    session_path = session.get("path", DEFAULT_SESSION)
    _inside_workspace(doc, ("session", "path"), session_path)
    ledger = LedgerMap(
        type_field=session.get("type_field", "type"),
        message_type=session.get("message_type", "message"),
        ledger_type=session.get("ledger_type", "tool_execution"),
        fields=dict(session.get("fields") or {}),
        statuses=dict(session.get("statuses") or {}),
    )
    if framework is not None:
        from crashmatrix.harness.agents.team_life import reader_of

        # The framework's store is the session: its adapter module reads it as records.
        source = SessionSource(kind="reader", reader=reader_of(framework), here=here, ledger=ledger)
    else:
        source = _session_source(doc, session, session_path, ledger, here)
    contracts = _contracts(doc, here)
    effects = tuple(
        _effect(doc, index, raw, contracts) for index, raw in enumerate(data.get("effects") or ())
    )
    intercepts = tuple(
        _intercept(doc, tool, raw, contracts) for tool, raw in (data.get("intercept") or {}).items()
    )
    dialect = Dialect(
        _results(doc, data.get("results", "auto")), _catalogue(doc, data.get("catalogue"), contracts)
    )
    if intercepts and python is None:
        raise doc.error(("intercept",), "intercept replaces Python functions: only a 'python:' agent has it")
    prompts = _approval_prompts(doc, approvals.get("prompts") or {}, dialect.tools, contracts)
    # Functions named for wrapping must exist: read from the agent's source, nothing of it runs.
    names = _top_level_names(script if script is not None else module_file(module or "", here))
    if names is not None:
        named = [
            (("boundaries", i, "function"), raw["function"])
            for i, raw in enumerate(data.get("boundaries") or ())
        ]
        named += [
            (("intercept", tool, "function"), raw["function"])
            for tool, raw in (data.get("intercept") or {}).items()
        ]
        own = script.stem if script is not None else (module or "").rpartition(".")[2]
        for key, function in named:
            # ``agent.f`` is the agent's own ``f`` (its module named as it is imported);
            # ``module.attr`` an attribute of a module the agent imports (resolved at run time).
            first, _, rest = function.partition(".")
            local = rest if first == own and first not in names and rest else function
            if local not in names and local.partition(".")[0] not in names:
                raise doc.error(key, f"the agent has no function {function!r}; name one it defines")
    boundaries = data.get("boundaries") or ()
    if boundaries and not any(raw.get("call_id") for raw in boundaries):
        # A rule without call_id marks the call the last fired rule named (python_agent.Marks):
        # with no rule naming one, none of them ever fires, and the points they stand for would
        # silently not exist (a matrix of nothing, and green).
        raise doc.error(
            ("boundaries", 0),
            "no boundary rule names its call (call_id:), and a rule without one takes the last "
            "call a rule named, so none ever fires; add call_id: {argument: ..., key: ...} to "
            "the rule whose function sees the tool call id",
        )
    rules: list[BoundaryRule] = []
    for index, raw in enumerate(boundaries):
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
                f"{doc.path}:{':'.join(map(str, doc.where(('boundaries', index))))}",
            )
        )
    return ForeignSpec(
        path=doc.path.resolve(),
        name=data["name"],
        kind="framework" if framework is not None else "python" if python is not None else "command",
        script=script,
        module=module,
        main=(python or {}).get("main", "main"),
        argv=tuple((python or {}).get("argv", ())),
        command=tuple(data.get("command", ())),
        cwd=data.get("cwd", "workspace"),
        env=dict(data.get("env") or {}),
        tools=data.get("tools", "agent" if framework is not None else "harness"),
        input_prompt=prompt,
        input_via=via,
        input_name=(data.get("input") or {}).get("name", ""),
        per_process=per_process,
        workspace_from=workspace_from,
        approval_prompt=approvals.get("prompt"),
        approval_where=f"{doc.path}:{':'.join(map(str, doc.where(('approvals', 'prompt'))))}",
        approval_yes=approvals.get("approve", "y"),
        approval_no=approvals.get("deny", "n"),
        approval_prompts=prompts,
        session=session_path,
        # A framework keeps a conversation, not a ledger of attempts.
        keeps_ledger=False
        if framework is not None
        else _keeps_ledger(session, boundaries)
        if source.readable
        else False,
        ledger=ledger,
        rules=tuple(rules),
        source=source,
        effects=effects,
        services=tuple(data.get("services") or ()),
        intercepts=intercepts,
        dialect=dialect,
        framework=framework or "",
        options=dict(data.get("options") or {}),
        mcp_transport=_mcp_transport(doc, data),
        mcp_proxy=_mcp_proxy(doc, data),
    )


# Where an adapter may write a placeholder of the MCP server: (key, its strings).
_MCP_PLACES = ("command", "env", "python", "options")


def _mcp_transport(doc: Located, data: Mapping[str, Any]) -> str:
    """``tools: mcp`` and its ``mcp:`` block, checked against the ``{mcp_command}`` /
    ``{mcp_url}`` placeholders the agent's configuration uses."""
    given = data.get("mcp")
    tools = data.get("tools", "agent" if "framework" in data else "harness")
    if given is not None and tools != "mcp":
        raise doc.error(
            ("mcp",), f"configures tools: mcp, and this agent has tools: {tools}; add tools: mcp or drop mcp:"
        )
    transport = str((given or {}).get("transport", "stdio"))
    for key, text in _strings(data, ()):
        if key[0] not in _MCP_PLACES:
            continue
        for name in ("mcp_command", "mcp_url"):
            if f"{{{name}}}" not in text:
                continue
            if tools != "mcp":
                raise doc.error(
                    key, f"{{{name}}} is crashmatrix's MCP server, served with tools: mcp; add tools: mcp"
                )
            if name == "mcp_url" and transport != "http":
                raise doc.error(
                    key,
                    "{mcp_url} is the HTTP server's address; add mcp: {transport: http} or use {mcp_command}",
                )
    return transport


# The placeholders a proxied server's command, cwd and env may use (foreign.py fills them).
_PROXY_PLACEHOLDERS = (
    "model_url", "tools_url", "orders_url", "mail_url", "workspace", "session", "here", "python",
)  # fmt: skip


def _mcp_proxy(doc: Located, data: Mapping[str, Any]) -> UpstreamSpec | None:
    """``mcp.proxy`` (the schema checked its shape), its placeholders checked here."""
    proxy = (data.get("mcp") or {}).get("proxy")
    if proxy is None:
        return None
    if "url" in proxy:
        return UpstreamSpec(url=proxy["url"])
    dummy = dict.fromkeys(_PROXY_PLACEHOLDERS, "")
    for key, text in _strings(proxy, ("mcp", "proxy")):
        try:
            text.format(**dummy)
        except (KeyError, IndexError, ValueError) as error:
            unknown = isinstance(error, KeyError)
            named = f"{{{error.args[0]}}} is no placeholder here" if unknown else str(error)
            known = ", ".join("{" + name + "}" for name in _PROXY_PLACEHOLDERS)
            raise doc.error(key, f"{named}; use {known}, or {{{{ }}}} for braces") from error
    return UpstreamSpec(
        command=tuple(proxy["command"]),
        cwd=proxy.get("cwd", "{workspace}"),
        env=dict(proxy.get("env") or {}),
    )


def _strings(value: Any, key: tuple[str | int, ...]) -> list[tuple[tuple[str | int, ...], str]]:
    """Every string in ``value`` with its key path (a dict's keys are not values)."""
    if isinstance(value, str):
        return [(key, value)]
    if isinstance(value, Mapping):
        return [found for name, item in value.items() for found in _strings(item, (*key, name))]
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in _strings(item, (*key, index))]
    return []


def _turn_delivery(doc: Located, data: Mapping[str, Any]) -> tuple[str, bool]:
    """``input.via`` and whether the agent is started once per user message, checked against
    where the message goes (the ``{turn}`` placeholder, the variable's name, stdin)."""
    given = data.get("input") or {}
    via = given.get("via", "stdin")
    per_process = given.get("per_process", via != "stdin")
    argv_key = ("python", "argv") if "python" in data else ("command",)
    parts = (data.get("python") or {}).get("argv", ()) if "python" in data else data.get("command", ())
    holders = [index for index, part in enumerate(parts) if "{turn}" in part]
    if via != "stdin" and not per_process:
        raise doc.error(
            ("input", "per_process"), f"via: {via} starts the agent once per message; drop per_process: false"
        )
    if via == "argv" and not holders:
        where = "python.argv" if "python" in data else "command"
        raise doc.error(
            ("input", "via"), f"via: argv puts each message where {where}: has {{turn}}; add '{{turn}}' to it"
        )
    if via != "argv" and holders:
        raise doc.error(
            (*argv_key, holders[0]),
            "{turn} is the user message only with input: {via: argv}; add it or drop {turn}",
        )
    if via == "env" and "name" not in given:
        raise doc.error(("input", "via"), "via: env needs the variable's name, e.g. name: AGENT_MESSAGE")
    if via != "env" and "name" in given:
        raise doc.error(("input", "name"), "name: is the variable of via: env; add via: env or drop name:")
    if via == "stdin" and per_process and data.get("approvals"):
        raise doc.error(
            ("approvals",),
            "with per_process: true the message is the agent's whole stdin, which is then closed: "
            "no approval can be answered on it; use via: argv or env to keep stdin for approvals",
        )
    return via, per_process


# What a framework agent cannot take: its driver is the framework's, its session its store.
_NOT_FOR_FRAMEWORKS = {
    "python": "the factory names the team's module; drop python:",
    "command": "a framework agent runs in the life process; drop command:",
    "session": "the framework's store is the session (its adapter reads it); drop session:",
    "input": "crashmatrix sends the turns through the framework's API, not stdin; drop input:",
    "approvals": "approvals are the framework's own (interrupts, needs_approval); drop approvals:",
    "cwd": "a framework agent runs in the case's workspace; drop cwd:",
}


def _framework_keys(doc: Located, data: Mapping[str, Any]) -> None:
    for key, why in _NOT_FOR_FRAMEWORKS.items():
        if key in data:
            raise doc.error((key,), f"not for a framework: agent: {why}")
    from crashmatrix.harness.agents.team_life import framework_module

    options = data.get("options") or {}
    known = framework_module(data["framework"], str(doc.path)).FRAMEWORK.options
    for key in options:
        if key not in known:
            accepted = ", ".join(known) or "none"
            raise doc.error(
                ("options", key), f"{data['framework']} takes no option {key!r} (it takes: {accepted})"
            )


def _keeps_ledger(session: Mapping[str, Any], boundaries: Sequence[Mapping[str, Any]]) -> bool | None:
    """``session.keeps_ledger`` as declared. A ledger mapping (``ledger_type``, ``fields``,
    ``statuses``) declares one too, and so does a boundary rule fired by a record's
    ``status`` (``where: [{key: status, ...}]``: the agent writes ledger records). None: not
    declared, each case's session decides (``ForeignAdapter``)."""
    declared = session.get("keeps_ledger")
    if declared is not None:
        return bool(declared)
    mapped = any(key in session for key in ("ledger_type", "fields", "statuses"))
    statuses = any(
        str(cond.get("key", "")).split(".")[-1] == "status"
        for rule in boundaries
        for cond in rule.get("where") or ()
    )
    return True if mapped or statuses else None


def _approval_prompts(
    doc: Located, raw: Mapping[str, str], tools: ToolMap, contracts: Mapping[str, ToolContract]
) -> tuple[tuple[str, str], ...]:
    """``approvals.prompts``: {the suite's or the agent's tool: a regex found in its prompt}."""
    agent_names = tools.suite_names()
    prompts: dict[str, str] = {}
    given: dict[str, str] = {}  # suite tool -> the name its entry used
    for name, text in raw.items():
        key: tuple[str | int, ...] = ("approvals", "prompts", name)
        suite = agent_names.get(name, name)
        if suite not in contracts or not tools.has(suite):
            known = [
                tool if tools.agent_name(tool) == tool else f"{tool} ({tools.agent_name(tool)})"
                for tool in sorted(contracts)
                if tools.has(tool)
            ]
            raise doc.error(key, f"the agent has no tool {name!r}; name one of its tools: {', '.join(known)}")
        if suite in given:
            raise doc.error(key, f"{suite} has a prompt already (as {given[suite]}); give each tool one")
        _regex(doc, key, text)
        prompts[suite], given[suite] = text, name
    return tuple(prompts.items())


def _inside_workspace(doc: Located, key: tuple[str | int, ...], relative: str) -> None:
    if Path(relative).is_absolute() or ".." in Path(relative).parts:
        raise doc.error(key, "write a path inside the case workspace, e.g. .agent_state/s.jsonl")
    if Path(relative) == Path(".agent_state/session-case.jsonl"):
        raise doc.error(key, "crashmatrix keeps its normalised copy there; choose another name")


def _session_source(
    doc: Located, session: Mapping[str, Any], path: str, ledger: LedgerMap, here: Path
) -> SessionSource:
    given = [name for name in ("sqlite", "reader") if name in session]
    if session.get("readable") is False:
        given.append("readable")
    if len(given) > 1 or (given and "path" in session):
        raise doc.error(("session",), "give one of path:, sqlite:, reader: or readable: false")
    if "sqlite" in session:
        sqlite = session["sqlite"]
        _inside_workspace(doc, ("session", "sqlite", "path"), sqlite["path"])
        _select(doc, ("session", "sqlite", "query"), sqlite["query"])
        return SessionSource("sqlite", sqlite["path"], sqlite["query"], ledger=ledger, here=here)
    if "reader" in session:
        _reader_exists(doc, ("session", "reader"), session["reader"], here)
        return SessionSource("reader", reader=session["reader"], here=here, ledger=ledger)
    if session.get("readable") is False:
        return SessionSource("none", here=here, ledger=ledger)
    return SessionSource("jsonl", path, ledger=ledger, here=here)


def _select(doc: Located, key: tuple[str | int, ...], query: str) -> None:
    """A query that can never run is refused now, not in the middle of a run: one statement,
    a SELECT, valid SQL (tables it names need not exist yet: the agent creates them)."""
    if not query.lstrip().lower().startswith(("select", "with")) or not sqlite3.complete_statement(
        query.rstrip().rstrip(";") + ";"
    ):
        raise doc.error(key, "write one SELECT statement")
    try:
        sqlite3.connect(":memory:").execute(f"EXPLAIN {query}")
    except sqlite3.Error as error:
        if "no such table" not in str(error) and "no such column" not in str(error):
            raise doc.error(key, f"the query is not valid SQL ({error}); fix it") from error


def _reader_exists(doc: Located, key: tuple[str | int, ...], spec: str, here: Path) -> None:
    module, _, attr = spec.partition(":")
    names = _top_level_names(module_file(module, here))
    if names is not None and attr not in names:
        raise doc.error(key, f"{module} has no function {attr!r}; fix the name")
    if names is None:
        raise doc.error(key, f"cannot find module {module!r} (beside this file or importable)")


def module_file(module: str, here: Path | None = None) -> Path | None:
    """The source file of ``module`` beside ``here`` (an adapter's folder) or importable,
    found without importing it."""
    local = here.joinpath(*module.split(".")).with_suffix(".py") if here is not None else None
    if local is not None and local.is_file():
        return local
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return Path(found.origin) if found is not None and found.origin else None


def _top_level_names(path: Path | None) -> set[str] | None:
    """The names a module binds at its top level (functions, classes and their methods as
    Class.method, assignments, imports), read from its source: nothing of it runs at load."""
    if path is None or not path.is_file():
        return None
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):
        return None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(f"{node.name}.{item.name}")
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def _contracts(doc: Located, here: Path) -> Mapping[str, ToolContract]:
    from crashmatrix.mock_tools.registry import catalogue

    extra = doc.data.get("contracts_dir")
    if extra is not None and not (here / extra).is_dir():
        raise doc.error(("contracts_dir",), f"{here / extra} is not a directory of contract YAML files")
    return catalogue([here / extra] if extra is not None else [])


def _known_tool(
    doc: Located, key: tuple[str | int, ...], tool: str, contracts: Mapping[str, ToolContract]
) -> None:
    if tool not in contracts:
        raise doc.error(
            key,
            f"unknown tool {tool!r}; known tools: {', '.join(sorted(contracts))} "
            "(or add contracts_dir: with its contract)",
        )


def _effect(
    doc: Located, index: int, raw: Mapping[str, Any], contracts: Mapping[str, ToolContract]
) -> EffectSpec:
    key: tuple[str | int, ...] = ("effects", index)
    _known_tool(doc, (*key, "tool"), raw["tool"], contracts)
    sources = [name for name in ("jsonl", "sqlite", "files") if name in raw]
    if len(sources) != 1:
        raise doc.error(key, "give exactly one of jsonl:, sqlite:, files:")
    kind = sources[0]
    if "where" in raw and kind != "jsonl":
        raise doc.error((*key, "where"), "where: filters the lines of a jsonl: effect only")
    where = f"{doc.path}:{':'.join(map(str, doc.where(key)))}"
    ids = dict(raw.get("ids") or {})
    if kind == "sqlite":
        sqlite = raw["sqlite"]
        _inside_workspace(doc, (*key, "sqlite", "path"), sqlite["path"])
        _select(doc, (*key, "sqlite", "query"), sqlite["query"])
        return EffectSpec(
            raw["tool"], "sqlite", sqlite["path"], sqlite["query"], {}, raw.get("counts", ""), ids, where
        )
    _inside_workspace(doc, (*key, kind), raw[kind])
    if "exclude" in raw and kind != "files":
        raise doc.error((*key, "exclude"), "exclude: leaves paths out of a files: glob only")
    return EffectSpec(
        raw["tool"],
        "files" if kind == "files" else "jsonl",
        raw[kind],
        "",
        dict(raw.get("where") or {}),
        raw.get("counts", ""),
        ids,
        where,
        tuple(raw.get("exclude") or ()),
    )


def _intercept(
    doc: Located, tool: str, raw: Mapping[str, Any], contracts: Mapping[str, ToolContract]
) -> Intercept:
    key: tuple[str | int, ...] = ("intercept", tool)
    _known_tool(doc, key, tool, contracts)
    parameters = set((contracts[tool].parameters.get("properties") or {}).keys())
    arguments = dict(raw.get("arguments") or {})
    for name in arguments:
        if parameters and name not in parameters:
            raise doc.error(
                (*key, "arguments", name),
                f"{tool} has no argument {name!r}; its arguments: {', '.join(sorted(parameters))}",
            )
    returns = raw.get("returns", "result")
    if returns not in ("result", "json") and ":" not in returns:
        raise doc.error((*key, "returns"), "write result, json, or module:function")
    call = raw.get("call_id")
    return Intercept(
        tool,
        raw["function"],
        {name: arguments.get(name, name) for name in (parameters or arguments)},
        returns,
        (call["argument"], call.get("key", "")) if call else None,
        raw.get("key", ""),
        f"{doc.path}:{':'.join(map(str, doc.where(key)))}",
    )


def _results(doc: Located, raw: Any) -> ResultMapping:
    """``results:``: a built-in mapping by name, or rules tried in order."""
    if isinstance(raw, str):
        return BUILTIN_MAPPINGS[raw]
    rules: list[CategoryRule] = []
    default = "error"
    for index, item in enumerate(raw):
        key: tuple[str | int, ...] = ("results", index)
        if "default" in item:
            if index != len(raw) - 1 or len(item) != 1:
                raise doc.error(key, "default: stands alone, as the last item")
            default = item["default"]
            continue
        if "category" not in item:
            raise doc.error(key, "each rule names the category it gives (category: uncertain)")
        tests = [name for name in ("equals", "in", "present", "regex") if name in item]
        if len(tests) != 1 or (tests != ["regex"]) != ("field" in item):
            raise doc.error(key, "give field: with one of equals:, in:, present:, or a regex: alone")
        if "regex" in item:
            _regex(doc, (*key, "regex"), item["regex"])
            rules.append(CategoryRule(item["category"], regex=item["regex"]))
        elif "in" in item:
            rules.append(CategoryRule(item["category"], item["field"], one_of=tuple(item["in"])))
        elif "present" in item:
            rules.append(CategoryRule(item["category"], item["field"], present=item["present"]))
        else:
            rules.append(CategoryRule(item["category"], item["field"], item["equals"]))
    return ResultMapping("adapter", tuple(rules), default)


def _catalogue(doc: Located, raw: Any, contracts: Mapping[str, ToolContract]) -> ToolMap:
    """``catalogue:``: the suite's tools this agent has, in its own names."""
    if raw is None:
        return ToolMap.identity()
    tools: dict[str, ToolName] = {}
    seen: dict[str, str] = {}
    for suite, entry in raw.items():
        key: tuple[str | int, ...] = ("catalogue", suite)
        _known_tool(doc, key, suite, contracts)
        entry = entry or {}
        name = entry.get("name", suite)
        if name in seen:
            raise doc.error(
                key, f"the agent's tool {name!r} is already mapped to {seen[name]!r}; map each once"
            )
        seen[name] = suite
        arguments = dict(entry.get("arguments") or {})
        parameters = set((contracts[suite].parameters.get("properties") or {}).keys())
        taken: dict[str, str] = {}
        for argument, theirs in arguments.items():
            if parameters and argument not in parameters:
                raise doc.error(
                    (*key, "arguments", argument),
                    f"{suite} has no argument {argument!r}; its arguments: {', '.join(sorted(parameters))}",
                )
            if theirs in taken:
                # Two of the suite's arguments in one of the agent's: the call could not be
                # read back, and one value would overwrite the other.
                raise doc.error(
                    (*key, "arguments", argument),
                    f"the agent's argument {theirs!r} already holds {taken[theirs]!r}; map each once",
                )
            taken[theirs] = argument
        only = _only(doc, key, suite, entry.get("only"), parameters, arguments)
        shell = entry.get("shell", "simulated")
        if "shell" in entry and suite != "run_command":
            raise doc.error((*key, "shell"), "shell: says what runs run_command; only its entry has it")
        served = doc.data.get("tools", "harness") in ("harness", "mcp") or suite in (
            doc.data.get("intercept") or {}
        )
        if shell == "real" and served:
            # The harness's simulator runs the tool then, whatever the agent would do.
            raise doc.error(
                (*key, "shell"),
                "shell: real, but the harness runs run_command for this agent (tools: harness or "
                "intercept:); write tools: agent without intercepting it, or drop shell: real",
            )
        tools[suite] = ToolName(name, arguments, only, shell)
    return ToolMap(tools)


def _only(
    doc: Located,
    key: tuple[str | int, ...],
    suite: str,
    raw: Any,
    parameters: set[str],
    arguments: Mapping[str, str],
) -> dict[str, tuple[str, ...]]:
    """``only:``: the patterns each argument's value must match, keyed by the agent's name
    of the argument (what a scripted call holds once the catalogue renamed it)."""
    if raw is None:
        return {}
    listed = isinstance(raw, list)
    if listed:
        if len(parameters) != 1:
            raise doc.error(
                (*key, "only"),
                f"a list names no argument, and {suite} has {len(parameters)} "
                f"({', '.join(sorted(parameters))}); write only: {{argument: [patterns]}}",
            )
        raw = {next(iter(parameters)): raw}
    only: dict[str, tuple[str, ...]] = {}
    for argument, patterns in raw.items():
        where: tuple[str | int, ...] = (*key, "only") if listed else (*key, "only", argument)
        if parameters and argument not in parameters:
            raise doc.error(
                where,
                f"{suite} has no argument {argument!r}; only: names the suite's arguments, as "
                f"arguments: does ({', '.join(sorted(parameters))})",
            )
        for index, pattern in enumerate(patterns):
            _regex(doc, (*where, index), pattern)
        only[arguments.get(argument, argument)] = tuple(patterns)
    return only
