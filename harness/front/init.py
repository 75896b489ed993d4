"""``crashmatrix init AGENT.py``: a commented adapter written by reading the agent's code.

Three steps, kept apart as the rest of the harness keeps them:

* ``read_agent(path) -> Findings`` reads the agent's source with ``ast`` (nothing of it runs):
  where it saves its conversation, which functions are its tools and how they are dispatched,
  where their effects land, how it takes a turn, how it asks for approval. Pure: a frozen
  value of what was found, each item with the line it was read from.
* ``draft(findings, ...) -> Draft`` decides the adapter from that value and the suite's tool
  contracts, and renders it as YAML in which every key says why it was chosen and from which
  line; what it could not decide is a ``TODO`` (a ``# TODO:`` comment, and a line printed).
* ``main_init(argv)``, the edge: writes the file, loads it with the real loader
  (``load_foreign``), and unless ``--no-run`` runs one clean case of a built-in scenario that
  applies (``doctor_scenario``: send_email's ``send_once.yaml`` for an email tool) and lists
  its crash points, as ``crashmatrix points`` does.

Exit 0 with an adapter whose clean run passed a boundary, 1 with TODOs that block a run (or a
clean run that passed none), 2 on bad input, in one line.

The boundary rules it writes are the ones that fire whatever the dispatch style: the
function that appends the conversation or the ledger (always called by name), and for a tool
held in a dispatch dict (``HANDLERS = {"send_email": send_email}``, whose module attribute is
never called) the function that looks the handler up, with ``where:`` on the tool's name.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crashmatrix.harness.errors import CrashmatrixError, InputError

__all__ = ["Draft", "Findings", "draft", "main_init", "read_agent"]

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
    type_values: tuple[tuple[str, str], ...] = ()  # (key, value) of "type"/"kind" literals
    statuses: frozenset[str] = frozenset()  # the values its dicts give "status"
    result_keys: frozenset[str] = frozenset()
    top_level: frozenset[str] = frozenset()
    module_imports: frozenset[str] = frozenset()


# -- reading --------------------------------------------------------------------------------

_TOOL_DECORATORS = {"tool", "function_tool", "register", "register_tool", "agent_tool"}
_CALL_ID_NAMES = ("tool_call_id", "call_id", "callId", "id")
_ENTRY_NAMES = ("chat", "run", "handle", "ask", "respond", "run_turn", "turn", "reply", "agent", "invoke")
_MESSAGE_NAMES = ("message", "text", "prompt", "user_message", "user_input", "query", "content")
_LEDGER_STATUSES = ("approved", "rejected", "running", "succeeded", "failed", "unknown")


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
            elif not runs:
                runs = tool_name if tool_name in self.functions else self.classes.get(tool_name, "")
            signature = tuple(_parameters(self.functions[runs])) if runs in self.functions else ()
            result.append(
                Tool(seen.name, seen.line, seen.how, seen.parameters or signature, runs, held_in, signature)
            )
        return result

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

    def writes(self, writers: Sequence[Writer]) -> list[Write]:
        """Where each writer is called from, with the path it is given."""
        by_name = {w.function.split(".")[-1]: w for w in writers}
        found = []
        for fname, function in self.walk_functions():
            parameters = _parameters(function)
            for node in ast.walk(function):
                if not isinstance(node, ast.Call):
                    continue
                called = _name(node.func).split(".")[-1]
                writer = by_name.get(called)
                if writer is None or writer.function == fname:
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
        found = []
        for fname, function in self.walk_functions():
            for node in ast.walk(function):
                if isinstance(node, ast.Call) and _name(node.func).split(".")[-1] in (
                    "urlopen",
                    "post",
                    "Request",
                    "request",
                ):
                    for name in ast.walk(node):
                        env = self._env_get(name)
                        if env is None and isinstance(name, ast.Name) and name.id in self.constants:
                            env = self._env_get(self.constants[name.id]) or next(
                                (e for e in map(self._env_get, ast.walk(self.constants[name.id])) if e), None
                            )
                        if env is not None and "URL" in env[0].upper() and not env[0].startswith("OPENAI"):
                            found.append(Http(fname, node.lineno, env[0]))
                            break
        return found

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
                    if _asks_approval(plain):
                        if approval is None:
                            approve, deny = _answers(plain)
                            approval = Prompt(regex, node.lineno, approve, deny, names_tool)
                    elif via == "unknown" or not prompt:
                        prompt, via, line = regex, "stdin", node.lineno
                elif called in ("sys.stdin.readline", "stdin.readline"):
                    if via in ("unknown", "stdin_whole", "argv") and not _asks_approval(
                        self._printed_before(function, node)
                    ):
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
        type_values = tuple(
            dict.fromkeys(
                (str(_const(k)), str(_const(v)))
                for d in dicts_literals
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
            if _const(arg) in _LEDGER_STATUSES
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
        )


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


# -- deciding and rendering ----------------------------------------------------------------

# Argument names the suite's tools use, and what agents commonly call them.
_SYNONYMS: Mapping[str, tuple[str, ...]] = {
    "to": ("recipient", "to_address", "address", "email", "receiver", "dest", "to_email"),
    "subject": ("title", "topic", "heading"),
    "body": ("text", "content", "message", "msg"),
    "item": ("product", "sku", "article", "name", "item_name"),
    "quantity": ("count", "qty", "amount", "number", "n"),
    "path": ("filename", "file", "file_path", "filepath", "name"),
    "content": ("text", "data", "body", "contents"),
    "command": ("cmd", "shell", "line"),
    "idempotency_key": ("key",),
}
_WORLD_COUNTS = {"send_email": "emails", "create_order": "orders"}
_SERVICE_OF = {"create_order": "orders", "send_email": "mail"}
_TOOL_WORDS: Mapping[str, tuple[str, ...]] = {
    "send_email": ("mail", "email"),
    "create_order": ("order",),
    "write_file": ("write", "save", "note"),
    "read_file": ("read",),
    "list_files": ("list_files", "ls"),
    "run_command": ("command", "bash", "shell", "exec"),
    "list_sent_emails": ("sent", "list_mail", "list_email"),
}


@dataclass(frozen=True, slots=True)
class Match:
    suite: str
    tool: Tool
    arguments: tuple[tuple[str, str], ...]  # suite argument -> the agent's, where they differ


@dataclass(frozen=True, slots=True)
class Todo:
    text: str
    blocking: bool


@dataclass(frozen=True, slots=True)
class Draft:
    text: str
    todos: tuple[Todo, ...]
    matches: tuple[Match, ...] = ()
    launcher: str = ""  # the source of a launcher to write beside the adapter (entry point)

    @property
    def blocked(self) -> bool:
        return any(todo.blocking for todo in self.todos)


def match_tools(tools: Sequence[Tool], suite: Mapping[str, Sequence[str]]) -> list[Match]:
    """Each of the agent's tools matched to one of the suite's by name, then by words in the
    name and its arguments' names; each suite tool at most once."""
    matches: list[Match] = []
    taken: set[str] = set()
    for tool in tools:
        best: tuple[int, str, tuple[tuple[str, str], ...]] | None = None
        for name, parameters in suite.items():
            if name in taken or name.endswith(("_yaml", "_unkeyed")):
                continue
            mapped = _map_arguments(parameters, tool.parameters)
            if mapped is None:
                continue
            score = 10 if tool.name == name else 0
            score += sum(3 for word in _TOOL_WORDS.get(name, ()) if word in tool.name.lower())
            score += sum(1 for suite_arg, theirs in mapped if suite_arg == theirs)
            if score < 3:
                continue
            if best is None or score > best[0]:
                best = (score, name, mapped)
        if best is not None:
            taken.add(best[1])
            renamed = tuple((a, b) for a, b in best[2] if a != b)
            matches.append(Match(best[1], tool, renamed))
    return matches


