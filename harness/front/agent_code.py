"""What an agent's Python source says, read with ``ast`` (nothing of it is imported or run):
its tools and how they are dispatched, the functions that save its records, where its tools
write or post, how it takes a turn and asks for approval. ``read_agent(path) -> Findings``,
a frozen value whose every item carries the line it was read from; ``crashmatrix init``
(``harness/front/init.py``) decides an adapter from it."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crashmatrix.harness.errors import InputError

__all__ = [
    "LEDGER_STATUSES",
    "STATUS_WORDS",
    "Dispatcher",
    "Findings",
    "Http",
    "Prompt",
    "Said",
    "Tool",
    "Write",
    "Writer",
    "read_agent",
]

# -- what was found ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool the agent offers its model, and the function that runs it."""

    name: str
    line: int
    how: str  # "an OpenAI tool schema", "@tool", "the dispatch dict HANDLERS"
    parameters: tuple[str, ...] = ()
    function: str = ""  # module attribute or Class.method; "" when none was found
    held_in: str = ""  # "HANDLERS['send_email']": the dict that holds the function itself
    signature: tuple[str, ...] = ()  # the function's own parameters (a call id among them)
    branch: str = ""  # the function whose ``if name == ...``/``case`` on its name calls ``function``
    inline: int = 0  # the line of a dispatch dict written where it is used, holding ``function``


@dataclass(frozen=True, slots=True)
class Said:
    """One thing a tool returns as its Tool Result: a sentence (``f"sent to {to}"``), JSON
    (``json.dumps(...)``, a dict) or another value, where in the function it is returned
    (an ``except`` handler, after an error check, or the plain path) and the status word a
    ``(status, text)`` pair gives beside it."""

    tool: str
    line: int
    kind: str  # "text" | "json" | "other"
    prefix: str = ""  # the sentence's literal start, up to its first formatted value
    where: str = ""  # "except" | "check" (if not ...:) | "branch" (another if) | "" (the plain path)
    status: str = ""  # "done" of ("done", text): its own status word, if it returns a pair


@dataclass(frozen=True, slots=True)
class Dispatcher:
    """A function that looks a tool's handler up by name (``HANDLERS[name]``): called by name
    itself, so a rule on it fires where one on the handler would not."""

    function: str
    line: int
    name_argument: str  # the parameter holding the tool's name
    name_key: str = ""  # a key inside it (call: function.name)
    call_id: tuple[str, str] | None = None  # (parameter, key) holding the tool call id


@dataclass(frozen=True, slots=True)
class Writer:
    """A function that saves records: a JSONL append (``open(..., "a")`` + ``json.dumps``)
    or a SQLite ``INSERT``. ``record`` is its parameter holding the record."""

    function: str
    line: int
    kind: str  # "jsonl" | "sqlite"
    record: str
    path: str = ""  # the file, when the writer names it itself (a constant)
    path_argument: str = ""  # the parameter naming the file, when callers pass it
    env: str = ""  # the environment variable naming that file, if any
    keys: tuple[tuple[str, str], ...] = ()  # a record written as a dict literal: key -> parameter
    table: str = ""  # sqlite: the table inserted into
    columns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Write:
    """One call of a writer, or one write of a file, inside a function of the agent."""

    writer: str  # the writer function ("" for a plain file write)
    inside: str  # the enclosing function (module attribute or Class.method)
    line: int
    path: str = ""  # the resolved relative path, "" when not constant
    env: str = ""  # the environment variable naming the path, if any
    keys: tuple[tuple[str, str], ...] = ()  # the record's keys -> the parameter they hold
    table: str = ""
    columns: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Http:
    """An HTTP request made inside a function, to a URL read from the environment."""

    inside: str
    line: int
    env: str


@dataclass(frozen=True, slots=True)
class Prompt:
    regex: str
    line: int
    approve: str = "y"
    deny: str = "n"
    names_tool: bool = False


@dataclass(frozen=True, slots=True)
class Findings:
    path: Path
    main: str = ""  # the entry function called with no argument (main)
    main_line: int = 0
    entry: str = ""  # a function taking one message (a function-call entry point)
    entry_line: int = 0
    recover: str = ""  # a function taking nothing that finishes what a killed life left
    turns: str = "unknown"  # "stdin" | "argv" | "stdin_whole" | "call" | "unknown"
    turns_line: int = 0
    turn_prompt: str = ""  # the regex its output ends with when it waits for a turn
    approval: Prompt | None = None
    tools: tuple[Tool, ...] = ()
    dispatchers: tuple[Dispatcher, ...] = ()
    writers: tuple[Writer, ...] = ()
    writes: tuple[Write, ...] = ()
    http: tuple[Http, ...] = ()
    env_defaults: tuple[tuple[str, str, int], ...] = ()  # (variable, default, line)
    uses_tools_url: bool = False  # reads CRASHMATRIX_TOOLS_URL: it calls the harness's tools
    record_keys: frozenset[str] = frozenset()  # keys of every dict literal
    # (key, value, "message" | "ledger") of the "type"/"kind" fields of its records' literals
    type_values: tuple[tuple[str, str, str], ...] = ()
    statuses: frozenset[str] = frozenset()  # the values its dicts give "status"
    result_keys: frozenset[str] = frozenset()
    top_level: frozenset[str] = frozenset()
    module_imports: frozenset[str] = frozenset()
    calls: frozenset[tuple[str, str]] = frozenset()  # (caller, callee) among its own functions
    said: tuple[Said, ...] = ()  # what its tools return as Tool Results
    # A Tool Result message written with "content": json.dumps(...): its tools' return values
    # are wrapped into JSON on their way to the model, whatever they are.
    results_dumped: bool = False


# -- reading --------------------------------------------------------------------------------

