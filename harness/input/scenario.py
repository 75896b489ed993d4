"""Scenario files, read into ``harness.core.scenario.Scenario`` values.

Loading is two steps: the shipped JSON Schema (``schemas/scenario.schema.json``) checks the
shape, then ``_check_semantics`` checks what a schema cannot: that every tool has a contract
and a mock behaviour to run, that rules name tools the scenario gives the agent, that every
rule can fire, that every ``cover``/``expect`` key names a real boundary, and that every
expected ``told``/``outcome``/``code``/``ledger`` word is in its vocabulary. Each problem is
one ``path:line:col: key:`` line saying what to write instead.

The checks are about green cells that test nothing: a tool without behaviour answers every
call with UNKNOWN_TOOL, and a misspelt expected word can never match.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.boundaries import BOUNDARIES, TORN_WRITE
from crashmatrix.harness.core.categories import CATEGORIES
from crashmatrix.harness.core.contracts import RECOVERY_OUTCOMES, ToolContract
from crashmatrix.harness.core.evals import SEED004_EVALS
from crashmatrix.harness.core.ledger import STATUSES
from crashmatrix.harness.core.scenario import NEEDS, SIMULATED_PROGRAMS, SPECIAL_KEYS, Key, Scenario
from crashmatrix.harness.core.script import Reply, Rule, When
from crashmatrix.harness.core.tools import CODES
from crashmatrix.harness.input.contract_files import load_contracts
from crashmatrix.harness.input.limits import oversize
from crashmatrix.harness.input.yamlfile import Located, load_yaml, validate

__all__ = ["NO_RESULT", "load_scenario"]

# What ``told:`` (and ``outcome:``) expect of a call the model never got a Tool Result for.
NO_RESULT = "(no tool result)"

_POINT_ID = re.compile(r"^(?P<boundary>[a-z_]+)\[(?P<inner>[^\]]+)\]$")


def _rule(raw: Mapping[str, Any], line: int) -> Rule:
    reply = raw["reply"]
    calls = tuple((c["id"], c["name"], dict(c.get("arguments") or {})) for c in reply.get("tool_calls") or ())
    when = dict(raw["when"])
    if "category" in when:  # one category, or any of a list
        category = when["category"]
        when["category"] = (category,) if isinstance(category, str) else tuple(category)
    return Rule(When(**when), Reply(content=reply.get("content", ""), tool_calls=calls), line)


def _runs(command: str, program: str) -> bool:
    """Whether a command runs ``program``: its word where a command starts (the start, or
    after ``;``, ``&``, ``|``, ``(``, a backquote), alone or in a compound command."""
    return re.search(rf"(?:^|[;&|(`])\s*{re.escape(program)}(?:\s|$|[;&|)`])", command) is not None


def _commands(data: Mapping[str, Any]) -> list[str]:
    """The command of every run_command call in the model's script."""
    return [
        str((call.get("arguments") or {}).get("command", ""))
        for rule in data["model"]
        for call in rule["reply"].get("tool_calls") or ()
        if call["name"] == "run_command"
    ]


def _needs(data: Mapping[str, Any]) -> tuple[str, ...]:
    """The scenario's needs: those it lists, then each simulated program a command runs
    unlisted (generated scenarios, such as ``crashmatrix explore``'s, list none)."""
    commands = _commands(data)
    found = [p for p in SIMULATED_PROGRAMS if any(_runs(command, p) for command in commands)]
    return tuple(dict.fromkeys([*(data.get("needs") or ()), *found]))


def _known_key(key: str) -> bool:
    if key in SPECIAL_KEYS or key in BOUNDARIES or key == TORN_WRITE:
        return True
    match = _POINT_ID.match(key)
    if match is None:
        return False
    return match["boundary"] in BOUNDARIES or match["boundary"] == TORN_WRITE


def _options(where: Key, value: Any) -> list[tuple[Key, Any]]:
    """The values an expectation allows, each with its own position: ``{in: [...]}`` gives
    each option, so a message points at the one misspelt."""
    if isinstance(value, dict) and set(value) == {"in"}:
        return [((*where, "in", i), option) for i, option in enumerate(value["in"])]
    return [(where, value)]


# The ledger statuses an expectation may name: ours, and ``planned`` (seed 004's state
# "recorded, not yet approved", kept as itself when a foreign ledger is read).
_LEDGER_WORDS = (*STATUSES, "planned")


def _check_word(doc: Located, name: str, where: Key, option: Any) -> None:
    """One expected value is in its vocabulary. A misspelt one (``compelted``) can never
    match, so it would turn a cell red for a reason nobody can see, or, under ``{in:}``,
    silently allow nothing."""
    if name == "told" and option not in (*CATEGORIES, NO_RESULT):
        raise doc.error(
            where, f"{option!r} is not a category; write one of {', '.join(CATEGORIES)} or {NO_RESULT!r}"
        )
    if name == "outcome" and option not in (*RECOVERY_OUTCOMES, NO_RESULT):
        raise doc.error(
            where,
            f"{option!r} is not a recovery outcome; write one of {', '.join(RECOVERY_OUTCOMES)} "
            f"or {NO_RESULT!r}",
        )
    if name == "code" and option is not None and option not in CODES:
        raise doc.error(
            where, f"{option!r} is not a code; write null (no error) or one of {', '.join(CODES)}"
        )
    if name == "ledger":
        if not isinstance(option, list):
            raise doc.error(
                where,
                f"expected a list of ledger statuses, got {option!r}; write one such as "
                "[approved, running, succeeded] ([] for no ledger lines)",
            )
        for index, status in enumerate(option):
            if status not in _LEDGER_WORDS:
                raise doc.error(
                    (*where, index),
                    f"{status!r} is not a ledger status; write one of {', '.join(_LEDGER_WORDS)}",
                )


def _check_call(
    doc: Located, where: Key, call_id: str, calls_of: Mapping[str, str], *, tool: str | None = None
) -> None:
    """``call_id`` is a call the model script makes (of ``tool``, when given)."""
    listed = ", ".join(calls_of) or "none"
    if call_id not in calls_of:
        raise doc.error(where, f"no call {call_id!r} in this scenario's model script; calls: {listed}")
    if tool is not None and calls_of[call_id] != tool:
        raise doc.error(
            where,
            f"call {call_id!r} is a call of {calls_of[call_id]!r}, not of {tool!r}, so this fault "
            f"would never act; name a call of {tool!r} ("
            f"{', '.join(c for c, name in calls_of.items() if name == tool) or 'none in the script'})",
        )


def _check_point_call(doc: Located, where: Key, key: str, calls_of: Mapping[str, str]) -> None:
    """A point id (``after_running[call_1]``, ``torn_write[call_1:running]``,
    ``during_side_effect[call_1#2]``) names a call the script makes: one that names no such
    call is never reached, so its expectation is never applied and its cover selects nothing."""
    match = _POINT_ID.match(key)
    if match is None:
        return
    call_id = re.split(r"[:#]", match["inner"], maxsplit=1)[0]
    _check_call(doc, where, call_id, calls_of)


def _check_semantics(doc: Located, contracts: Mapping[str, ToolContract]) -> None:
    data = doc.data
    tools = list(data["tools"])
    for index, tool in enumerate(tools):
        if tool not in contracts:
            raise doc.error(
                ("tools", index),
                f"unknown tool {tool!r}: no contract file defines it; known tools: "
                f"{', '.join(sorted(contracts))} (or add contracts_dir with a {tool}.yaml)",
            )
        if not contracts[tool].has_mock_behaviour:
            # Every call would return UNKNOWN_TOOL, and a crash test of a tool that never
            # runs passes without testing anything.
            raise doc.error(
                ("tools", index),
                f"tool {tool!r} has a contract ({contracts[tool].source}) but no mock behaviour, "
                "so every call would return UNKNOWN_TOOL; add a 'mock:' section to its contract, "
                "such as 'mock: {kind: record_row, table: NAME}' (kinds: record_row, lookup_row, read_only)",
            )
    called: set[str] = set()
    call_ids: dict[str, int] = {}  # call id -> the rule that makes it
    calls_of: dict[str, str] = {}  # call id -> its tool
    for index, rule in enumerate(data["model"]):
        reply = rule["reply"]
        if not reply.get("tool_calls") and "content" not in reply:
            raise doc.error(("model", index, "reply"), "reply needs 'content' or 'tool_calls'")
        for j, call in enumerate(reply.get("tool_calls") or ()):
            if call["name"] not in tools:
                raise doc.error(
                    ("model", index, "reply", "tool_calls", j, "name"),
                    f"the model calls {call['name']!r}, which is not in this scenario's tools; "
                    f"add it to tools: or call one of {', '.join(tools)}",
                )
            if call["id"] in call_ids:
                raise doc.error(
                    ("model", index, "reply", "tool_calls", j, "id"),
                    f"tool call id {call['id']!r} is already used by rule {call_ids[call['id']] + 1}; "
                    "give each tool call its own id",
                )
            call_ids[call["id"]] = index
            calls_of[call["id"]] = call["name"]
            called.add(call["name"])
    for index, rule in enumerate(data["model"]):
        when = rule["when"]
        if "tool" in when and when["tool"] not in called:
            raise doc.error(
                ("model", index, "when", "tool"),
                f"this rule can never fire: no rule calls {when['tool']!r}; "
                "match a tool that some rule calls",
            )
        if "call" in when and when["call"] not in call_ids:
            raise doc.error(
                ("model", index, "when", "call"),
                f"this rule can never fire: no rule makes tool call {when['call']!r}",
            )
    if data.get("recovery_torn_writes") and not data.get("recovery_crashes", True):
        # Torn writes are more second crashes: with none asked for they would never act.
        raise doc.error(
            ("recovery_torn_writes",),
            "recovery_torn_writes adds torn writes to the second crashes, and recovery_crashes: false "
            "asks for none; drop one of the two",
        )
    for index, name in enumerate(data.get("evals") or ()):
        if name not in SEED004_EVALS:
            raise doc.error(("evals", index), f"unknown eval {name!r}; known: {', '.join(SEED004_EVALS)}")
    commands = _commands(data)
    for index, need in enumerate(data.get("needs") or ()):
        if need not in NEEDS:
            raise doc.error(("needs", index), f"unknown need {need!r}; write one of {', '.join(NEEDS)}")
        if need in SIMULATED_PROGRAMS and not any(_runs(command, need) for command in commands):
            # A need no command has would make the scenario not applicable to real shells
            # for nothing (a typo, or a command since changed).
            raise doc.error(
                ("needs", index),
                f"no run_command call of the model runs {need}; drop it or call run_command with {need}",
            )
        if not commands:
            raise doc.error(
                ("needs", index),
                f"{need} is about run_command's shell, and the model never calls run_command; drop it",
            )
    for index, fault in enumerate(data.get("faults") or ()):
        if fault["tool"] not in tools:
            raise doc.error(("faults", index, "tool"), f"fault on {fault['tool']!r}, which is not in tools")
        if "call" in fault:
            # A fault aimed at a call the script never makes never acts, and its cells would
            # pass without the fault they claim to test.
            _check_call(doc, ("faults", index, "call"), fault["call"], calls_of, tool=fault["tool"])
    for index, action in enumerate(data.get("between_lives") or ()):
        tamper = action.get("tamper_arguments")
        if tamper is not None:
            _check_call(doc, ("between_lives", index, "tamper_arguments", "call"), tamper["call"], calls_of)
    for index, entry in enumerate(data.get("cover") or ()):
        if not _known_key(entry) or entry in SPECIAL_KEYS:
            raise doc.error(
                ("cover", index),
                f"unknown crash point {entry!r}; write a boundary ({', '.join((*BOUNDARIES, TORN_WRITE))}) "
                "or a point id such as after_running[call_1]",
            )
        _check_point_call(doc, ("cover", index), entry, calls_of)
    for key in data.get("expect") or {}:
        if not _known_key(key):
            raise doc.error(
                ("expect", key),
                f"unknown expectation key {key!r}; write default, clean, recovery, a boundary name "
                "or a point id such as after_running[call_1]",
            )
        _check_point_call(doc, ("expect", key), key, calls_of)
        for name in ("told", "outcome", "ledger", "code"):
            for call_id, value in (data["expect"][key].get(name) or {}).items():
                if call_id not in call_ids:
                    raise doc.error(
                        ("expect", key, name, call_id),
                        f"no rule makes tool call {call_id!r}; expectations are per tool_call_id "
                        f"({', '.join(call_ids) or 'none defined'})",
                    )
                for where, option in _options(("expect", key, name, call_id), value):
                    _check_word(doc, name, where, option)


# Loaded scenarios, by the file as named and its bytes: a run loads each file many times (the
# collection, the doctor, every item of some callers), ~10 ms of parsing and schema checks
# each. A hit also needs every contract file of the directories it was built from unchanged
# (none added or removed). Scenario is frozen and its mappings are read-only (``Mapping``),
# so one instance is shared. A file that fails to load is not cached: it fails again, with
# its message.
_LOADED: dict[tuple[str, str, str, tuple[str, ...]], tuple[tuple[Path, ...], tuple[str, ...], Scenario]] = {}
_KEEP = 512


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _stamps(dirs: Sequence[Path]) -> tuple[str, ...]:
    """Every contract file of ``dirs`` with its digest."""
    out = []
    for path in (p for d in dirs for p in sorted(d.glob("*.yaml"))):
        try:
            out.append(f"{path}\0{_digest(path)}")
        except OSError:
            out.append(f"{path}\0")
    return tuple(out)


def load_scenario(path: Path | str, *, contracts_dirs: Sequence[Path] = ()) -> Scenario:
    try:
        # Only a regular file within the input limit is hashed: any other is loaded as before,
        # which says what is wrong with it (before reading a byte of an oversized one).
        if not stat.S_ISREG(os.stat(path).st_mode) or oversize(Path(path)) is not None:
            return _load_scenario(path, contracts_dirs)[1]
        from crashmatrix.mock_tools.registry import CONTRACTS_DIR

        named = (str(CONTRACTS_DIR), *map(str, contracts_dirs))
        key = (str(path), os.path.abspath(path), _digest(Path(path)), named)
    except OSError:
        return _load_scenario(path, contracts_dirs)[1]
    cached = _LOADED.get(key)
    if cached is not None and cached[1] == _stamps(cached[0]):
        return cached[2]
    dirs, scenario = _load_scenario(path, contracts_dirs)
    with contextlib.suppress(OSError):
        if _digest(Path(path)) == key[2]:  # not rewritten while it was read
            if len(_LOADED) >= _KEEP:  # explore writes a new file per conversation: bounded
                _LOADED.clear()
            _LOADED[key] = (dirs, _stamps(dirs), scenario)
    return scenario


def _load_scenario(path: Path | str, contracts_dirs: Sequence[Path]) -> tuple[tuple[Path, ...], Scenario]:
    """The contract directories read, and the scenario."""
    doc = load_yaml(path)
    validate(doc, "scenario.schema.json")
    data = doc.data
    from crashmatrix.mock_tools.registry import CONTRACTS_DIR

    dirs = [CONTRACTS_DIR, *contracts_dirs]
    if data.get("contracts_dir"):
        extra = (doc.path.parent / data["contracts_dir"]).resolve()
        if not extra.is_dir():
            raise doc.error(("contracts_dir",), f"{extra} is not a directory of contract YAML files")
        dirs.append(extra)
    contracts = load_contracts(p for d in dirs for p in sorted(d.glob("*.yaml")))
    _check_semantics(doc, contracts)
    rules = tuple(_rule(raw, doc.where(("model", i))[0]) for i, raw in enumerate(data["model"]))
    tools = tuple(data["tools"])
    # The agent is given the scenario's tools plus the lookups their contracts reconcile
    # through: recovery must be able to call them even if the model never does.
    given = list(tools)
    for name in tools:
        lookup = contracts[name].lookup_tool
        if lookup and lookup not in given and lookup in contracts:
            given.append(lookup)
    return tuple(dirs), Scenario(
        path=doc.path,
        name=data["name"],
        tools=tools,
        contracts={name: contracts[name] for name in given},
        turns=tuple(data["turns"]),
        rules=rules,
        files=dict(data.get("files") or {}),
        approvals=dict(data.get("approvals") or {"*": "yes"}),
        approvals_again=dict(data.get("approvals_again") or {}),
        faults=tuple(data.get("faults") or ()),
        between_lives=tuple(data.get("between_lives") or ()),
        cover=tuple(data.get("cover") or ()),
        recovery_crashes=bool(data.get("recovery_crashes", True)),
        recovery_torn_writes=bool(data.get("recovery_torn_writes", False)),
        expect=dict(data.get("expect") or {}),
        description=data.get("description", ""),
        tags=tuple(data.get("tags") or ()),
        evals=tuple(data.get("evals") or ()),
        needs=_needs(data),
        positions=dict(doc.positions),
    )