def _map_arguments(suite: Sequence[str], theirs: Sequence[str]) -> tuple[tuple[str, str], ...] | None:
    """The suite's arguments in the agent's names, or None when one has no counterpart
    (the model's call could not be made)."""
    if not theirs:
        return tuple((a, a) for a in suite) if not suite else None
    pairs: list[tuple[str, str]] = []
    free = [t for t in theirs if t not in ("call_id", "tool_call_id", "workspace", "turn", "self")]
    for argument in suite:
        if argument in free:
            pairs.append((argument, argument))
            free.remove(argument)
            continue
        other = next((t for t in free if t in _SYNONYMS.get(argument, ())), None)
        if other is None:
            if argument == "note":  # create_order's optional note
                continue
            return None
        pairs.append((argument, other))
        free.remove(other)
    return tuple(pairs)


class _Yaml:
    """Lines of YAML with their comments, aligned."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def add(self, text: str, why: str = "") -> None:
        self.lines.append((text, why))

    def comment(self, text: str) -> None:
        self.lines.append((f"# {text}", ""))

    def render(self) -> str:
        width = min(max((len(t) for t, w in self.lines if w), default=0), 60)
        out = []
        for text, why in self.lines:
            out.append(f"{text.ljust(width)}  # {why}" if why else text)
        return "\n".join(out) + "\n"


def _q(text: str) -> str:
    """A YAML single-quoted scalar (no escapes inside: a regex stays as written)."""
    return "'" + text.replace("'", "''") + "'"


def draft(
    findings: Findings,
    suite: Mapping[str, Sequence[str]],
    *,
    here: Path,
    name: str = "",
    input_modes: frozenset[str] = frozenset(),
    schema: str = "",
) -> Draft:
    """The adapter for ``findings``, as commented YAML (``here``: the folder it is written
    to; ``input_modes``: the ``input.via`` values this crashmatrix accepts, none before turn
    delivery is declared)."""
    agent = findings.path
    short = agent.name

    def at(line: int) -> str:
        return f"{short}:{line}"

    todos: list[Todo] = []
    y = _Yaml()
    if schema:
        y.add(f"# yaml-language-server: $schema={schema}")
    y.comment(f"Written by `crashmatrix init {agent}`: every key says what it was read from.")
    y.comment("Check the TODO lines (if any), then: crashmatrix doctor --agent THIS_FILE")
    adapter_name = (
        name
        or re.sub(r"[^A-Za-z0-9_.\-]", "-", agent.parent.name if agent.stem == "agent" else agent.stem)[:64]
        or "agent"
    )
    y.add(f"name: {adapter_name}", "shown in reports and test ids")
    y.add(f"description: {json.dumps(f'{agent.name}, read by crashmatrix init')}")
    script = _relative(agent, here)
    launcher = ""
    kind2 = bool(findings.main) and not findings.uses_tools_url
    if findings.uses_tools_url:
        kind = "command"
        y.add(
            f'command: ["{{python}}", "-u", "{{here}}/{script}"]',
            "kind 3: it reads CRASHMATRIX_TOOLS_URL "
            f"({at(_line_of_env(findings, 'CRASHMATRIX_TOOLS_URL'))}): a program calling the harness's "
            "tools",
        )
    elif kind2:
        kind = "python"
        y.add(
            "python:",
            f"kind 2: loaded unmodified in the life process, main() called ({at(findings.main_line)})",
        )
        y.add(f"  script: {json.dumps(script)}")
        y.add("  main: main")
        if findings.turns == "argv" and "argv" in input_modes:
            y.add('  argv: ["{turn}"]', f"the message is its argument (sys.argv, {at(findings.turns_line)})")
    elif findings.entry:
        kind = "python"
        launcher = _launcher(findings, here)
        y.add(
            "python:",
            f"kind 2 through a launcher init wrote: {findings.entry}(...) ({at(findings.entry_line)}) "
            "takes one message and there is no main()",
        )
        y.add("  script: crashmatrix_launcher.py")
        y.add("  main: main")
        if not findings.recover:
            todos.append(
                Todo(
                    f"{short}:{findings.entry_line}: no recover()/resume() taking nothing was found, so a "
                    f"life restarted after a crash finishes nothing until {findings.entry}() gets a new "
                    "message; call the function that finishes a pending tool call in crashmatrix_launcher.py",
                    False,
                )
            )
    else:
        kind = "command"
        y.add(
            f'command: ["{{python}}", "-u", "{{here}}/{script}"]',
            "kind 3: no main() to call, so it runs as a program",
        )
    y.add("cwd: workspace", "relative paths it opens land in the case's workspace, a new one each case")
    prefix = f"{_module_name(findings)}." if launcher else ""

    # -- tools -----------------------------------------------------------------------------
    matches = match_tools(findings.tools, suite)
    by_function = {m.tool.function: m for m in matches if m.tool.function}
    # Effects: where each matched tool's function writes (JSONL lines, SQLite rows) or posts.
    effects: list[tuple[Match, Write]] = []
    services: list[tuple[str, Http]] = []
    for match in matches:
        inside = _called_from(findings, match.tool.function)
        for write in findings.writes:
            if write.inside in inside and write.path and (write.writer or write.table):
                effects.append((match, write))
        for writer in findings.writers:
            # The tool appends its effect itself: open(..., "a") + json.dumps in its own body.
            if writer.function in inside and writer.path and writer.kind == "jsonl":
                effects.append(
                    (
                        match,
                        Write(
                            writer.function,
                            writer.function,
                            writer.line,
                            writer.path,
                            writer.env,
                            writer.keys,
                        ),
                    )
                )
        for request in findings.http:
            if request.inside in inside and match.suite in _SERVICE_OF:
                services.append((_SERVICE_OF[match.suite], request))
    effect_paths = {w.path for _, w in effects}
    tools_by = "harness" if findings.uses_tools_url else "agent"
    if tools_by == "agent":
        y.add("tools: agent", "it runs its own tools; effects:/services: below say where they show")
    else:
        y.add("tools: harness", "it calls crashmatrix's mock tools over HTTP")

    # -- env: the session path and the service URLs -------------------------------------------
    session_writers = [
        w
        for w in findings.writers
        if not any(w.function == x.writer and x.path in effect_paths for x in findings.writes)
        or w.path not in effect_paths
    ]
    session = _session(findings, effect_paths)
    env: list[tuple[str, str, str]] = []
    if session is not None and session[1]:
        env.append(
            (
                session[1],
                "{session}",
                f"where it keeps its conversation ({at(session[2])}): the case's session",
            )
        )
    for service, request in dict.fromkeys(services):
        env.append(
            (
                request.env,
                f"{{{service}_url}}",
                f"it posts to this URL ({at(request.line)}): the loopback {service} service",
            )
        )
    for variable, _, line in findings.env_defaults:
        if (
            "MODEL" in variable.upper()
            and not variable.upper().startswith("OPENAI_BASE")
            and "URL" not in variable.upper()
        ):
            env.append(
                (
                    variable,
                    "crashmatrix-scripted",
                    f"the model name it asks for ({at(line)}); any name reaches the scripted model",
                )
            )
            break
    if env:
        y.add("env:")
        for variable, value, why in dict.fromkeys(env):
            y.add(f"  {variable}: {json.dumps(value)}", why)

    # -- turns -------------------------------------------------------------------------------
    if findings.turns == "stdin" and findings.turn_prompt:
        y.add("input:")
        y.add(
            f"  prompt: {_q(findings.turn_prompt)}",
            f"it waits for a turn with this prompt ({at(findings.turns_line)})",
        )
    elif findings.turns == "stdin":
        todos.append(
            Todo(
                f"{short}:{findings.turns_line}: it reads turns from stdin with no prompt init could "
                "read; set input.prompt to the text it prints last before reading",
                False,
            )
        )
    elif findings.turns == "argv":
        if "argv" in input_modes:
            y.add(
                "input: {via: argv}",
                f"one process per message, the message in sys.argv ({at(findings.turns_line)})",
            )
        else:
            todos.append(
                Todo(
                    f"{short}:{findings.turns_line}: it takes its message from sys.argv (one process per "
                    "message); this crashmatrix delivers turns on stdin only: give it a stdin loop or a "
                    "main() reading input()",
                    True,
                )
            )
    elif findings.turns == "stdin_whole":
        if "stdin" in input_modes and "per_process" in input_modes:
            y.add(
                "input: {via: stdin, per_process: true}",
                f"one process per message, read whole from stdin ({at(findings.turns_line)})",
            )
        else:
            todos.append(
                Todo(
                    f"{short}:{findings.turns_line}: it reads its whole stdin as one message (one process "
                    "per message); this crashmatrix writes turns line by line to one process: declare "
                    "input: when it can",
                    True,
                )
            )
    elif findings.turns == "call":
        y.add("input:")
        y.add("  prompt: '> '", "the launcher asks for each turn with this prompt")
    elif kind == "python" or kind == "command":
        todos.append(
            Todo(
                f"{short}: no input(), sys.stdin or sys.argv read found: how does it take the user's "
                "message? set input: accordingly",
                True,
            )
        )
    if findings.approval is not None:
        prompt = findings.approval
        y.add("approvals:")
        why = "names its tool: (?P<tool>...)" if prompt.names_tool else "names no tool"
        y.add(f"  prompt: {_q(prompt.regex)}", f"read from its approval input() ({at(prompt.line)}); {why}")
        y.add(f"  approve: {json.dumps(prompt.approve)}")
        y.add(f"  deny: {json.dumps(prompt.deny)}")

    # -- results and catalogue ---------------------------------------------------------------
    keys = findings.result_keys
    if {"ok", "code"} <= keys and "recovery" in keys:
        y.add("results: crashmatrix", "its Tool Results are {ok, code, recovery, ...} (crashmatrix's)")
    elif {"ok", "code"} <= keys or {"ok", "content"} <= keys:
        y.add("results: seed004", "its Tool Results are {ok, code, content} dicts")
    else:
        y.add("results: auto", "read by the Tool Result's shape; write rules if its results are sentences")
    if matches:
        y.add("catalogue:", "the suite's tools it has; a scenario needing another is n.a., never red")
        for match in matches:
            entry = []
            if match.tool.name != match.suite:
                entry.append(f"name: {match.tool.name}")
            if match.arguments:
                entry.append("arguments: {" + ", ".join(f"{a}: {b}" for a, b in match.arguments) + "}")
            body = "{" + ", ".join(entry) + "}"
            y.add(f"  {match.suite}: {body}", f"{match.tool.how} ({at(match.tool.line)})")
    else:
        names = ", ".join(t.name for t in findings.tools) or "none found"
        todos.append(
            Todo(
                f"{short}: none of its tools ({names}) matches one of the suite's "
                f"({', '.join(sorted(suite))}); add catalogue: entries by hand",
                True,
            )
        )
    unmatched = [t for t in findings.tools if t not in [m.tool for m in matches]]
    for tool in unmatched:
        y.comment(f"not in the suite's catalogue: its tool {tool.name} ({at(tool.line)})")

    # -- session -----------------------------------------------------------------------------
    shape = _record_shape(findings)
    if session is not None:
        y.add("session:")
        if session[3] == "sqlite":
            y.add("  sqlite:", f"its conversation is rows of a SQLite table ({at(session[2])})")
            y.add(f"    path: {json.dumps(session[0])}")
            query = f"SELECT {session[4]} FROM {session[5]} ORDER BY rowid"
            y.add(f"    query: {json.dumps(query)}")
        else:
            y.add(f"  path: {json.dumps(session[0])}", f"it appends JSON lines here ({at(session[2])})")
        if shape.type_field != "type":
            y.add(f"  type_field: {shape.type_field}", "the field telling its records apart")
        if shape.ledger_type and shape.ledger_type != "tool_execution":
            y.add(f"  ledger_type: {shape.ledger_type}")
        if shape.message_type and shape.message_type != "message":
            y.add(f"  message_type: {shape.message_type}")
        if not shape.ledger:
            y.add(
                "  keeps_ledger: false",
                "no record with a status and a tool call id: judged on its conversation and world",
            )
    else:
        todos.append(
            Todo(
                f"{short}: no JSONL append (open(..., 'a') + json.dumps) or SQLite INSERT of its "
                "conversation found; set session: (path:, sqlite: or readable: false)",
                False,
            )
        )

    # -- effects and services ------------------------------------------------------------------
    if effects:
        y.add("effects:")
        for match, write in dict.fromkeys(effects):
            y.add(f"  - tool: {match.suite}", f"{match.tool.function} writes here ({at(write.line)})")
            if match.suite in _WORLD_COUNTS:
                y.add(f"    counts: {_WORLD_COUNTS[match.suite]}")
            if write.table:
                columns = ", ".join(write.columns) if write.columns else "*"
                y.add("    sqlite:")
                y.add(f"      path: {json.dumps(write.path)}")
                y.add(
                    f"      query: {json.dumps(f'SELECT rowid, {columns} FROM {write.table}')}",
                    "a row an effect, the first column its identity",
                )
            else:
                y.add(f"    jsonl: {json.dumps(write.path)}", "one line an effect")
            ids = _ids(write)
            if ids:
                y.add(
                    "    ids: {" + ", ".join(f"{a}: {b}" for a, b in ids) + "}",
                    "ties an effect to its call: at most once is judged per call",
                )
    if services:
        y.add(
            f"services: [{', '.join(dict.fromkeys(s for s, _ in services))}]",
            "served on loopback, their effects counted (the URL through env: above)",
        )
    for match in matches:
        counted = (
            any(m is match for m, _ in effects)
            or match.suite in {s for s, _ in services}
            or any(_SERVICE_OF.get(match.suite) == s for s, _ in services)
        )
        if tools_by == "agent" and match.suite in _WORLD_COUNTS and not counted:
            todos.append(
                Todo(
                    f"{short}:{match.tool.line}: where {match.tool.name}'s effect lands was not found; "
                    "add an effects: entry (jsonl:, sqlite: or files:) or services:, else at-most-once "
                    "is n.a. for it",
                    False,
                )
            )

    # -- boundaries ----------------------------------------------------------------------------
    if kind == "python":
        rules = _rules(findings, matches, by_function, session_writers, shape, prefix, short, todos)
        if rules:
            y.add("boundaries:")
            for rule in rules:
                for index, (text, why) in enumerate(rule):
                    y.add(("  - " if index == 0 else "    ") + text, why)
    for todo in todos:
        y.comment(f"TODO: {todo.text}")
    return Draft(y.render(), tuple(todos), tuple(matches), launcher)


def _relative(path: Path, here: Path) -> str:
    """``path`` as seen from ``here``: relative within one tree, else absolute (an adapter in
    /tmp for an agent in a checkout)."""
    target, base = path.resolve(), here.resolve()
    if os.path.commonpath([target, base]) in ("/", str(Path(target.anchor))):
        return str(target)
    return os.path.relpath(target, base)


def _line_of_env(findings: Findings, variable: str) -> int:
    return next((line for v, _, line in findings.env_defaults if v == variable), 0)


def _module_name(findings: Findings) -> str:
    return findings.path.stem


def _launcher(findings: Findings, here: Path) -> str:
    module = _module_name(findings)
    folder = _relative(findings.path.parent, here)
    recover = (
        f"\n    {module}.{findings.recover}()  # a restarted life finishes what the last one left"
        if findings.recover
        else ""
    )
    return f'''"""Written by crashmatrix init: {findings.path.name} takes one message per call of
{findings.entry}(); this main() asks for each turn on stdin and calls it, so the harness can
drive it like a REPL. Rules in the adapter name its functions as {module}.NAME."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / {folder!r}))

