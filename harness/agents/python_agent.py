"""Kind 2: boundaries in an unmodified Python agent's own functions (wrapped by name before
its ``main`` runs)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from crashmatrix.harness.agents.adapter_file import (
    BoundaryRule,
    ForeignSpec,
    Where,
)
from crashmatrix.harness.core.boundaries import BoundaryHook
from crashmatrix.harness.errors import InputError

__all__ = []


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
