"""Kind 2: an unmodified Python agent, imported in the life process. Its functions named by
the adapter file are replaced on the module object before its ``main`` runs: wrapped to
mark boundaries, or (``intercept:``) replaced by the harness's mock tools. The agent's code
looks its functions up by name at call time, so not a line of it changes, on disk or in
memory."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from crashmatrix.harness.agents.adapter_file import BoundaryRule, ForeignSpec, Intercept, Where
from crashmatrix.harness.agents.effects import EffectProbe
from crashmatrix.harness.core.boundaries import BoundaryHook
from crashmatrix.harness.errors import InputError

__all__ = [
    "RULES_INSTALLED",
    "RULE_CALLED",
    "RULE_FIRED",
    "RULE_HELD",
    "Marks",
    "RunTool",
    "SilentRule",
    "held_by",
    "import_agent",
    "install_boundaries",
    "install_intercepts",
    "probing_fsyncs",
    "rule_name",
    "silent_rules",
]

# The life's trace says what each adapter rule did (``harness.core.trace``): the rules
# installed (where each is in adapter.yaml, and where the agent still holds the original
# function), then, once a life each, a rule's function called through the wrapper, its
# where: holding, and its boundary marked (an intercept: its mock tool run). A rule with no
# ``rule_fired`` in a clean run never acted: the boundary it feeds was not reachable there.
RULES_INSTALLED = "rules"
RULE_CALLED = "rule_called"
RULE_HELD = "rule_held"
RULE_FIRED = "rule_fired"
Trace = Callable[[Mapping[str, Any]], None]
# A kind-2 script is imported under this prefix and its file's stem (its siblings import as usual).
SCRIPT_PREFIX = "crashmatrix_agent_"


@dataclass(frozen=True, slots=True)
class SilentRule:
    """An adapter rule (a boundary rule, an intercept) that never acted in a case."""

    rule: str  # adapter.yaml:line:col
    kind: str  # "boundary" | "intercept"
    function: str
    boundary: str  # the boundary it feeds
    why: str
    # Its function ran and only its where: never held: maybe a condition this scenario lacks
    # (no approval asked), not a rule that cannot fire (the doctor still names it).
    conditional: bool = False

    def describe(self) -> str:
        what = "boundary rule" if self.kind == "boundary" else "intercept"
        return f"{what} {self.rule} ({self.function} -> {self.boundary}) never fired: {self.why}"


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


class Marks:
    """Calls the life's hook where the agent's wrapped functions say a boundary is, and says
    in the life's trace when each rule first acted (``RULE_EVENTS``): a rule that never did
    proves its boundary was never reachable, which the clean run's trace then shows."""

    def __init__(self, hook: BoundaryHook, trace: Trace | None = None) -> None:
        self.hook = hook
        self.last_call_id = ""
        self.trace: Trace = trace or (lambda event: None)
        self._said: set[tuple[str, str]] = set()

    def once(self, event: str, rule: str, **more: Any) -> None:
        """One trace line the first time ``rule`` does ``event`` in this life (a few lines a
        life, never one per call)."""
        if (event, rule) not in self._said:
            self._said.add((event, rule))
            self.trace({"event": event, "rule": rule, **more})

    def fire(self, rules: Sequence[BoundaryRule], arguments: Mapping[str, Any]) -> None:
        for rule in rules:
            name = rule_name(rule)
            if not all(_holds(cond, arguments) for cond in rule.where):
                continue
            self.once(RULE_HELD, name)
            if rule.call_id is not None:
                ids = [str(v) for v in _lookup(arguments.get(rule.call_id[0]), rule.call_id[1]) if v]
            else:
                ids = [self.last_call_id] if self.last_call_id else []
            for call_id in ids:
                self.last_call_id = call_id
                self.once(RULE_FIRED, name, boundary=rule.boundary)
                self.hook(rule.boundary, call_id)