_TOOL_DECORATORS = {"tool", "function_tool", "register", "register_tool", "agent_tool"}
_CALL_ID_NAMES = ("tool_call_id", "call_id", "callId", "id")
_ENTRY_NAMES = ("chat", "run", "handle", "ask", "respond", "run_turn", "turn", "reply", "agent", "invoke")
_MESSAGE_NAMES = ("message", "text", "prompt", "user_message", "user_input", "query", "content")
LEDGER_STATUSES = ("approved", "rejected", "running", "succeeded", "failed", "unknown")


# Status words agents use for crashmatrix's (seed 004's started, uncertain, planned are known
# to the loader already).
STATUS_WORDS: Mapping[str, str] = {
    "denied": "rejected",
    "declined": "rejected",
    "refused": "rejected",
    "done": "succeeded",
    "ok": "succeeded",
    "completed": "succeeded",
    "success": "succeeded",
    "error": "failed",
    "errored": "failed",
    "in_flight": "running",
    "in_progress": "running",
    "executing": "running",
    "pending_approval": "planned",
    "in_doubt": "unknown",
}


def read_agent(path: Path) -> Findings:
    """What the agent's source says, read with ``ast``: nothing of it is imported or run.
    ``InputError`` (one line) for a file that is not Python."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: cannot read it ({error}); give the agent's .py file") from error
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as error:
        raise InputError(
            f"{path}:{error.lineno}:{error.offset}: not Python ({error.msg}); give the agent's .py file"
        ) from error
    return _Reader(path, tree).findings()


def _name(node: ast.AST) -> str:
    """``a.b.c`` for a Name/Attribute chain, else ""."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _name(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _const(node: ast.AST | None) -> Any:
    return node.value if isinstance(node, ast.Constant) else None


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    names = [a.arg for a in (*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs)]
    return [n for n in names if n not in ("self", "cls")]