import {module}  # noqa: E402


def main() -> None:{recover}
    while True:
        try:
            text = input("> ")
        except EOFError:
            return
        if text.strip():
            {module}.{findings.entry}(text)
'''


def _called_from(findings: Findings, function: str) -> set[str]:
    """``function`` and what it calls, one level down (its helpers write for it)."""
    # The reader kept no call graph; a tool's helpers are found by the writes' enclosing
    # functions sharing its class or being called in it, which the writes record directly.
    return {function, function.split(".")[-1]}


@dataclass(frozen=True, slots=True)
class _Shape:
    prefix: str  # "message." when messages are wrapped in {"type": "message", "message": ...}
    type_field: str
    message_type: str
    ledger_type: str
    ledger: bool
    call_key: str
    status_key: str


def _record_shape(findings: Findings) -> _Shape:
    keys = findings.record_keys
    ledger = (
        "status" in findings.record_keys
        and bool({"tool_call_id", "callId"} & keys)
        and bool(set(_LEDGER_STATUSES) & findings.statuses)
    )
    type_field, message_type, ledger_type = "type", "message", "tool_execution"
    fields = [k for k, _ in findings.type_values]
    if "type" not in fields and fields:
        type_field = fields[0]
    values = [v for k, v in findings.type_values if k == type_field]
    if "message" in values or "message" in keys:
        message_type = "message"
    ledger_values = [v for v in values if v not in ("message", "function", "object", "string")]
    if ledger_values:
        ledger_type = ledger_values[0]
    prefix = "message." if "message" in keys and type_field in keys else ""
    call_key = "tool_call_id" if "tool_call_id" in keys else "callId"
    return _Shape(prefix, type_field, message_type, ledger_type, ledger, call_key, "status")


def _session(findings: Findings, effect_paths: set[str]) -> tuple[str, str, int, str, str, str] | None:
    """(path, env variable, line, kind, column, table) of its conversation: a JSONL file it
    appends messages to, or the SQLite table its records are inserted into."""
    for write in findings.writes:
        if write.writer and write.path and write.path not in effect_paths and not write.table:
            return write.path, write.env, write.line, "jsonl", "", ""
    # A path passed through the agent's state: the environment variable whose default is a
    # .jsonl file nothing counts as an effect.
    for variable, default, line in findings.env_defaults:
        jsonl = any(w.kind == "jsonl" for w in findings.writers)
        if default.endswith(".jsonl") and default not in effect_paths and jsonl:
            return default, variable, line, "jsonl", "", ""
    for writer in findings.writers:
        if writer.kind == "jsonl" and writer.path and writer.path not in effect_paths:
            return writer.path, writer.env, writer.line, "jsonl", "", ""
    for writer in findings.writers:
        if writer.kind == "sqlite" and writer.record:
            database = next(
                (
                    (d, v, line)
                    for v, d, line in findings.env_defaults
                    if d.endswith((".db", ".sqlite", ".sqlite3"))
                ),
                None,
            )
            if database is not None:
                column = writer.columns[0] if len(writer.columns) == 1 else "*"
                return database[0], "", writer.line, "sqlite", column, writer.table
    return None


def _ids(write: Write) -> list[tuple[str, str]]:
    """The field of a line or row naming its call: the idempotency key first (the ledger ties
    it to the call), else the tool call id. One, so an effect is never tied twice."""
    keyed = [
        key
        for key, parameter in write.keys
        if "idempotency" in key or parameter in ("key", "idempotency_key")
    ]
    if keyed:
        return [("idempotency_key", keyed[0])]
    called = [
        key
        for key, parameter in write.keys
        if parameter in ("call_id", "tool_call_id") or key in ("call", "call_id", "tool_call_id")
    ]
    return [("tool_call_id", called[0])] if called else []


def _rules(
    findings: Findings,
    matches: Sequence[Match],
    by_function: Mapping[str, Match],
    writers: Sequence[Writer],
    shape: _Shape,
    prefix: str,
    short: str,
    todos: list[Todo],
) -> list[list[tuple[str, str]]]:
    """Boundary rules that fire whatever the dispatch style: on the session writer (called
    by name on every save) and, per tool, on its function or the dispatcher that looks it up."""
    rules: list[list[tuple[str, str]]] = []
    writer = next((w for w in writers if w.record), None)

    def at(line: int) -> str:
        return f"{short}:{line}"

    if writer is not None:
        f, r, p = prefix + writer.function, writer.record, shape.prefix
        rules.append(
            [
                (
                    f"function: {f}",
                    f"it saves each record ({at(writer.line)}); called by name, so the rule fires",
                ),
                ("boundary: after_tool_call_saved", "the assistant's tool call is on disk"),
                (
                    f"where: [{{argument: {r}, key: {p}role, equals: assistant}}, "
                    f"{{argument: {r}, key: {p}tool_calls, present: true}}]",
                    "",
                ),
                (f"call_id: {{argument: {r}, key: {p}tool_calls.*.id}}", ""),
            ]
        )
        if shape.ledger:
            status, call = shape.status_key, shape.call_key
            if "approved" in findings.statuses:
                rules.append(
                    [
                        (f"function: {f}", "its ledger record says approved"),
                        ("boundary: after_approved", ""),
                        (f"where: [{{argument: {r}, key: {status}, equals: approved}}]", ""),
                        (f"call_id: {{argument: {r}, key: {call}}}", ""),
                    ]
                )
            if "running" in findings.statuses:
                rules.append(
                    [
                        (f"function: {f}", "its ledger record says running: the intent is durable"),
                        ("boundary: after_running", ""),
                        (f"where: [{{argument: {r}, key: {status}, equals: running}}]", ""),
                        (f"call_id: {{argument: {r}, key: {call}}}", ""),
                    ]
                )
    for match in matches:
        tool = match.tool
        dispatcher = next(iter(findings.dispatchers), None) if tool.held_in else None
        saves_too = (
            dispatcher is not None
            and writer is not None
            and any(w.writer == writer.function and w.inside == dispatcher.function for w in findings.writes)
        )
        if tool.held_in and dispatcher is not None and saves_too:
            # It also saves the Tool Result before returning: "after it returns" would be after
            # the result, not between the effect and it. before_tool_result (below, at the
            # call of the writer) is that moment, whatever the dispatch.
            continue
        if tool.held_in and dispatcher is not None:
            where = (
                f"{{argument: {dispatcher.name_argument}"
                + (f", key: {dispatcher.name_key}" if dispatcher.name_key else "")
                + f", equals: {tool.name}}}"
            )
            rule = [
                (
                    f"function: {prefix}{dispatcher.function}",
                    f"{tool.name} is held in {tool.held_in}, whose entry a rule on {tool.function} never "
                    f"sees; {dispatcher.function} looks it up by name ({at(dispatcher.line)})",
                ),
                ("boundary: after_side_effect", "after it returns, the tool has acted"),
                (f"where: [{where}]", ""),
            ]
            if dispatcher.call_id is not None:
                argument, key = dispatcher.call_id
                rule.append(("call_id: {argument: " + argument + (f", key: {key}" if key else "") + "}", ""))
            rules.append(rule)
        elif tool.held_in:
            todos.append(
                Todo(
                    f"{short}:{tool.line}: {tool.name} runs through {tool.held_in}, and no function "
                    f"looking it up by name was found: a rule on {tool.function} would never fire; wrap "
                    "the function that calls the handler (where: on the tool's name)",
                    False,
                )
            )
        elif tool.function and tool.function in findings.top_level:
            parameters = tool.signature
            call = next((p for p in ("tool_call_id", "call_id") if p in parameters), "")
            rule = [
                (f"function: {prefix}{tool.function}", f"its {tool.name} tool ({at(tool.line)})"),
                ("boundary: after_side_effect", "after it returns, the effect is made"),
            ]
            if call:
                rule.append((f"call_id: {{argument: {call}}}", ""))
            rules.append(rule)
        else:
            todos.append(
                Todo(
                    f"{short}:{tool.line}: no function of its own runs {tool.name} that init could name; "
                    "add a boundary rule for after_side_effect",
                    False,
                )
            )
    if writer is not None:
        f, r, p = prefix + writer.function, writer.record, shape.prefix
        terminal = [s for s in ("succeeded", "failed", "unknown", "rejected") if s in findings.statuses]
        if not (shape.ledger and terminal):
            rules.append(
                [
                    (
                        f"function: {f}",
                        "called to save the Tool Result: the tool has acted, nothing of it is saved",
                    ),
                    ("boundary: before_tool_result", ""),
                    ("at: call", "before it runs"),
                    (f"where: [{{argument: {r}, key: {p}role, equals: tool}}]", ""),
                    (f"call_id: {{argument: {r}, key: {p}tool_call_id}}", ""),
                ]
            )
        if shape.ledger and terminal:
            rules.append(
                [
                    (f"function: {f}", "its ledger record closes the execution"),
                    ("boundary: before_tool_result", ""),
                    (
                        f"where: [{{argument: {r}, key: {shape.status_key}, in: [{', '.join(terminal)}]}}]",
                        "",
                    ),
                    (f"call_id: {{argument: {r}, key: {shape.call_key}}}", ""),
                ]
            )
        rules.append(
            [
                (f"function: {f}", "the Tool Result message is on disk"),
                ("boundary: after_tool_result", ""),
                (f"where: [{{argument: {r}, key: {p}role, equals: tool}}]", ""),
                (f"call_id: {{argument: {r}, key: {p}tool_call_id}}", ""),
            ]
        )
    else:
        todos.append(
            Todo(
                f"{short}: no function saving its records was found, so no rule marks a saved tool call "
                "or Tool Result; add boundaries: on the function that saves them",
                not any(r for r in rules),
            )
        )
    return rules


# -- the command -------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crashmatrix init",
        description="Write a commented adapter for a Python agent by reading its code, check it, "
        "run one clean case and list its crash points.",
    )
    parser.add_argument("agent", type=Path, help="the agent's .py file")
    parser.add_argument(
        "--out", type=Path, help="the adapter to write (default: adapter.yaml beside the agent)"
    )
    parser.add_argument(
        "--scenario",
        type=Path,
        help="the scenario of the clean run (default: the first built-in one that applies)",
    )
    parser.add_argument("--no-run", action="store_true", help="write and check the adapter; run nothing")
    parser.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    return parser


def suite_tools() -> dict[str, tuple[str, ...]]:
    """The suite's tools and their arguments, from the contracts."""
    from crashmatrix.mock_tools.registry import catalogue

    return {
        name: tuple((contract.parameters.get("properties") or {}).keys())
        for name, contract in catalogue([]).items()
    }


def input_modes() -> frozenset[str]:
    """What this crashmatrix's ``input:`` accepts besides ``prompt`` (turn delivery modes
    land in the schema as they are built): read from the schema, so init writes only keys
    the loader takes."""
    from crashmatrix.harness.input.yamlfile import load_schema

    schema = load_schema("adapter.schema.json")
    properties = schema["properties"]["input"].get("properties", {})
    modes = set(properties) - {"prompt"}
    via = properties.get("via", {})
    modes.update(via.get("enum", ()))
    return frozenset(modes)


def main_init(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    try:
        return _init(args)
    except CrashmatrixError as error:
        print(f"crashmatrix init: {error}", file=sys.stderr)
        return 2


def _init(args: argparse.Namespace) -> int:
    agent: Path = args.agent
    if agent.suffix != ".py" or not agent.is_file():
        raise InputError(f"{agent}: not a Python file; give the agent's .py file (crashmatrix init agent.py)")
    out: Path = args.out or agent.parent / "adapter.yaml"
    if out.exists() and not args.force:
        raise InputError(f"{out}: exists already; give --out NEW.yaml, or --force to overwrite it")
    if args.scenario is not None and not args.scenario.is_file():
        raise InputError(f"--scenario {args.scenario}: no such file; give a scenario YAML")
    findings = read_agent(agent)
    import crashmatrix.harness.input as inputs

    out.parent.mkdir(parents=True, exist_ok=True)
    schemas = Path(inputs.__file__).resolve().parent / "schemas"
    schema = _relative(schemas / "adapter.schema.json", out.parent)
    result = draft(findings, suite_tools(), here=out.parent, input_modes=input_modes(), schema=schema)
    out.write_text(result.text, encoding="utf-8")
    if result.launcher:
        (out.parent / "crashmatrix_launcher.py").write_text(result.launcher, encoding="utf-8")
        print(f"wrote {out.parent / 'crashmatrix_launcher.py'} (calls {findings.entry} once per turn)")
    print(f"wrote {out}")
    from crashmatrix.harness.agents.adapter_file import load_foreign

    try:
        load_foreign(out)
    except CrashmatrixError as error:
        # What init wrote does not load: the file stays for the person to fix, and the line
        # says where.
        print(f"TODO: {error}")
        _todos(result.todos)
        return 1
    print(f"{out}: loads")
    _todos(result.todos)
    if result.blocked:
        return 1
    if args.no_run:
        return 0
    return _clean_run(str(out), args.scenario)


def _todos(todos: Iterable[Todo]) -> None:
    for todo in todos:
        print(f"TODO: {todo.text}" + (" (blocks a run)" if todo.blocking else ""))


def _clean_run(agent: str, scenario_path: Path | None) -> int:
    """One clean case of a scenario that applies, and its crash points (``crashmatrix
    points``): exit 1 when the clean run passed no boundary."""
    from crashmatrix.harness.agents.loading import fork_preload, load_adapter
    from crashmatrix.harness.front.cases import enumerate_points
    from crashmatrix.harness.front.doctor import doctor_scenario
    from crashmatrix.harness.input.scenario import load_scenario
    from crashmatrix.harness.lives.injector import LifeLauncher

    adapter = load_adapter(agent)
    scenario = load_scenario(scenario_path) if scenario_path is not None else doctor_scenario(adapter)
    print(f"clean run of {scenario.path} ...", flush=True)
    launcher = LifeLauncher("fork", preload=fork_preload(agent), warm=(agent,))
    with tempfile.TemporaryDirectory(prefix="crashmatrix-init-") as tmp:
        enum = enumerate_points(scenario, launcher, Path(tmp), agent=agent)
    verdict = enum.clean_verdict
    print(f"clean case: {verdict.status}")
    for point in enum.points:
        print(f"  {point.id}")
    # A clean case that fails is the adapter's doubt before the agent's: no crash happened,
    # so a wrong session, effect or results mapping is the likely cause. Each reason is a TODO.
    reasons = [
        *(p.splitlines()[0] for p in verdict.problems if p),
        *(m.describe() for m in verdict.mismatches),
        *(f"{v.invariant}: {v.message}" for v in verdict.violations),
    ]
    for reason in reasons:
        print(f"TODO: the clean case (no crash) failed: {reason}; check the key of the adapter it names")
    at_boundary = [p for p in enum.points if p.boundary not in ("torn_write", "after_model_reply")]
    if not at_boundary:
        print(
            f"TODO: the clean run of {scenario.path.name} passed no boundary: check that the functions "
            "the boundaries: name are the ones it calls (crashmatrix doctor --agent names the rule)"
        )
        return 1
    print(f"{len(enum.points)} crash points; next: crashmatrix run {scenario.path} --agent {agent}")
    return 0 if verdict.passed else 1
