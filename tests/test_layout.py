"""The layout's rules, checked on the source: one stage per package, the data path only
runs forward, the pure core stays pure, nothing forms an import cycle, and everything is
imported under its installed name (``crashmatrix.*``).

Imports are read with ``ast`` (every ``import`` statement, top level or inside a function),
so a rule holds whether or not a test happens to execute the import."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("harness", "mock_tools", "reference_agent", "reports")
SOURCES = [*FOLDERS, "tests", "benchmarks", "examples"]

# Modules whose code (and everything it imports) must stay free of processes, HTTP, SQLite
# and YAML: the pure core of ARCHITECTURE.md.
PURE = (
    "harness.core",
    "harness.plan",
    "harness.verdict",
    "harness.observation.observation",
    "harness.observation.conversation",
    "reference_agent.recovery",
)
IMPURE_LIBRARIES = {
    "subprocess",
    "multiprocessing",
    "socket",
    "signal",
    "threading",
    "http",
    "urllib",
    "httpx",
    "respx",
    "openai",
    "sqlite3",
    "yaml",
    "jsonschema",
    "pytest",
    "hypothesis",
    "fcntl",
    "tempfile",
    "shutil",
}
# The data path: input -> plan -> lives -> observation -> verdict -> report, with agents
# beside the lives and the front doors on top. Each package may import only these (and
# itself); the stages before it never import it.
ALLOWED: dict[str, set[str]] = {
    "harness": set(),  # the package itself: a docstring
    "harness.errors": set(),
    "harness.core": {"harness.errors"},
    "harness.input": {"harness.errors", "harness.core", "mock_tools.registry"},
    "harness.plan": {"harness.errors", "harness.core"},
    "harness.session_file": {"harness.errors", "harness.core"},
    # The mock tools read their own contract files (the built-in catalogue).
    "mock_tools": {"harness.errors", "harness.core", "harness.session_file", "harness.input.contract_files"},
    "harness.lives": {
        "harness.errors",
        "harness.core",
        "harness.input",
        "harness.session_file",
        "harness.agents.protocol",
        "harness.agents.loading",
        "harness.agents.tool_faults",  # a leaf: the case's armed tool-side fault (its script)
        "mock_tools",
    },
    "harness.observation": {
        "harness.errors",
        "harness.core",
        "harness.session_file",
        "harness.lives.casedir",
        "mock_tools.world",
    },
    "harness.verdict": {
        "harness.errors",
        "harness.core",
        "harness.plan",
        "harness.observation.observation",
        "harness.observation.conversation",
    },
    "harness.agents": {
        "harness.errors",
        "harness.core",
        "harness.input.yamlfile",
        "harness.session_file",
        "harness.lives.parent_death",
        "harness.lives.descendants",  # a leaf, like parent_death: no lives machinery behind it
        "harness.lives.capped_log",  # a leaf too: an agent's output, kept bounded
        "harness.lives.postgres",  # a leaf too: a store's server and a case's database on it
        "harness.lives.threads",  # a leaf too: which threads of a life a snapshot may ignore
        "harness.lives.helper_processes",  # a leaf too: the harness's own processes of a life
        "harness.observation",
        "mock_tools",
        "reference_agent",
    },
    "reference_agent": {
        "harness.errors",
        "harness.core",
        "harness.session_file",
        "harness.agents",
        "mock_tools",
    },
    "reports": {
        "harness.errors",
        "harness.core",
        "harness.plan",
        "harness.verdict",
        "harness.observation.observation",
    },
    "harness.front": {"harness", "mock_tools", "reference_agent", "reports"},
}


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _files() -> Iterator[Path]:
    for folder in FOLDERS:
        yield from sorted((ROOT / folder).rglob("*.py"))


def _imports(path: Path) -> Iterator[tuple[str, int, bool]]:
    """(module imported, line, at top level) for every import statement of a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(node) for node in tree.body}
    own = (
        _module_of(path).split(".")
        if path.is_relative_to(ROOT / "harness") or any(path.is_relative_to(ROOT / f) for f in FOLDERS)
        else []
    )
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, id(node) in top
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = own if path.name == "__init__.py" else own[:-1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
                names = [f"{module}.{a.name}" for a in node.names] if not node.module else [module]
                for name in names:
                    yield "crashmatrix." + name, node.lineno, id(node) in top
            elif node.module:
                yield node.module, node.lineno, id(node) in top
                if node.module == "crashmatrix" or node.module.startswith("crashmatrix."):
                    for alias in node.names:  # ``from crashmatrix.harness import errors``
                        yield f"{node.module}.{alias.name}", node.lineno, id(node) in top


def _known() -> set[str]:
    return {_module_of(path) for path in _files()}


def _ours(name: str, known: set[str]) -> str | None:
    """The module of ours an import names (``crashmatrix.harness.core.ledger`` -> its key)."""
    if not name.startswith("crashmatrix."):
        return None
    short = name.removeprefix("crashmatrix.")
    while short and short not in known:
        short = short.rpartition(".")[0]
    return short or None


def _graph(*, top_only: bool) -> dict[str, set[str]]:
    known = _known()
    graph: dict[str, set[str]] = {m: set() for m in known}
    for path in _files():
        here = _module_of(path)
        for name, _, top in _imports(path):
            target = _ours(name, known)
            if target and target != here and (top or not top_only):
                # A package's __init__ is imported on the way to its modules: an edge to a
                # module implies one to its packages, which are checked on their own.
                graph[here].add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _package(module: str) -> str:
    """The ALLOWED key a module belongs to (its longest prefix in the table)."""
    probe = module
    while probe:
        if probe in ALLOWED:
            return probe
        probe = probe.rpartition(".")[0]
    raise AssertionError(f"{module} belongs to no package of the layout table; add it to ALLOWED")


def _within(target: str, allowed: set[str]) -> bool:
    return any(target == a or target.startswith(a + ".") for a in allowed)


def test_no_module_imports_itself_back_through_others_at_import_time() -> None:
    assert _cycle(_graph(top_only=True)) is None


def test_no_import_cycle_even_through_imports_inside_functions() -> None:
    assert _cycle(_graph(top_only=False)) is None


def test_every_package_imports_only_the_stages_before_it() -> None:
    known = _known()
    broken = []
    for path in _files():
        here = _module_of(path)
        home = _package(here)
        for name, line, _ in _imports(path):
            target = _ours(name, known)
            if target is None or _package(target) == home or target.startswith(home + "."):
                continue
            if target in ("harness", "reports", "mock_tools", "reference_agent"):
                continue  # a package's own __init__ (a namespace for its modules)
            if not _within(target, ALLOWED[home]):
                broken.append(f"{path.relative_to(ROOT)}:{line}: {home} imports {target}")
    assert broken == []


def test_the_pure_core_imports_no_process_http_sqlite_or_yaml_code_even_indirectly() -> None:
    known = _known()
    graph = _graph(top_only=False)
    third_party: dict[str, set[tuple[str, int]]] = {m: set() for m in known}
    for path in _files():
        for name, line, _ in _imports(path):
            if not name.startswith("crashmatrix"):
                third_party[_module_of(path)].add((name.split(".")[0], line))
    pure = sorted(m for m in known if any(m == p or m.startswith(p + ".") for p in PURE))
    assert "harness.verdict.verdict" in pure and "harness.core.ledger" in pure
    broken = []
    for start in pure:
        seen, todo = {start}, [start]
        while todo:
            module = todo.pop()
            for library, line in sorted(third_party[module]):
                if library in IMPURE_LIBRARIES:
                    broken.append(f"{start} -> ... -> {module}:{line} imports {library}")
            for nxt in graph[module]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
    assert broken == []


def _bare_imports(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            if name.split(".")[0] in FOLDERS:
                yield f"{path.relative_to(ROOT)}:{node.lineno}: import {name}"


def test_nothing_imports_a_folder_by_its_bare_name() -> None:
    # ``python -m pytest`` puts the repository root on sys.path, where ``import harness``
    # would load a second copy of every module beside ``crashmatrix.harness``.
    found = [
        line
        for source in SOURCES
        for path in sorted((ROOT / source).rglob("*.py"))
        for line in _bare_imports(path)
    ]
    assert found == []


def test_the_installed_packages_are_exactly_the_folders() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = set(config["tool"]["setuptools"]["packages"])
    folders = {
        "crashmatrix." + ".".join(init.parent.relative_to(ROOT).parts)
        for folder in FOLDERS
        for init in (ROOT / folder).rglob("__init__.py")
    }
    # The built-in suite is installed too, as data: crashmatrix eval runs it from anywhere.
    assert declared == folders | {"crashmatrix.scenarios"}
    mapping = config["tool"]["setuptools"]["package-dir"]
    assert mapping == {f"crashmatrix.{folder}": folder for folder in (*FOLDERS, "scenarios")}
    data = config["tool"]["setuptools"]["package-data"]["crashmatrix.scenarios"]
    shipped = {p for pattern in data for p in (ROOT / "scenarios").glob(pattern)}
    assert shipped == {p for p in (ROOT / "scenarios").rglob("*") if p.is_file()}


@pytest.mark.slow  # a fresh interpreter: this one has imported everything already
@pytest.mark.parametrize("module", ["crashmatrix.harness.front.plugin"])
def test_the_pytest_plugin_imports_nothing_heavy(module: str) -> None:
    # It is loaded by every pytest run of an environment crashmatrix is installed in.
    code = f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))"
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/"
        ).stdout.split()
    )
    heavy = {"openai", "httpx", "respx", "yaml", "jsonschema", "sqlite3", "hypothesis", "xdist"}
    assert loaded & heavy == set()
    ours = {name for name in loaded if name.startswith("crashmatrix.")}
    assert ours == {"crashmatrix.harness", "crashmatrix.harness.front", module}