class _Reader:
    """One pass over the module's functions; ``findings()`` is the frozen result."""

    def __init__(self, path: Path, tree: ast.Module) -> None:
        self.path = path
        self.tree = tree
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.classes: dict[str, str] = {}  # method name -> Class.method (first seen)
        self.constants: dict[str, ast.expr] = {}
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        self.functions[f"{node.name}.{item.name}"] = item
                        self.classes.setdefault(item.name, f"{node.name}.{item.name}")
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.constants[target.id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                self.constants[node.target.id] = node.value

    # -- paths ----------------------------------------------------------------------------

    def _env_get(self, node: ast.AST) -> tuple[str, str] | None:
        """``os.environ.get("X", "d")`` / ``os.getenv("X", "d")`` / ``os.environ["X"]``."""
        if isinstance(node, ast.Call) and _name(node.func) in (
            "os.environ.get",
            "os.getenv",
            "environ.get",
            "getenv",
        ):
            variable = _const(node.args[0]) if node.args else None
            default = _const(node.args[1]) if len(node.args) > 1 else None
            if isinstance(variable, str):
                if not isinstance(default, str) and len(node.args) > 1:
                    default = self.resolve(node.args[1], 1)[0]  # str(JOURNAL), a constant path
                return variable, default if isinstance(default, str) else ""
        if isinstance(node, ast.Subscript) and _name(node.value) in ("os.environ", "environ"):
            variable = _const(node.slice)
            if isinstance(variable, str):
                return variable, ""
        return None

    def resolve(self, node: ast.AST, depth: int = 0) -> tuple[str, str]:
        """(relative path, environment variable) an expression names, as far as constants go."""
        if depth > 6:
            return "", ""
        env = self._env_get(node)
        if env is not None:
            return env[1], env[0]
        value = _const(node)
        if isinstance(value, str):
            return value, ""
        if isinstance(node, ast.Name) and node.id in self.constants:
            return self.resolve(self.constants[node.id], depth + 1)
        if isinstance(node, ast.Call) and _name(node.func) in ("Path", "pathlib.Path", "str") and node.args:
            parts = [self.resolve(arg, depth + 1) for arg in node.args]
            if all(p for p, _ in parts):
                return "/".join(p for p, _ in parts), next((e for _, e in parts if e), "")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left, env_left = self.resolve(node.left, depth + 1)
            right, _ = self.resolve(node.right, depth + 1)
            if left and right:
                return f"{left}/{right}", env_left
            if right and _name(node.left):
                # ``workspace / "outbox.jsonl"``: a folder the agent is given at run time, its
                # working directory under the harness (cwd: workspace).
                return right, ""
        return "", ""

    # -- the pieces -----------------------------------------------------------------------

    def walk_functions(self) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        yield from self.functions.items()

    def tools(self) -> list[Tool]:
        found: dict[str, Tool] = {}
        # OpenAI tool schemas: {"type": "function", "function": {"name": ..., "parameters": ...}}
        helpers: dict[str, str] = {}  # a function building schemas -> its parameter naming the tool
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Dict):
                continue
            pairs = {_const(k): v for k, v in zip(node.keys, node.values, strict=True) if k is not None}
            if _const(pairs.get("type")) != "function" or not isinstance(pairs.get("function"), ast.Dict):
                continue
            inner_node = pairs["function"]
            assert isinstance(inner_node, ast.Dict)
            inner = {
                _const(k): v for k, v in zip(inner_node.keys, inner_node.values, strict=True) if k is not None
            }
            name_node = inner.get("name")
            name = _const(name_node)
            parameters = _schema_properties(inner.get("parameters"))
            if isinstance(name, str):
                found.setdefault(name, Tool(name, node.lineno, "an OpenAI tool schema", parameters))
            elif isinstance(name_node, ast.Name):
                for fname, function in self.functions.items():
                    if name_node.id in _parameters(function) and _contains(function, node):
                        helpers[fname] = name_node.id
                # [{"type": "function", "function": {"name": n, ...}} for n, d, p in SPECS]
                for row in self._rows(node, name_node.id, 0):
                    found.setdefault(row.name, row)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and _name(node.func) in helpers:
                function = self.functions[_name(node.func)]
                position = _parameters(function).index(helpers[_name(node.func)])
                name = _const(node.args[position]) if len(node.args) > position else None
                if isinstance(name, str):
                    properties = next(
                        (_dict_keys(a) for a in node.args[position + 1 :] if isinstance(a, ast.Dict)), ()
                    )
                    found.setdefault(name, Tool(name, node.lineno, "an OpenAI tool schema", properties))
                elif len(node.args) > position:
                    # [schema(n, d, p) for n, d, p in SPECS] / [schema(*spec) for spec in SPECS]
                    argument = node.args[position]
                    if isinstance(argument, ast.Starred):
                        argument = argument.value
                    else:
                        position = 0
                    if isinstance(argument, ast.Name):
                        for row in self._rows(node, argument.id, position):
                            found.setdefault(row.name, row)
        # Decorated tools: @tool, @function_tool, @app.tool(), @register("name")
        registries: dict[str, tuple[str, str]] = {}
        for fname, function in self.functions.items():
            for decorator in function.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if _name(target).split(".")[-1] in _TOOL_DECORATORS:
                    given = (
                        _const(decorator.args[0])
                        if isinstance(decorator, ast.Call) and decorator.args
                        else None
                    )
                    name = given if isinstance(given, str) else function.name
                    decorator_text = f"@{_name(target)}"
                    found[name] = Tool(
                        name, function.lineno, decorator_text, tuple(_parameters(function)), fname
                    )
                    registry = self._registry(_name(target))
                    if registry:
                        # The decorator stores the function object itself: calls through the
                        # registry never see the module attribute, as with a dispatch dict.
                        registries[name] = (registry, fname)
        # A dispatch dict written where it is used ({"send_email": send_email}[name](**a)):
        # built at each call from the module's attributes, so a rule on the function fires.
        inline: dict[str, tuple[str, int]] = {}
        for _, function in self.walk_functions():
            for node in ast.walk(function):
                table: ast.expr | None = None
                if isinstance(node, ast.Subscript):
                    table = node.value
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "get"
                ):
                    table = node.func.value
                if not isinstance(table, ast.Dict):
                    continue
                for key, item in zip(table.keys, table.values, strict=True):
                    if isinstance(_const(key), str) and _name(item) in self.functions:
                        inline.setdefault(str(_const(key)), (_name(item), table.lineno))
        # if name == "send_email": / match name: case "send_email": calling a function of its
        # own: that function is called by name, so a rule on it fires.
        branching = self.branches(set(found))
        branches = {name: called for name, (called, _) in branching.items() if called}
        # Dispatch dicts at module level: {"send_email": send_email}
        held: dict[str, tuple[str, str]] = dict(registries)
        for variable, value in self.constants.items():
            if not isinstance(value, ast.Dict):
                continue
            for key, item in zip(value.keys, value.values, strict=True):
                named = _const(key)
                handler = _name(item)
                if isinstance(named, str) and handler in self.functions:
                    held[named] = (variable, handler)
        result = []
        for tool_name in dict.fromkeys([*found, *held]):
            seen = found.get(tool_name) or Tool(
                tool_name,
                self.functions[held[tool_name][1]].lineno,
                f"the dispatch dict {held[tool_name][0]}",
            )
            runs = seen.function
            held_in = ""
            if tool_name in held:
                runs = held[tool_name][1]
                held_in = f"{held[tool_name][0]}[{tool_name!r}]"
            elif not runs and tool_name in inline:
                runs = inline[tool_name][0]
            elif not runs:
                runs = tool_name if tool_name in self.functions else self.classes.get(tool_name, "")
                runs = runs or branches.get(tool_name, "")
            signature = tuple(_parameters(self.functions[runs])) if runs in self.functions else ()
            branch = branching[tool_name][1] if branches.get(tool_name) == runs else ""
            result.append(
                Tool(
                    seen.name,
                    seen.line,
                    seen.how,
                    seen.parameters or signature,
                    runs,
                    held_in,
                    signature,
                    branch,
                    inline[tool_name][1] if tool_name in inline and inline[tool_name][0] == runs else 0,
                )
            )
        return result

    def _rows(self, node: ast.AST, variable: str, position: int) -> list[Tool]:
        """The tools a comprehension over a constant list of tuples builds, where ``node``
        (a schema dict or a helper's call) names the tool by ``variable``: the comprehension's
        target, or the tuple it unpacks (``position`` in it)."""
        for comprehension in ast.walk(self.tree):
            if not isinstance(comprehension, ast.ListComp | ast.GeneratorExp | ast.SetComp):
                continue
            if not _contains(comprehension.elt, node) or len(comprehension.generators) != 1:
                continue
            generator = comprehension.generators[0]
            target, index = generator.target, position
            if isinstance(target, ast.Tuple):
                names = [_name(e) for e in target.elts]
                if variable not in names:
                    return []
                index = names.index(variable)
            elif _name(target) != variable:
                return []
            rows = generator.iter
            if isinstance(rows, ast.Name):
                rows = self.constants.get(rows.id, rows)
            if not isinstance(rows, ast.List | ast.Tuple):
                return []
            tools = []
            for row in rows.elts:
                if not isinstance(row, ast.Tuple) or len(row.elts) <= index:
                    continue
                name = _const(row.elts[index])
                if isinstance(name, str):
                    rest = row.elts[index + 1 :]
                    properties = next(
                        (_properties_of(e) for e in rest if isinstance(e, ast.Dict | ast.List)), ()
                    )
                    tools.append(Tool(name, row.lineno, "an OpenAI tool schema", properties))
            return tools
        return []

    def branches(self, tools: set[str]) -> dict[str, tuple[str, str]]:
        """tool name -> (the function of its own its branch calls first, the function
        branching) for ``if name == "send_email":`` / ``match name: case "send_email":``."""
        # Several functions may branch on the names (describe(), refusal(), run_tool()): the
        # one running the tools is the one whose branches call the most functions of its own.
        best: dict[str, tuple[int, str, str]] = {}
        for fname, function in self.walk_functions():
            here: dict[str, str] = {}
            for node in ast.walk(function):
                if isinstance(node, ast.If | ast.Match):
                    for named in tools:
                        block = _branch_of(node, named, deep=False)
                        if block and named not in here:
                            here[named] = self._first_call(block, fname)
            score = sum(1 for called in here.values() if called)
            for named, called in here.items():
                if named not in best or score > best[named][0]:
                    best[named] = (score, called, fname)
        return {named: (called, fname) for named, (_, called, fname) in best.items()}

    def _first_call(self, body: Sequence[ast.stmt], inside: str) -> str:
        """The first function of its own a block calls (``send_email(**a)``, ``self.mail()``)."""
        for statement in body:
            for node in ast.walk(statement):
                if isinstance(node, ast.Call):
                    called = _name(node.func)
                    if called in self.functions and called != inside:
                        return called
                    bare = called.split(".")[-1]
                    if called.startswith("self.") and bare in self.classes:
                        return self.classes[bare]
        return ""

    def said(self, tools: Sequence[Tool]) -> list[Said]:
        """What each tool returns as its Tool Result: the returns of the function branching
        on its name (``if name == ...``), else of its own function."""
        found: list[Said] = []
        for tool in tools:
            source = tool.branch or tool.function
            function = self.functions.get(source)
            if function is None:
                continue
            body = function.body
            if tool.branch:
                body = _branch_of(function, tool.name) or body
                if not list(_returns(body, "")) and tool.function in self.functions:
                    # result = buy(...) in the branch, its value saved after: what buy returns
                    source, body = tool.function, self.functions[tool.function].body
            for value, where, line in _returns(body, ""):
                called = _name(value.func) if isinstance(value, ast.Call) else ""
                if tool.branch and called and called.split(".")[-1] == tool.function.split(".")[-1]:
                    # case "send_mail": return deliver(**arguments): what deliver returns
                    target = self.functions[tool.function]
                    for inner, inner_where, inner_line in _returns(target.body, where):
                        found.append(self._said(tool.name, inner, inner_where, inner_line, tool.function))
                    continue
                found.append(self._said(tool.name, value, where, line, source))
        return found

    def _said(self, tool: str, value: ast.expr, where: str, line: int, inside: str) -> Said:
        status = ""
        if isinstance(value, ast.Tuple):
            words = [str(_const(e)) for e in value.elts if _const(e) in (*LEDGER_STATUSES, *STATUS_WORDS)]
            status = words[0] if words else ""
            texts = [e for e in value.elts if _const(e) not in (*LEDGER_STATUSES, *STATUS_WORDS)]
            value = texts[-1] if texts else value
        if isinstance(value, ast.Dict) or (
            isinstance(value, ast.Call) and _name(value.func) in ("json.dumps", "dumps")
        ):
            return Said(tool, line, "json", where=where, status=status)
        if isinstance(value, ast.Call):
            # return self.unsure(...) / return describe(...): the sentence that function returns
            called = _name(value.func)
            target = self.functions.get(called) or self.functions.get(
                self.classes.get(called.split(".")[-1], "") if called.startswith("self.") else ""
            )
            if target is not None and called != inside:
                inner = [v for v, _, _ in _returns(target.body, "")]
                if len(inner) == 1 and _sentence(inner[0]) is not None:
                    return Said(tool, line, "text", _sentence(inner[0]) or "", where, status)
        prefix = _sentence(value)
        if prefix is None:
            return Said(tool, line, "other", where=where, status=status)
        return Said(tool, line, "text", prefix, where, status)

    def _registry(self, decorator: str) -> str:
        """The module-level dict a decorator of this module stores functions in
        (``REGISTRY[function.__name__] = function``), or ""."""
        function = self.functions.get(decorator)
        if function is None:
            return ""
        for node in ast.walk(function):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Subscript) and _name(target.value) in self.constants:
                        return _name(target.value)
        return ""

    def dispatchers(self, dicts: set[str]) -> list[Dispatcher]:
        """Functions that index a dispatch dict with something their parameters hold."""
        found = []
        for fname, function in self.walk_functions():
            parameters = _parameters(function)
            for node in ast.walk(function):
                index: ast.AST | None = None
                if (
                    isinstance(node, ast.Subscript)
                    and isinstance(node.ctx, ast.Load)
                    and _name(node.value) in dicts
                ):
                    index = node.slice
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "get"
                    and _name(node.func.value) in dicts
                    and node.args
                ):
                    index = node.args[0]
                if index is None:
                    continue
                if isinstance(index, ast.Name) and index.id not in parameters:
                    # name = call["function"]["name"]; HANDLERS[name]: the local's value
                    index = next(
                        (
                            a.value
                            for a in ast.walk(function)
                            if isinstance(a, ast.Assign) and any(_name(t) == index.id for t in a.targets)
                        ),
                        index,
                    )
                argument, key = _parameter_path(index, parameters)
                if not argument:
                    continue
                call_id = next(((p, "") for p in _CALL_ID_NAMES if p in parameters and p != "id"), None)
                if call_id is None and argument in parameters and key:
                    call_id = (argument, "id")  # the call dict itself: its "id"
                found.append(Dispatcher(fname, function.lineno, argument, key, call_id))
                break
        return found

    def writers(self) -> list[Writer]:
        found = []
        for fname, function in self.walk_functions():
            parameters = _parameters(function)
            appends = any(_is_append_open(node) for node in ast.walk(function))
            dumps = any(
                isinstance(n, ast.Call) and _name(n.func) in ("json.dumps", "dumps")
                for n in ast.walk(function)
            )
            if appends and dumps:
                record = _dumped_parameter(function, parameters)
                path_argument = next(
                    (p for p in parameters if p in ("path", "file", "filename", "target", "where")), ""
                )
                path, env = "", ""
                for node in ast.walk(function):
                    if _is_append_open(node):
                        assert isinstance(node, ast.Call)
                        opened = (
                            node.args[0]
                            if node.args and _name(node.func) in ("open", "io.open")
                            else (node.func.value if isinstance(node.func, ast.Attribute) else None)
                        )
                        if opened is not None:
                            path, env = self.resolve(opened)
                            if isinstance(opened, ast.Name) and opened.id in parameters:
                                path_argument = opened.id
                            if not path and _name(opened).startswith("self.") and "." in fname:
                                # Journal(JOURNAL).write: open(self.path, "a"): the path the
                                # class is built with.
                                path, env = self._constructed_with(fname.split(".")[0])
                literal = next(
                    (
                        n.args[0]
                        for n in ast.walk(function)
                        if isinstance(n, ast.Call)
                        and _name(n.func) in ("json.dumps", "dumps")
                        and n.args
                        and isinstance(n.args[0], ast.Dict)
                    ),
                    None,
                )
                keys = _literal_keys(literal, parameters)
                found.append(Writer(fname, function.lineno, "jsonl", record, path, path_argument, env, keys))
            for node in ast.walk(function):
                sql = _insert_sql(node)
                if sql is not None:
                    table, columns = sql
                    record = _dumped_parameter(function, parameters)
                    found.append(
                        Writer(fname, function.lineno, "sqlite", record, table=table, columns=columns)
                    )
                    break
        return found

    def _constructed_with(self, cls: str) -> tuple[str, str]:
        """The path a class is built with somewhere (``Journal(JOURNAL)``), as far as
        constants go."""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and _name(node.func) == cls and node.args:
                path, env = self.resolve(node.args[0])
                if path:
                    return path, env
        return "", ""

    def writes(self, writers: Sequence[Writer]) -> list[Write]:
        """Where each writer is called from, with the path it is given."""
        by_name = {w.function.split(".")[-1]: w for w in writers}
        found = []
        for fname, function in self.walk_functions():
            parameters = _parameters(function)
            # Files it opens itself (with open(...) as file): file.write is not Journal.write.
            handles = {
                _name(item.optional_vars)
                for node in ast.walk(function)
                if isinstance(node, ast.With | ast.AsyncWith)
                for item in node.items
                if item.optional_vars is not None
            }
            for node in ast.walk(function):
                if not isinstance(node, ast.Call):
                    continue
                called = _name(node.func).split(".")[-1]
                writer = by_name.get(called)
                if writer is None or writer.function == fname:
                    continue
                receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
                if receiver is not None and (_name(receiver) in handles or isinstance(receiver, ast.Call)):
                    continue
                path, env = writer.path, writer.env
                target = self.functions.get(writer.function)
                if writer.path_argument and target is not None:
                    position = (
                        _parameters(target).index(writer.path_argument)
                        if writer.path_argument in _parameters(target)
                        else -1
                    )
                    given = node.args[position] if 0 <= position < len(node.args) else None
                    if given is not None:
                        path, env = self.resolve(given)
                record = next((a for a in node.args if isinstance(a, ast.Dict)), None)
                keys = (
                    tuple(
                        (str(_const(k)), _name(v))
                        for k, v in zip(record.keys, record.values, strict=True)
                        if record is not None and isinstance(_const(k), str) and _name(v) in parameters
                    )
                    if record is not None
                    else ()
                )
                found.append(
                    Write(writer.function, fname, node.lineno, path, env, keys, writer.table, writer.columns)
                )
            # SQLite inserts made in the function itself: connect(path) ... INSERT INTO t
            sql = next((s for s in map(_insert_sql, ast.walk(function)) if s is not None), None)
            if sql is not None:
                path, env = "", ""
                for node in ast.walk(function):
                    if (
                        isinstance(node, ast.Call)
                        and _name(node.func) in ("sqlite3.connect", "connect")
                        and node.args
                    ):
                        path, env = self.resolve(node.args[0])
                if not path:  # a helper opening the database: sqlite3.connect in a function it calls
                    for node in ast.walk(function):
                        if isinstance(node, ast.Call) and _name(node.func).split(".")[-1] in self.functions:
                            helper = self.functions[_name(node.func).split(".")[-1]]
                            for inner in ast.walk(helper):
                                if (
                                    isinstance(inner, ast.Call)
                                    and _name(inner.func) in ("sqlite3.connect", "connect")
                                    and inner.args
                                ):
                                    path, env = self.resolve(inner.args[0])
                keys = tuple((c, c) for c in sql[1])
                found.append(Write("", fname, function.lineno, path, env, keys, sql[0], sql[1]))
        return found

    def http(self) -> list[Http]:
        """Requests to a service whose address comes from the environment: a call (``urlopen``,
        ``requests.post``, or the agent's own helper) given a URL built from such a variable."""
        found = []
        for fname, function in self.walk_functions():
            for node in ast.walk(function):
                if not isinstance(node, ast.Call) or _name(node.func) in ("os.environ.get", "os.getenv"):
                    continue
                for part in [*node.args, *(k.value for k in node.keywords)]:
                    env = self._url_env(part)
                    if env:
                        found.append(Http(fname, node.lineno, env))
                        break
                else:
                    continue
                break
        return found

    def _url_env(self, node: ast.AST) -> str:
        """The environment variable a URL expression is built from (``f"{MAIL_API}/emails"``)."""
        for inner in ast.walk(node):
            env = self._env_get(inner)
            if env is None and isinstance(inner, ast.Name) and inner.id in self.constants:
                env = next((e for e in map(self._env_get, ast.walk(self.constants[inner.id])) if e), None)
            words = ("URL", "API", "HOST", "ENDPOINT", "BASE")
            if (
                env is not None
                and not env[0].upper().startswith("OPENAI")
                and any(w in env[0].upper() for w in words)
            ):
                return env[0]
        return ""

    def turns(self) -> tuple[str, int, str, Prompt | None]:
        """How a turn arrives, the turn prompt, and the approval prompt."""
        approval: Prompt | None = None
        prompt, via, line = "", "unknown", 0
        for _, function in self.walk_functions():
            for node in ast.walk(function):
                if not isinstance(node, ast.Call):
                    continue
                called = _name(node.func)
                if called == "input":
                    text = node.args[0] if node.args else None
                    regex, names_tool, plain = self._prompt_regex(text, function)
                    if isinstance(text, ast.Name):
                        # question = "..." / f"..." in branches, then input(question)
                        options = [
                            self._prompt_regex(a.value, function)
                            for a in ast.walk(function)
                            if isinstance(a, ast.Assign) and any(_name(t) == text.id for t in a.targets)
                        ]
                        options = [o for o in options if o[0]]
                        if options:
                            regexes = list(dict.fromkeys(o[0] for o in options))
                            regex = regexes[0] if len(regexes) == 1 else "(?:" + "|".join(regexes) + ")"
                            names_tool = any(o[1] for o in options)
                            plain = " | ".join(o[2] for o in options)
                    if _asks_approval(plain):
                        if approval is None:
                            approve, deny = _answers(plain)
                            approval = Prompt(regex, node.lineno, approve, deny, names_tool)
                    elif via == "unknown" or not prompt:
                        prompt, via, line = regex, "stdin", node.lineno
                elif called in ("sys.stdin.readline", "stdin.readline"):
                    printed = self._printed_before(function, node)
                    if _asks_approval(printed):
                        # sys.stdout.write(f"Approve {name} ...? [y/n] "); sys.stdin.readline()
                        if approval is None:
                            regex, names_tool = self._printed_before_regex(function, node)
                            approve, deny = _answers(printed)
                            approval = Prompt(regex, node.lineno, approve, deny, names_tool)
                    elif via in ("unknown", "stdin_whole", "argv"):
                        via, line = "stdin", node.lineno
                        prompt = prompt or self._printed_before(function, node, as_regex=True)
                elif called in ("sys.stdin.read", "stdin.read") and via == "unknown":
                    via, line = "stdin_whole", node.lineno
            for node in ast.walk(function):
                if (
                    isinstance(node, ast.For)
                    and _name(node.iter) in ("sys.stdin", "stdin")
                    and via == "unknown"
                ):
                    via, line = "stdin", node.lineno
        if via == "unknown":
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Attribute) and _name(node) == "sys.argv":
                    via, line = "argv", node.lineno
                    break
        return via, line, prompt, approval

    def _printed_before_regex(self, function: ast.AST, at: ast.AST) -> tuple[str, bool]:
        regex, names_tool = "", False
        for node in ast.walk(function):
            if getattr(node, "lineno", 0) > getattr(at, "lineno", 0):
                continue
            if isinstance(node, ast.Call) and _name(node.func) in ("sys.stdout.write", "print"):
                value = node.args[0] if node.args else None
                if isinstance(value, ast.JoinedStr | ast.Constant):
                    regex, names_tool, _ = self._prompt_regex(value, function)
        return regex, names_tool

    def _printed_before(self, function: ast.AST, at: ast.AST, *, as_regex: bool = False) -> str:
        """The text last written with ``print(..., end="")`` / ``sys.stdout.write`` before ``at``."""
        text = ""
        for node in ast.walk(function):
            if getattr(node, "lineno", 0) > getattr(at, "lineno", 0):
                continue
            if isinstance(node, ast.Call) and _name(node.func) in ("sys.stdout.write", "print"):
                value = node.args[0] if node.args else None
                if isinstance(value, ast.JoinedStr | ast.Constant):
                    regex, _, plain = self._prompt_regex(value, function)
                    text = regex if as_regex else plain
        return text

    def _prompt_regex(self, node: ast.AST | None, function: ast.AST) -> tuple[str, bool, str]:
        """(regex, names its tool, the plain text) of a prompt literal or f-string."""
        if node is None:
            return "", False, ""
        value = _const(node)
        if isinstance(value, str):
            return re.escape(value).replace("\\ ", " "), False, value
        if not isinstance(node, ast.JoinedStr):
            return "", False, ""
        regex, plain, names_tool, again = [], [], False, False
        for part in node.values:
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                regex.append(re.escape(part.value).replace("\\ ", " "))
                plain.append(part.value)
                continue
            assert isinstance(part, ast.FormattedValue)
            source = ast.unparse(part.value)
            word = self._either_or(part.value, function)
            if word is not None and not again:
                regex.append(f"(?P<again>{re.escape(word).replace(chr(92) + ' ', ' ')})?")
                again = True
            elif ("name" in source or "tool" in source) and not names_tool:
                regex.append(r"(?P<tool>\w+)")
                names_tool = True
            else:
                regex.append(r"\S+" if "id" in source else ".*?")
            plain.append("{" + source + "}")
        return "".join(regex), names_tool, "".join(plain)

    def _either_or(self, node: ast.AST, function: ast.AST) -> str | None:
        """The word of ``x if again else ""`` (in place, or assigned to a local first)."""
        expression: ast.AST | None = node
        if isinstance(node, ast.Name):
            expression = next(
                (
                    a.value
                    for a in ast.walk(function)
                    if isinstance(a, ast.Assign) and any(_name(t) == node.id for t in a.targets)
                ),
                None,
            )
        if isinstance(expression, ast.IfExp):
            body, other = _const(expression.body), _const(expression.orelse)
            if isinstance(body, str) and other == "" and body:
                return body
        return None

    def entry(self) -> tuple[str, int, str, int]:
        main = self.functions.get("main")
        entry = next(
            (
                (name, f.lineno)
                for name, f in self.functions.items()
                if "." not in name
                and name.lstrip("_") in _ENTRY_NAMES
                and len(_required(f)) == 1
                and _required(f)[0] in _MESSAGE_NAMES
            ),
            ("", 0),
        )
        if main is not None and not _required(main):
            return "main", main.lineno, *entry
        return "", 0, *entry

    def calls(self) -> frozenset[tuple[str, str]]:
        """Which of its functions call which (``helper(...)``, ``self.method(...)``)."""
        found = set()
        for caller, function in self.walk_functions():
            for node in ast.walk(function):
                if not isinstance(node, ast.Call):
                    continue
                called = _name(node.func)
                bare = called.split(".")[-1]
                if called in self.functions:
                    found.add((caller, called))
                elif called.startswith("self.") and bare in self.classes:
                    found.add((caller, self.classes[bare]))
        return frozenset(found)

    def findings(self) -> Findings:
        tools = self.tools()
        dicts = {t.held_in.partition("[")[0] for t in tools if t.held_in}
        writers = self.writers()
        via, line, prompt, approval = self.turns()
        main, main_line, entry, entry_line = self.entry()
        if not main and entry:
            via, line = "call", entry_line
        dicts_literals = [n for n in ast.walk(self.tree) if isinstance(n, ast.Dict)]
        keys = frozenset(str(_const(k)) for d in dicts_literals for k in d.keys if isinstance(_const(k), str))
        # Records only: a dict holding a message, a status or a call id (a tool schema's
        # "type": "function" says nothing of how the session tells its records apart).
        records = [
            d
            for d in dicts_literals
            if {"message", "status", "role", "tool_call_id", "callId"} & set(_dict_keys(d))
            or (
                None in d.keys and {"type", "kind", "entry", "record"} & set(_dict_keys(d))
            )  # {"kind": "chat", **message}
        ]
        type_values = tuple(
            dict.fromkeys(
                (str(_const(k)), str(_const(v)), "ledger" if "status" in _dict_keys(d) else "message")
                for d in records
                for k, v in zip(d.keys, d.values, strict=True)
                if _const(k) in ("type", "kind", "entry", "record") and isinstance(_const(v), str)
            )
        )
        statuses = frozenset(
            str(_const(v))
            for d in dicts_literals
            for k, v in zip(d.keys, d.values, strict=True)
            if _const(k) == "status" and isinstance(_const(v), str)
        ) | frozenset(
            str(_const(arg))
            for node in ast.walk(self.tree)
            if isinstance(node, ast.Call)
            for arg in node.args
            if _const(arg) in LEDGER_STATUSES or _const(arg) in STATUS_WORDS
        )
        env_defaults = tuple(
            dict.fromkeys(
                (env[0], env[1], getattr(node, "lineno", 0))
                for node in ast.walk(self.tree)
                for env in [self._env_get(node)]
                if env is not None
            )
        )
        names: set[str] = set()
        imports: set[str] = set()
        for node in self.tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                for alias in node.names:
                    names.add((alias.asname or alias.name).split(".")[0])
                    imports.add(
                        (node.module or alias.name) if isinstance(node, ast.ImportFrom) else alias.name
                    )
        uses_tools_url = any(v == "CRASHMATRIX_TOOLS_URL" for v, _, _ in env_defaults)
        return Findings(
            path=self.path,
            main=main,
            main_line=main_line,
            entry=entry,
            entry_line=entry_line,
            recover=next(
                (
                    n
                    for n in ("recover", "resume", "restore", "recover_pending")
                    if n in self.functions and not _required(self.functions[n])
                ),
                "",
            ),
            turns=via,
            turns_line=line,
            turn_prompt=prompt,
            approval=approval,
            tools=tuple(tools),
            dispatchers=tuple(self.dispatchers(dicts)),
            writers=tuple(writers),
            writes=tuple(self.writes(writers)),
            http=tuple(self.http()),
            env_defaults=env_defaults,
            uses_tools_url=uses_tools_url,
            record_keys=keys,
            type_values=type_values,
            statuses=statuses,
            result_keys=keys,
            top_level=frozenset([*self.functions, *self.constants, *names]),
            module_imports=frozenset(imports),
            calls=self.calls(),
            said=tuple(self.said(tools)),
            results_dumped=any(
                _name(value.func) in ("json.dumps", "dumps")
                for d in dicts_literals
                if "tool_call_id" in _dict_keys(d) or "callId" in _dict_keys(d)
                for key, value in zip(d.keys, d.values, strict=True)
                if _const(key) in ("content", "output", "result") and isinstance(value, ast.Call)
            ),
        )


