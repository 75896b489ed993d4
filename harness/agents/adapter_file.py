"""The adapter YAML of an agent the harness did not write (kind 2 ``python:``, kind 3
``command:``): read, checked, every problem one ``path:line:col`` line."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashmatrix.harness.agents.foreign_session import (
    LedgerMap,
)
from crashmatrix.harness.input.yamlfile import Located, load_yaml, validate

__all__ = ["DEFAULT_SESSION", "BoundaryRule", "ForeignSpec", "load_foreign"]

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
