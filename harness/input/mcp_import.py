"""Tool contracts from an MCP ``tools/list`` result, classified again by us.

Seed 004 ("MCP 工具也要重新分类"): a server may describe a tool as safe, read-only or a
search; the runtime must not simply believe it. MCP's annotations are *hints* (the MCP spec
says so itself), and their defaults when absent are the worst case::

    readOnlyHint false, destructiveHint true, idempotentHint false, openWorldHint true

So the rules, from strongest to weakest:

1. A write verb in the tool's NAME (create, send, charge, delete, publish, merge, write)
   makes it ``non_idempotent`` whatever the hints say: ``create_issue`` with
   ``readOnlyHint: true`` is a lying hint, and believing it would replay an issue creation.
2. ``readOnlyHint: true`` makes it ``idempotent`` (auto replay, no ledger) only when the
   name and description contain no write verb at all; with ``trust_annotations=True`` the
   description is not second-guessed.
3. ``idempotentHint: true`` on a tool that is not read-only is ``conditional`` / ``ask`` /
   ``manual`` only when annotations are trusted; otherwise it stays ``non_idempotent``.
4. Everything else, including a tool without annotations, is the worst case:
   ``non_idempotent`` / ``never`` / ``surface_uncertain``.

Each contract's ``reason`` says which hint or word decided. ``contract_to_yaml`` writes a
contract file that ``load_contract`` reads back to the same contract, so an import can be
reviewed and committed like any hand-written contract.

Each contract also gets a stub ``mock:`` (``_stub_mock``), because a scenario refuses a tool
the mock tools cannot run: without one, every call would return UNKNOWN_TOOL and every cell
would pass without testing anything. A tool that may write records its arguments as a row
of a table named after it (so ``world: rows:`` can count its effects); a read-only one
returns an empty result. The file says it is a stub, to be made to answer like the real tool.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from crashmatrix.harness.core.contracts import Idempotency, MockSpec, Recovery, ReplayPolicy, ToolContract
from crashmatrix.harness.errors import InputError

__all__ = [
    "MCP_HINT_DEFAULTS",
    "NAME_VERBS",
    "WRITE_VERBS",
    "McpImport",
    "contract_to_yaml",
    "contracts_from_mcp",
    "import_mcp",
    "tools_of",
]

# The MCP specification's values for an absent hint: each one the pessimistic choice.
MCP_HINT_DEFAULTS: Mapping[str, bool] = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}
# Seed 004's list: in a tool's name these always mean a side effect that must not repeat.
NAME_VERBS = ("create", "send", "charge", "delete", "publish", "merge", "write")
# Any of these in name or description stops an untrusted readOnlyHint from making a tool
# auto-replayable. False positives ("posts" the noun) only cost a question to a person, but
# words that are mostly nouns in tool names ("order" in get_order_status, seed 004's own
# idempotent example; "message", "comment") are left out, or every lookup would ask.
WRITE_VERBS = (
    *NAME_VERBS,
    "update", "pay", "refund", "post", "deploy", "remove", "insert", "upload", "execute", "run",
    "cancel", "transfer", "submit", "put", "patch", "set", "modify", "edit", "add", "drop",
    "destroy", "kill", "move", "rename", "reset", "approve", "invite", "archive", "assign",
    "reply", "push", "commit", "apply", "revoke", "grant", "upsert", "replace", "erase", "purge",
    "truncate", "migrate", "install", "uninstall", "restart", "trigger", "notify", "invoke",
    "withdraw",
)  # fmt: skip
_IRREGULAR: Mapping[str, tuple[str, ...]] = {
    "send": ("sent",),
    "write": ("wrote", "written"),
    "pay": ("paid",),
    "run": ("ran",),
    "put": (),
    "set": (),
}
_NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]{0,63}")
_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def _inflections(verb: str) -> set[str]:
    """The verb's common English forms, so 'creates', 'deleting', 'updated' all count."""
    forms = {verb, verb + "s", verb + "es", verb + "ed", verb + "ing", verb + "d", verb + "er"}
    if verb.endswith("e"):
        forms |= {verb[:-1] + "ing", verb + "d"}
    if verb.endswith("y"):
        forms |= {verb[:-1] + "ies", verb[:-1] + "ied"}
    if len(verb) <= 4 and verb[-1] not in "aeiouwy" and verb[-2] in "aeiou":  # run -> running
        forms |= {verb + verb[-1] + "ing", verb + verb[-1] + "ed", verb + verb[-1] + "er"}
    forms.update(_IRREGULAR.get(verb, ()))
    return forms