def _wrap(original: Callable[..., Any], rules: Sequence[BoundaryRule], marks: Marks) -> Callable[..., Any]:
    signature = inspect.signature(original)
    before = [r for r in rules if r.at == "call"]
    after = [r for r in rules if r.at == "return"]

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        for rule in rules:
            marks.once(RULE_CALLED, rule_name(rule))
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


def _resolve(module: ModuleType, dotted: str, what: str) -> tuple[Any, str, Callable[..., Any]]:
    """(owner, attribute, function) for ``name`` or ``Class.method`` in ``module``."""
    owner: Any = module
    *parents, attr = dotted.split(".")
    # ``agent.f`` names the agent's own ``f`` by its module's name (a script is loaded under
    # another name: ``import_agent``), unless the agent has an attribute of that name.
    own = module.__name__.removeprefix(SCRIPT_PREFIX).rpartition(".")[2]
    if parents and parents[0] == own and not hasattr(module, own):
        parents = parents[1:]
    for part in parents:
        owner = getattr(owner, part, None)
    original = getattr(owner, attr, None) if owner is not None else None
    if not callable(original):
        raise InputError(f"{module.__name__} has no function {dotted!r}; fix {what}")
    return owner, attr, original


def install_boundaries(
    module: ModuleType, rules: Sequence[BoundaryRule], hook: BoundaryHook, marks: Marks | None = None
) -> Marks:
    """Replace each named function of ``module`` (or ``Class.method``) by a wrapper that
    calls ``hook``. The agent's code looks its functions up by name at call time, so it calls
    the wrappers without a line of it changing. Returns the marks (the last call id seen)."""
    marks = marks or Marks(hook)
    by_function: dict[str, list[BoundaryRule]] = {}
    for rule in rules:
        by_function.setdefault(rule.function, []).append(rule)
    listed: list[dict[str, Any]] = []
    for dotted, group in by_function.items():
        owner, attr, original = _resolve(module, dotted, "boundaries[].function")
        setattr(owner, attr, _wrap(original, group, marks))
        held = held_by(module, original, dotted)
        listed += [
            {
                "rule": rule_name(r),
                "kind": "boundary",
                "function": dotted,
                "boundary": r.boundary,
                "held": held,
            }
            for r in group
        ]
    if listed:
        marks.trace({"event": RULES_INSTALLED, "rules": listed})
    return marks


def rule_name(rule: BoundaryRule | Intercept) -> str:
    """How the trace names a rule: where it is in adapter.yaml (its function, if unknown)."""
    if rule.position:
        return rule.position
    if isinstance(rule, Intercept):
        return f"intercept.{rule.tool}"
    return f"{rule.function} -> {rule.boundary}"


_RESOLVED: dict[str, Path] = {}


def _beside(directory: str, folder: Path) -> bool:
    """Whether a module in ``directory`` lies in ``folder`` (resolved). Only a directory of
    the same name is resolved, once a process: resolving every loaded module's file for every
    rule (a framework's 2,000 modules, 10 rules) was ~1 s of each kind-2 life."""
    if os.path.basename(directory) != folder.name:
        return False
    if directory not in _RESOLVED:
        _RESOLVED[directory] = Path(directory).resolve()
    return _RESOLVED[directory] == folder


def held_by(module: ModuleType, original: Callable[..., Any], dotted: str) -> list[str]:
    """Where the agent still holds the ORIGINAL function after it was replaced on its module:
    a global bound to it under another name (imported by value, an alias), a dict, list or
    tuple a global holds (a dispatch table built at import), in the agent's module and the
    modules beside its file. Calls through those never pass the wrapper; named precisely,
    they are the likely reason a rule never fired. Cheap: one look at each global."""
    places: list[str] = []
    folder = Path(getattr(module, "__file__", "") or ".").resolve().parent
    modules = [module] + [
        m
        for m in list(sys.modules.values())
        if m is not module
        and isinstance(file := getattr(m, "__file__", None), str)
        and _beside(os.path.dirname(file), folder)
    ]
    for owner in modules:
        prefix = "" if owner is module else f"{owner.__name__}."
        for name, value in list(vars(owner).items()):
            if name.startswith("__"):
                continue
            if value is original and not (owner is module and name == dotted):
                places.append(f"{prefix}{name}")
            elif isinstance(value, Mapping):
                places += [f"{prefix}{name}[{k!r}]" for k, v in list(value.items()) if v is original]
            elif isinstance(value, list | tuple):
                places += [f"{prefix}{name}[{i}]" for i, v in enumerate(value) if v is original]
    return places