def _sentence(value: ast.AST) -> str | None:
    """The literal start of a string a function returns (``f"sent to {to}"`` -> "sent to "),
    "" for one starting with a value; None for what is no sentence."""
    if isinstance(value, ast.Constant):
        return value.value if isinstance(value.value, str) else None
    if isinstance(value, ast.JoinedStr):
        start = value.values[0] if value.values else None
        return start.value if isinstance(start, ast.Constant) and isinstance(start.value, str) else ""
    if isinstance(value, ast.Call) and _name(value.func) == "str":
        return ""
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add):
        return _sentence(value.left)
    return None


_STATE_CHECKS = ("exists", "is_file", "is_dir", "isfile", "isdir", "startswith", "endswith", "isdigit")


def _is_error_check(test: ast.expr) -> bool:
    """``if not ok:``, ``if x is None:``, ``if error:``: the branch of a failure."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        # if not OUTBOX.exists(): a state of the world ("nothing sent yet"), not a failure
        operand = test.operand
        return not (isinstance(operand, ast.Call) and _name(operand.func).split(".")[-1] in _STATE_CHECKS)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and _const(test.comparators[0]) is None:
        return isinstance(test.ops[0], ast.Is)
    return any(word in _name(test).lower() for word in ("error", "err", "problem", "failed"))


def _returns(body: Sequence[ast.stmt], where: str) -> Iterator[tuple[ast.expr, str, int]]:
    """(value, where, line) of each ``return value`` in a block, nested functions left out;
    ``where``: "except" inside a handler, "check" after an error check, "branch" in another
    ``if``, "" on the plain path. A ``raise`` is no Tool Result: it is not read."""
    for statement in body:
        if isinstance(statement, ast.Return) and statement.value is not None:
            yield statement.value, where, statement.lineno
        elif isinstance(statement, ast.If):
            inner = where or ("check" if _is_error_check(statement.test) else "branch")
            yield from _returns(statement.body, inner)
            yield from _returns(statement.orelse, where or "branch")
        elif isinstance(statement, ast.Try):
            yield from _returns(statement.body, where)
            for handler in statement.handlers:
                yield from _returns(handler.body, "except")
            yield from _returns(statement.orelse, where)
            yield from _returns(statement.finalbody, where)
        elif isinstance(statement, ast.For | ast.AsyncFor | ast.While | ast.With | ast.AsyncWith):
            yield from _returns(statement.body, where)
        elif isinstance(statement, ast.Match):
            for case in statement.cases:
                yield from _returns(case.body, where or "branch")


def _branch_of(function: ast.AST, tool: str, *, deep: bool = True) -> list[ast.stmt]:
    """The block run for ``tool`` in a function branching on its name (``deep``: anywhere in
    it, else ``function`` itself being the ``if`` or ``match``)."""
    for node in ast.walk(function) if deep else [function]:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and any(_const(x) == tool for x in [node.test.left, *node.test.comparators])
        ):
            return node.body
        if isinstance(node, ast.Match):
            for case in node.cases:
                if isinstance(case.pattern, ast.MatchValue) and _const(case.pattern.value) == tool:
                    return case.body
    return []


def _properties_of(node: ast.AST) -> tuple[str, ...]:
    """A schema's parameters (``{"type": "object", "properties": {...}}``), its properties
    dict itself, or a list of names."""
    if isinstance(node, ast.List):
        return tuple(str(_const(e)) for e in node.elts if isinstance(_const(e), str))
    return _schema_properties(node) or tuple(k for k in _dict_keys(node) if k not in ("type", "required"))


def _literal_keys(record: ast.AST | None, parameters: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """The keys of a dict literal whose values are parameters: ``{"call": call_id}``."""
    if not isinstance(record, ast.Dict):
        return ()
    return tuple(
        (str(_const(k)), _name(v))
        for k, v in zip(record.keys, record.values, strict=True)
        if isinstance(_const(k), str) and _name(v) in parameters
    )


def _required(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    positional = [*function.args.posonlyargs, *function.args.args]
    required = positional[: len(positional) - len(function.args.defaults)]
    return [a.arg for a in required if a.arg not in ("self", "cls")]


def _contains(outer: ast.AST, inner: ast.AST) -> bool:
    return any(node is inner for node in ast.walk(outer))


def _schema_properties(node: ast.AST | None) -> tuple[str, ...]:
    if not isinstance(node, ast.Dict):
        return ()
    for key, value in zip(node.keys, node.values, strict=True):
        if _const(key) == "properties":
            return _dict_keys(value)
    return ()


def _dict_keys(node: ast.AST) -> tuple[str, ...]:
    if not isinstance(node, ast.Dict):
        return ()
    return tuple(str(_const(k)) for k in node.keys if isinstance(_const(k), str))


def _is_append_open(node: ast.AST) -> bool:
    """``open(p, "a")`` / ``p.open("a")`` / ``open(p, mode="ab")``."""
    if not isinstance(node, ast.Call):
        return False
    called = _name(node.func)
    modes = [_const(a) for a in node.args] + [_const(k.value) for k in node.keywords if k.arg == "mode"]
    appending = any(isinstance(m, str) and m.startswith("a") and len(m) <= 3 for m in modes)
    return appending and (called in ("open", "io.open") or called.endswith(".open"))


def _dumped_parameter(function: ast.FunctionDef | ast.AsyncFunctionDef, parameters: Sequence[str]) -> str:
    """The parameter a writer serialises: the one ``json.dumps`` is given, else the first
    parameter annotated as a dict, else the last one."""
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and _name(node.func) in ("json.dumps", "dumps") and node.args:
            argument = node.args[0]
            if isinstance(argument, ast.Name) and argument.id in parameters:
                return argument.id
    for arg in function.args.args:
        if (
            arg.arg in parameters
            and arg.annotation is not None
            and "dict" in ast.unparse(arg.annotation).lower()
        ):
            return arg.arg
    return parameters[-1] if parameters else ""


_INSERT = re.compile(r"\bINSERT\s+(?:OR\s+\w+\s+)?INTO\s+(\w+)\s*(?:\(([^)]*)\))?", re.IGNORECASE)


def _insert_sql(node: ast.AST) -> tuple[str, tuple[str, ...]] | None:
    if (
        not isinstance(node, ast.Call)
        or not isinstance(node.func, ast.Attribute)
        or node.func.attr not in ("execute", "executemany")
    ):
        return None
    sql = _const(node.args[0]) if node.args else None
    if not isinstance(sql, str):
        return None
    match = _INSERT.search(sql)
    if match is None:
        return None
    columns = tuple(c.strip() for c in (match.group(2) or "").split(",") if c.strip())
    return match.group(1), columns


def _parameter_path(node: ast.AST, parameters: Sequence[str]) -> tuple[str, str]:
    """``name`` -> (name, ""); ``call["function"]["name"]`` -> (call, function.name)."""
    keys: list[str] = []
    while isinstance(node, ast.Subscript):
        key = _const(node.slice)
        if not isinstance(key, str):
            return "", ""
        keys.insert(0, key)
        node = node.value
    if isinstance(node, ast.Attribute):  # call.function.name (an SDK object)
        base = _name(node)
        head, _, rest = base.partition(".")
        if head in parameters:
            return head, ".".join([*rest.split("."), *keys])
    if isinstance(node, ast.Name) and node.id in parameters:
        return node.id, ".".join(keys)
    return "", ""


def _asks_approval(text: str) -> bool:
    return bool(re.search(r"\[(y|yes)/(n|no)\]|approve|allow|confirm|permit", text, re.IGNORECASE))


def _answers(text: str) -> tuple[str, str]:
    match = re.search(r"\[(\w+)/(\w+)\]", text)
    if match is None:
        return "y", "n"
    return match.group(1).lower(), match.group(2).lower()