_FORMS: Mapping[str, str] = {form: verb for verb in WRITE_VERBS for form in _inflections(verb)}
_NAME_FORMS: Mapping[str, str] = {form: verb for verb in NAME_VERBS for form in _inflections(verb)}


def _words(text: str) -> list[str]:
    """Lower-case words of a tool name or description: ``createIssue``, ``create_issue`` and
    ``create-issue`` all give ``create``, ``issue``."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    return [w for w in re.split(r"[^A-Za-z]+", spaced.lower()) if w]


def _first_verb(text: str, forms: Mapping[str, str]) -> str | None:
    for word in _words(text):
        if word in forms:
            return word
    return None


def _fail(index: int, field: str, problem: str) -> InputError:
    return InputError(f"tools[{index}].{field}: {problem}")


def _check_list(tools: object) -> Sequence[Any]:
    # ``object``: the list comes from a server as parsed JSON, whatever its declared type.
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        raise InputError(
            f"an MCP tools/list result must be a list of tool objects, got {type(tools).__name__}"
        )
    return tools


def _tool_problem(index: int, tool: object, seen: Mapping[str, int]) -> InputError | None:
    """What makes ``tools[index]`` unusable as a contract, or None. ``seen``: the names of
    the tools before it that are kept, by index."""
    if not isinstance(tool, Mapping):
        return InputError(f"tools[{index}]: expected a tool object, got {type(tool).__name__}")
    name = tool.get("name")
    if not isinstance(name, str):
        return _fail(index, "name", "missing or not a string; every MCP tool needs a name")
    if _NAME_PATTERN.fullmatch(name) is None:
        return _fail(
            index,
            "name",
            f"{name!r} cannot be a contract name (letters, digits, '_' and '-', "
            "at most 64, not starting with a digit or '-')",
        )
    if name in seen:
        return _fail(index, "name", f"{name!r} is already the name of tools[{seen[name]}]")
    description = tool.get("description")
    if description is not None and not isinstance(description, str):
        return _fail(index, "description", f"expected a string, got {type(description).__name__}")
    schema = tool.get("inputSchema")
    if not isinstance(schema, Mapping):
        return _fail(index, "inputSchema", "missing or not an object; MCP requires a JSON Schema object here")
    annotations = tool.get("annotations")
    if annotations is None:
        return None
    if not isinstance(annotations, Mapping):
        return _fail(index, "annotations", f"expected an object, got {type(annotations).__name__}")
    for hint in _HINTS:
        value = annotations.get(hint)
        if value is not None and not isinstance(value, bool):
            return _fail(index, f"annotations.{hint}", f"expected true or false, got {json.dumps(value)}")
    return None


def _validate(tools: object) -> None:
    seen: dict[str, int] = {}
    for index, tool in enumerate(_check_list(tools)):
        problem = _tool_problem(index, tool, seen)
        if problem is not None:
            raise problem
        seen[tool["name"]] = index


def _classify(
    tool: Mapping[str, Any], *, trust_annotations: bool
) -> tuple[Idempotency, ReplayPolicy, Recovery, str]:
    name: str = tool["name"]
    description: str = tool.get("description") or ""
    annotations: Mapping[str, Any] = tool.get("annotations") or {}
    hints = {hint: annotations.get(hint, MCP_HINT_DEFAULTS[hint]) for hint in _HINTS}
    given = ", ".join(f"{h}={str(annotations[h]).lower()}" for h in _HINTS if h in annotations)
    stated = f"hints {given}" if given else "no annotations (MCP defaults: not read-only, destructive)"

    name_verb = _first_verb(name, _NAME_FORMS)
    if name_verb is not None:
        return (
            "non_idempotent", "never", "surface_uncertain",
            f"the name contains the write verb {name_verb!r}, which overrides {stated}.",
        )  # fmt: skip
    if hints["readOnlyHint"]:
        if trust_annotations:
            return "idempotent", "auto", "replay", f"readOnlyHint=true is trusted ({stated})."
        word = _first_verb(f"{name} {description}", _FORMS)
        if word is None:
            return (
                "idempotent", "auto", "replay",
                f"readOnlyHint=true and neither name nor description contains a write verb ({stated}).",
            )  # fmt: skip
        return (
            "non_idempotent", "never", "surface_uncertain",
            f"readOnlyHint=true is not trusted because the name or description says {word!r} ({stated}).",
        )  # fmt: skip
    if hints["idempotentHint"]:
        if trust_annotations:
            return (
                "conditional", "ask", "manual",
                f"idempotentHint=true is trusted for a tool that is not read-only ({stated}).",
            )  # fmt: skip
        return (
            "non_idempotent", "never", "surface_uncertain",
            f"idempotentHint=true is a hint and annotations are not trusted ({stated}).",
        )  # fmt: skip
    return (
        "non_idempotent", "never", "surface_uncertain",
        f"the tool may have side effects: {stated}; the worst case is assumed.",
    )  # fmt: skip


_TABLE_LIMIT = 41  # contract.schema.json: a table is ^[a-z][a-z0-9_]{0,40}$


def _table_for(name: str, taken: set[str]) -> str:
    """A generic-mock table name for tool ``name`` that the contract schema accepts and no
    other tool of this import uses (two tools sharing a table would count each other's rows)."""
    snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    base = re.sub(r"[^a-z0-9]+", "_", snake).strip("_")
    base = re.sub(r"^[^a-z]+", "", base)[:_TABLE_LIMIT].rstrip("_") or "rows"
    table, n = base, 1
    while table in taken:
        n += 1
        suffix = f"_{n}"
        table = base[: _TABLE_LIMIT - len(suffix)] + suffix
    taken.add(table)
    return table


def _stub_mock(name: str, idempotency: Idempotency, taken: set[str]) -> MockSpec:
    if idempotency == "idempotent":
        return MockSpec(kind="read_only")
    return MockSpec(kind="record_row", table=_table_for(name, taken))


def _plain(value: Any) -> Any:
    """A JSON-only deep copy (dicts, lists, str, numbers, bools, None): what YAML can dump
    safely and what ``load_contract`` gives back, so a round trip compares equal."""
    return json.loads(json.dumps(value))


def tools_of(raw: object) -> Sequence[Any]:
    """The tool list inside what was saved from a server, in any of its usual shapes: the
    bare list, the ``tools/list`` result (``{"tools": [...]}``) or the whole JSON-RPC
    response (``{"jsonrpc": "2.0", "id": 1, "result": {"tools": [...]}}``). A JSON-RPC
    error response, or anything else, is refused with what it is."""
    if isinstance(raw, Mapping) and "jsonrpc" in raw:
        error = raw.get("error")
        if isinstance(error, Mapping):
            raise InputError(
                f"a JSON-RPC error response ({error.get('code')}: {error.get('message')}), "
                "not a tools/list result; save the response of a successful tools/list call"
            )
        if not isinstance(raw.get("result"), Mapping):
            raise InputError('a JSON-RPC response without a "result" object; expected result.tools')
        raw = raw["result"]
    if isinstance(raw, Mapping):
        if "tools" not in raw:
            keys = ", ".join(sorted(str(k) for k in raw)) or "none"
            raise InputError(
                f'an object without "tools" (its keys: {keys}); expected a tools/list result '
                '{"tools": [...]}, a JSON-RPC response holding one, or the bare list'
            )
        raw = raw["tools"]
    return _check_list(raw)


@dataclass(frozen=True, slots=True)
class McpImport:
    """What ``import_mcp`` made of a tool list: the contracts of the usable tools, and one
    line per tool left out naming it and why."""

    contracts: tuple[ToolContract, ...]
    skipped: tuple[str, ...] = ()


def import_mcp(raw: object, *, trust_annotations: bool = False, source: str = "(mcp)") -> McpImport:
    """Contracts from a saved ``tools/list`` answer in any shape ``tools_of`` reads. Unlike
    ``contracts_from_mcp``, a tool that cannot become a contract (``fs.write_file``: a dot
    is no contract name) is skipped and named, and the others are imported: one server's
    odd tool must not cost a team the contracts of all the others."""
    tools = tools_of(raw)
    kept: list[Mapping[str, Any]] = []
    skipped: list[str] = []
    seen: dict[str, int] = {}
    for index, tool in enumerate(tools):
        problem = _tool_problem(index, tool, seen)
        if problem is not None:
            skipped.append(f"{source}: {problem}; skipped")
            continue
        seen[tool["name"]] = index
        kept.append(tool)
    contracts = contracts_from_mcp(kept, trust_annotations=trust_annotations, source=source)
    return McpImport(tuple(contracts), tuple(skipped))


def contracts_from_mcp(
    tools: Sequence[Mapping[str, Any]],
    *,
    trust_annotations: bool = False,
    source: str = "(mcp)",
) -> list[ToolContract]:
    """One contract per MCP tool, in the server's order.

    Raises ``InputError`` naming ``tools[i].field`` for a malformed list, before any contract
    is built: half an import is worse than none.
    """
    _validate(tools)
    contracts: list[ToolContract] = []
    tables: set[str] = set()
    for tool in tools:
        idempotency, replay_policy, recovery, reason = _classify(tool, trust_annotations=trust_annotations)
        contracts.append(
            ToolContract(
                name=tool["name"],
                idempotency=idempotency,
                replay_policy=replay_policy,
                recovery=recovery,
                approval="auto" if idempotency == "idempotent" else "required",
                # Seed 000: a read-only tool writes no ledger lines (read_file has none).
                ledger=idempotency != "idempotent",
                description=tool.get("description") or "",
                parameters=_plain(tool["inputSchema"]),
                mock=_stub_mock(tool["name"], idempotency, tables),
                source=source,
                reason=reason,
            )
        )
    return contracts


def contract_to_yaml(contract: ToolContract) -> str:
    """A contract file for ``contract`` (every field written out, defaults included, so the
    file says what it means without the reader knowing the defaults)."""
    data: dict[str, Any] = {"name": contract.name}
    if contract.description:
        data["description"] = contract.description
    data["idempotency"] = contract.idempotency
    data["replay_policy"] = contract.replay_policy
    data["recovery"] = contract.recovery
    data["approval"] = contract.approval
    data["ledger"] = contract.ledger
    if contract.lookup_tool:
        data["reconcile"] = {"lookup_tool": contract.lookup_tool}
    if (contract.path_argument, contract.content_argument) != ("path", "content"):
        data["precondition"] = {
            "path_argument": contract.path_argument,
            "content_argument": contract.content_argument,
        }
    if contract.side_effects:
        data["side_effects"] = list(contract.side_effects)
    if contract.classify:
        data["classify"] = contract.classify
    if contract.reason:
        data["reason"] = contract.reason
    if contract.parameters:
        data["parameters"] = _plain(contract.parameters)
    if contract.mock is not None:
        mock: dict[str, Any] = {"kind": contract.mock.kind}
        if contract.mock.table:
            mock["table"] = contract.mock.table
        if contract.mock.honours_idempotency_key:
            mock["honours_idempotency_key"] = True
        if contract.mock.result:
            mock["result"] = _plain(contract.mock.result)
        data["mock"] = mock
    header = f"# Tool contract generated from {contract.source}; review before committing.\n"
    if contract.mock is not None:
        header += (
            "# mock: is how the crash tests run this tool (an import writes a stub chosen by the\n"
            "# tool's class); make it answer like the real tool (kind, table, result:).\n"
        )
    body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100)
    return header + body
