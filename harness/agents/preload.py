"""What the fork server imports once for an agent, so that its lives are forks of a warm
process instead of each importing the agent's libraries again (a framework import costs
seconds; a fork, milliseconds).

Only libraries, never the agent's own code: an agent module's top level may read the
environment a life sets (``OPENAI_BASE_URL`` of the life's loopback server), open a database
or start a thread, and whatever runs before the fork is shared, frozen, by every life. So the
agent's own file is read, not run: its top-level ``import`` statements name what to preload
(``imports_of``), minus its own sibling modules (they are the agent's code too). A preload
that fails costs nothing: the life imports it again and fails there, with its real error.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from crashmatrix.harness.agents.adapter_file import module_file

__all__ = ["imports_of"]


def imports_of(path: Path, *, own: Iterable[Path] = ()) -> tuple[str, ...]:
    """The absolute modules a Python file imports at its top level (inside ``try`` and ``if``
    blocks too: a guarded import is still the common case), in order, without duplicates.
    Modules whose file lies under one of the ``own`` directories are the agent's own code
    and left out; so are relative imports."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return ()
    names: list[str] = []
    for node in _top_level(tree.body):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    mine = [directory.resolve() for directory in own]
    out: list[str] = []
    for name in dict.fromkeys(names):
        if name == "__future__":
            continue
        local = [d.joinpath(*name.split(".")) for d in mine]
        if any(p.with_suffix(".py").exists() or (p / "__init__.py").exists() for p in local):
            continue
        source = module_file(name)
        if source is not None and any(source.resolve().is_relative_to(d) for d in mine):
            continue
        out.append(name)
    return tuple(out)


def _top_level(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    for node in body:
        yield node
        if isinstance(node, ast.Try):
            yield from _top_level(node.body)
            for handler in node.handlers:
                yield from _top_level(handler.body)
        elif isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