def silent_rules(trace: Sequence[Mapping[str, Any]]) -> list[SilentRule]:
    """The rules of a case's lives that never acted (none of its lives fired them), each
    with why, from the trace alone (``RULES_INSTALLED`` and the first-time events)."""
    installed: dict[str, Mapping[str, Any]] = {}
    done: dict[str, set[str]] = {}
    for event in trace:
        kind = event.get("event")
        if kind == RULES_INSTALLED:
            for rule in event.get("rules") or ():
                installed.setdefault(str(rule.get("rule")), rule)
        elif kind in (RULE_CALLED, RULE_HELD, RULE_FIRED):
            done.setdefault(str(event.get("rule")), set()).add(str(kind))
    silent: list[SilentRule] = []
    for name, rule in installed.items():
        seen = done.get(name, set())
        if RULE_FIRED in seen:
            continue
        silent.append(
            SilentRule(
                name,
                str(rule.get("kind")),
                str(rule.get("function")),
                str(rule.get("boundary")),
                _why_silent(rule, seen),
                RULE_CALLED in seen and RULE_HELD not in seen,
            )
        )
    return silent


def _why_silent(rule: Mapping[str, Any], seen: set[str]) -> str:
    function = str(rule.get("function"))
    held = [str(h) for h in rule.get("held") or ()]
    if RULE_HELD in seen:
        return (
            f"its where: held, but no call id was found ({function}'s call_id: gave none and no "
            "earlier rule named a call)"
        )
    if RULE_CALLED in seen:
        return f"{function} was called, but this rule's where: never held (check its argument names and keys)"
    if held:
        return (
            f"{function} was never called through its module attribute: the agent holds the original "
            f"function in {', '.join(held)} (a dict or a name bound at import, before the harness "
            "replaced it), and calls it from there; name a function the agent calls by its module "
            "attribute (e.g. the one that looks the tool up), or look it up at call time"
        )
    return (
        f"{function} was never called through its module attribute: is it held in a dict or "
        "imported by value in a module the harness does not scan, or does this scenario never call it?"
    )


# The harness's side of an intercepted call: (tool, arguments, tool_call_id, the idempotency
# key the function was given or None) -> the tool result object (``ToolObservation.to_result``).
RunTool = Callable[[str, Mapping[str, Any], str, str | None], Mapping[str, Any]]


def _shaper(returns: str, here: Path) -> Callable[[Mapping[str, Any]], Any]:
    if returns == "result":
        return dict
    if returns == "json":
        return lambda result: json.dumps(dict(result), ensure_ascii=False)
    module_name, _, attr = returns.partition(":")
    if str(here) not in sys.path:
        sys.path.insert(0, str(here))  # a hook module beside the adapter file
    hook: Callable[[Mapping[str, Any]], Any] = getattr(importlib.import_module(module_name), attr)
    return hook


def install_intercepts(
    module: ModuleType, intercepts: Sequence[Intercept], marks: Marks, run_tool: RunTool, here: Path
) -> None:
    """Replace the agent's own tool functions by calls to the harness's mock tools: the
    effect lands in the counted world, at the exact moment, with the session's size then.
    Only the module object in this process changes; the agent's files are never touched."""
    listed: list[dict[str, Any]] = []
    for intercept in intercepts:
        owner, attr, original = _resolve(module, intercept.function, f"intercept.{intercept.tool}.function")
        setattr(
            owner, attr, _replacement(original, intercept, marks, run_tool, _shaper(intercept.returns, here))
        )
        held = held_by(module, original, intercept.function)
        listed.append(
            {
                "rule": rule_name(intercept),
                "kind": "intercept",
                "function": intercept.function,
                "boundary": "during_side_effect",
                "tool": intercept.tool,
                "held": held,
            }
        )
    if listed:
        marks.trace({"event": RULES_INSTALLED, "rules": listed})


