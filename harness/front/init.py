"""``crashmatrix init AGENT.py``: a commented adapter written by reading the agent's code.

Three steps, kept apart as the rest of the harness keeps them:

* ``read_agent(path) -> Findings`` (``agent_code.py``) reads the agent's source with
  ``ast`` (nothing of it runs): where it saves its conversation, which functions are its
  tools and how they are dispatched, where their effects land, how it takes a turn, how it
  asks for approval. Pure: a frozen value of what was found, each item with its line.
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
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from crashmatrix.harness.errors import CrashmatrixError, InputError
from crashmatrix.harness.front.agent_code import (
    LEDGER_STATUSES,
    STATUS_WORDS,
    Findings,
    Http,
    Said,
    Tool,
    Write,
    Writer,
    read_agent,
)

__all__ = ["Draft", "draft", "input_modes", "main_init", "suite_tools"]

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
    # {here} is the adapter's folder: a relative path is written from it, an absolute one as is.
    program = script if os.path.isabs(script) else f"{{here}}/{script}"
    launcher = ""
    framework = _framework(findings)
    if framework:
        # Its driver and store are the framework's: crashmatrix drives it through the
        # framework's API (docs/frameworks.md), which a factory builds, not a main().
        todos.append(
            Todo(
                f"{short}: it is built on {framework} (a framework agent); write framework: "
                f"{framework} and factory: module:function returning it (docs/frameworks.md), not "
                "python: or command:",
                True,
            )
        )
    kind2 = bool(findings.main) and not findings.uses_tools_url
    if findings.uses_tools_url:
        kind = "command"
        y.add(
            f'command: ["{{python}}", "-u", {json.dumps(program)}]',
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
            f'command: ["{{python}}", "-u", {json.dumps(program)}]',
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
        y.add(f"  prompt: {_q(prompt.regex)}", f"read from its approval prompt ({at(prompt.line)}); {why}")
        y.add(f"  approve: {json.dumps(prompt.approve)}")
        y.add(f"  deny: {json.dumps(prompt.deny)}")

    # -- results and catalogue ---------------------------------------------------------------
    keys = findings.result_keys
    if {"ok", "code"} <= keys and "recovery" in keys:
        y.add("results: crashmatrix", "its Tool Results are {ok, code, recovery, ...} (crashmatrix's)")
    elif {"ok", "code"} <= keys or {"ok", "content"} <= keys:
        y.add("results: seed004", "its Tool Results are {ok, code, content} dicts")
    elif _sentences(findings):
        result_rules, results_todos = _result_rules(findings, short)
        todos.extend(results_todos)
        y.add(
            "results:",
            f"its tools return sentences, not JSON ({len(_sentences(findings))} returns read, each rule "
            "names its lines): the first rule that holds wins",
        )
        for text, why in result_rules:
            y.add(f"  - {text}", why)
    else:
        json_lines = sorted({s.line for s in findings.said if s.kind == "json"})
        if json_lines:
            why = f"its tools return JSON ({', '.join(at(n) for n in json_lines)}): read by its shape"
        elif findings.results_dumped:
            why = "its Tool Results are written with json.dumps: read by their shape"
        else:
            why = "read by the Tool Result's shape (no tool returning a sentence was found)"
        y.add("results: auto", why)
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
    elif tools_by == "harness":
        # The harness serves every suite tool at CRASHMATRIX_TOOLS_URL, under its own names:
        # without a catalogue the agent has them all (a scenario its model script names is run).
        y.comment("no catalogue: it calls the harness's tools by the names the model gives")
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
        foreign = _foreign_statuses(findings.statuses) if shape.ledger else {}
        if foreign:
            y.add(
                "  statuses: {" + ", ".join(f"{a}: {b}" for a, b in foreign.items()) + "}",
                "its words for crashmatrix's statuses",
            )
        if not shape.ledger:
            y.add(
                "  keeps_ledger: false",
                "no record with a status and a tool call id: judged on its conversation and world",
            )
    else:
        # Not the default path: a session read from where the agent never writes would be
        # judged empty (every case red). Unreadable, it is judged on what the model was sent.
        y.add("session:")
        y.add("  readable: false", "its conversation was not found: judged on the model's requests")
        todos.append(
            Todo(
                f"{short}: no JSONL append (open(..., 'a') + json.dumps) or SQLite INSERT of its "
                "conversation found, so session: is readable: false (no ledger checks); set path: or "
                "sqlite: where it keeps it",
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


# A sentence's own first words, before what the agent's own status word or the place it is
# returned from says: "ALREADY PLACED" returned with "done" is a replay, not a new success.
_WORDS: tuple[tuple[str, str], ...] = (
    (r"already\b", "replayed"),
    (r"conflict", "conflict"),
    (r"(declined|denied|rejected|refused)\b", "rejected"),
    (r"(unsure|uncertain|unknown|in doubt)\b", "uncertain"),
    (r"(error|failed|failure|could not|cannot|can't)\b", "error"),
)
_STATUS_CATEGORY = {
    "succeeded": "succeeded",
    "failed": "error",
    "unknown": "uncertain",
    "rejected": "rejected",
}


def _sentences(findings: Findings) -> list[Said]:
    """What its tools return, when that is sentences: none is JSON, one is a string."""
    said = findings.said
    if findings.results_dumped or any(s.kind == "json" for s in said):
        return []
    return [s for s in said if s.kind == "text"]


def _category(said: Said) -> tuple[str, str]:
    """(category, why) of one sentence, "" when nothing says."""
    for pattern, category in _WORDS:
        if re.match(pattern, said.prefix.strip(), re.IGNORECASE):
            return category, f"its words ({said.prefix.strip()!r})"
    status = STATUS_WORDS.get(said.status, said.status)
    if status in _STATUS_CATEGORY:
        return _STATUS_CATEGORY[status], f"returned with its status {said.status!r}"
    if said.where == "except":
        return "error", "returned from an except handler"
    if said.where == "check":
        return "error", "returned after an error check (if not ...)"
    if said.where == "":
        return "succeeded", "returned on the plain path"
    return "", ""


def _result_rules(findings: Findings, short: str) -> tuple[list[tuple[str, str]], list[Todo]]:
    """``results:`` rules from the literal starts of the sentences its tools return: one per
    sentence that is not a success, then ``default: succeeded``. A sentence whose category
    nothing says, or whose start does not tell it from a success, is a TODO."""
    said = _sentences(findings)
    decided = [(s, *_category(s)) for s in said]
    successes = [s.prefix for s, category, _ in decided if category == "succeeded"]
    rules: dict[str, tuple[str, list[str]]] = {}
    todos: list[Todo] = []
    for s, category, why in decided:
        quoted = f"{s.prefix}..." if s.prefix else "a value"
        if not category:
            todos.append(
                Todo(
                    f"{short}:{s.line}: {s.tool} returns {quoted!r} in a branch init cannot classify; "
                    "add a results: rule (regex:, category:) before default: for it",
                    False,
                )
            )
            continue
        if category == "succeeded":
            continue
        prefix = s.prefix
        clash = [x for x in successes if x and (x.startswith(prefix) or prefix.startswith(x))]
        if not prefix.strip() or clash:
            reason = (
                "starts with a value" if not prefix.strip() else f"starts as a success does ({clash[0]!r})"
            )
            todos.append(
                Todo(
                    f"{short}:{s.line}: {s.tool} returns {quoted!r} ({category}), which {reason}: no rule "
                    "can tell it apart; add a results: rule for it or return text that says it",
                    False,
                )
            )
            continue
        start = prefix.rstrip()
        # "ERROR: the service refused (" is read by "^ERROR:" already: one rule for both.
        start = next((p for p, (c, _) in rules.items() if start.startswith(p) and c == category), start)
        rule = rules.setdefault(start, (category, []))
        rule[1].append(f"{short}:{s.line} ({s.tool})")
        rule[1].append(why)
    lines = [
        (
            f"{{regex: {_q('^' + re.escape(start).replace(chr(92) + ' ', ' '))}, category: {category}}}",
            ", ".join(w for w in whys if ":" in w and w.startswith(short))
            + ": "
            + "; ".join(dict.fromkeys(w for w in whys if not w.startswith(short))),
        )
        for start, (category, whys) in rules.items()
    ]
    plain = [f"{short}:{s.line} ({s.tool})" for s, category, _ in decided if category == "succeeded"]
    acted = "what it returns when it acted: " + ", ".join(plain) if plain else ""
    lines.append(("{default: succeeded}", acted))
    return lines, todos


def _framework(findings: Findings) -> str:
    imports = findings.module_imports
    if any(name.split(".")[0] == "langgraph" for name in imports):
        return "langgraph"
    if any(name.split(".")[0] == "agents" for name in imports):  # the OpenAI Agents SDK
        return "openai-agents"
    return ""


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
    """``function`` and the functions it calls, one level down: a helper writing for a tool
    (``send_email`` -> ``deliver(outbox, ...)``) writes its effect."""
    return {function} | {callee for caller, callee in findings.calls if caller == function}


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
        and bool(set(LEDGER_STATUSES) & findings.statuses)
    )
    type_field, message_type, ledger_type = "type", "message", "tool_execution"
    fields = [k for k, _, _ in findings.type_values]
    if "type" not in fields and fields:
        type_field = fields[0]
    messages = [v for k, v, kind in findings.type_values if k == type_field and kind == "message"]
    ledgers = [v for k, v, kind in findings.type_values if k == type_field and kind == "ledger"]
    if messages and "message" not in messages:
        message_type = messages[0]
    if ledgers:
        ledger_type = ledgers[0]
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


def _foreign_statuses(statuses: frozenset[str]) -> dict[str, str]:
    return {word: ours for word, ours in sorted(STATUS_WORDS.items()) if word in statuses}


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
                (
                    f"function: {prefix}{tool.function}",
                    f"its {tool.name} tool ({at(tool.line)})"
                    + (
                        f", called by name where {tool.branch} branches on {tool.name!r}"
                        if tool.branch
                        else ""
                    )
                    + (
                        f", held in a dict written where it is used ({at(tool.inline)}): built at each "
                        "call from the module's attributes, so the rule fires"
                        if tool.inline
                        else ""
                    ),
                ),
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
    if rules and not any(text.startswith("call_id:") for rule in rules for text, _ in rule):
        # A rule without call_id takes the last call a rule named: with none naming one, the
        # loader refuses the file (none could fire). Better no rules and the reason.
        todos.append(
            Todo(
                f"{short}: no function init found sees the tool call id, so its boundary rules "
                "could never fire and none is written; add boundaries: with call_id: by hand",
                False,
            )
        )
        return []
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