def _replacement(
    original: Callable[..., Any],
    intercept: Intercept,
    marks: Marks,
    run_tool: RunTool,
    shape: Callable[[Mapping[str, Any]], Any],
) -> Callable[..., Any]:
    signature = inspect.signature(original)

    def replacement(*args: Any, **kwargs: Any) -> Any:
        marks.once(RULE_FIRED, rule_name(intercept), boundary="during_side_effect")
        bound = signature.bind(*args, **kwargs)  # a wrong call raises the agent's own TypeError
        bound.apply_defaults()
        given = dict(bound.arguments)
        arguments = {
            tool_arg: given[param] for tool_arg, param in intercept.arguments.items() if param in given
        }
        call_id = marks.last_call_id
        if intercept.call_id is not None:
            found = [str(v) for v in _lookup(given.get(intercept.call_id[0]), intercept.call_id[1]) if v]
            call_id = found[0] if found else call_id
        key = given.get(intercept.key) if intercept.key else None
        return shape(run_tool(intercept.tool, arguments, call_id, None if key is None else str(key)))

    replacement.__wrapped__ = original  # type: ignore[attr-defined]
    replacement.__name__ = getattr(original, "__name__", "intercepted")
    return replacement


def import_agent(spec: ForeignSpec) -> ModuleType:
    if spec.module:
        # Its folder first, as when it runs from there: another adapter's folder put on the
        # path earlier in this process (a load check, a fork server's warm-up) must not lend
        # it a sibling of the same name (two teams' ``fixed.py``).
        here = str(spec.here)
        if here in sys.path:
            sys.path.remove(here)
        sys.path.insert(0, here)
        return importlib.import_module(spec.module)
    assert spec.script is not None
    # Its siblings must import as they do when it runs as a script.
    sys.path.insert(0, str(spec.script.parent))
    name = f"{SCRIPT_PREFIX}{spec.script.stem}"
    loaded = importlib.util.spec_from_file_location(name, spec.script)
    if loaded is None or loaded.loader is None:
        raise InputError(f"{spec.path}: cannot load {spec.script} as Python")
    module = importlib.util.module_from_spec(loaded)
    sys.modules[name] = module
    loaded.loader.exec_module(module)
    return module


@contextlib.contextmanager
def probing_fsyncs(probe: EffectProbe, on_sync: Callable[[int], None] | None = None) -> Iterator[None]:
    """Probe the agent's own effects after every ``os.fsync`` / ``os.fdatasync`` in this
    process: an agent that makes an effect durable is seen right then, before its next
    session line (a ``running`` written after the effect is then caught, not undecided).

    ``on_sync(fd)`` runs after the probe: the moment the agent synced a file is one where
    it has done nothing since its last write (``ForeignAdapter`` offers its session's last
    line for tearing there; it may never return)."""
    originals = os.fsync, os.fdatasync

    def wrap(original: Callable[[Any], None]) -> Callable[[Any], None]:
        def synced(fd: Any) -> None:
            original(fd)
            probe.probe("fsync")
            if on_sync is not None:
                on_sync(fd if isinstance(fd, int) else fd.fileno())

        return synced

    # setattr: the module attributes the agent's code looks up at call time.
    setattr(os, "fsync", wrap(originals[0]))  # noqa: B010
    setattr(os, "fdatasync", wrap(originals[1]))  # noqa: B010
    try:
        yield
    finally:
        setattr(os, "fsync", originals[0])  # noqa: B010
        setattr(os, "fdatasync", originals[1])  # noqa: B010
