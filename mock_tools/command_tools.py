"""``run_command``: a deterministic shell SIMULATOR over the workspace (no real shell).

Seed 004's point is that one tool name hides many behaviours, so the simulator implements
one command of each class and nothing else::

    pwd | ls [DIR] | cat FILE        read-only
    npm test                         conditional: writes coverage/ and .cache/ artifacts
    npm publish                      non-idempotent: one more row in ``releases``
    rm -rf PATH                      destructive
    echo TEXT >> FILE                non-idempotent: one more line (seed 000's audit.log)

Anything else is refused with TOOL_ERROR, not approximated: a simulator that guesses would
make a crash test prove nothing. All paths go through the sandbox.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path, PurePosixPath

from crashmatrix.harness.core.tools import ToolObservation
from crashmatrix.harness.errors import SandboxViolation
from crashmatrix.harness.session_file import fsync_directory
from crashmatrix.mock_tools.calls import Call, invalid, refused, tool_error
from crashmatrix.mock_tools.fileops import append_durably, atomic_write, sha256_bytes
from crashmatrix.mock_tools.sandbox import is_within

__all__ = ["READ_ONLY_KINDS", "command_kind", "run_command"]

READ_ONLY_KINDS = frozenset({"pwd", "ls", "cat", "unsupported", "unparseable"})
_OPERATOR_CHARS = frozenset("();<>|&")
_ARTIFACT_DIRS = ("coverage", ".cache")
VIRTUAL_CWD = "/workspace"  # what ``pwd`` prints: the same in every case directory


def _split(command: str) -> list[str]:
    """Words and shell operators; ``punctuation_chars`` makes ``x>>f`` three tokens."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def _is_operator(token: str) -> bool:
    return bool(token) and set(token) <= _OPERATOR_CHARS


def command_kind(command: str) -> str:
    """Which simulated command this is (``unsupported`` / ``unparseable`` when none)."""
    try:
        tokens = _split(command)
    except ValueError:
        return "unparseable"
    operators = [i for i, token in enumerate(tokens) if _is_operator(token)]
    if tokens[:1] == ["echo"] and len(tokens) >= 3 and operators == [len(tokens) - 2] and tokens[-2] == ">>":
        return "append"
    if operators or not tokens:
        return "unsupported"
    if tokens == ["pwd"]:
        return "pwd"
    if tokens[0] == "ls" and len(tokens) <= 2:
        return "ls"
    if tokens[0] == "cat" and len(tokens) == 2:
        return "cat"
    if tokens == ["npm", "test"]:
        return "npm_test"
    if tokens == ["npm", "publish"]:
        return "npm_publish"
    if tokens[:2] == ["rm", "-rf"] and len(tokens) == 3:
        return "rm"
    return "unsupported"


def _out(command: str, stdout: str, **extra: object) -> ToolObservation:
    return ToolObservation(ok=True, data={"command": command, "exit_code": 0, "stdout": stdout, **extra})


def run_command(call: Call) -> ToolObservation:
    command = str(call.arguments["command"])
    kind = command_kind(command)
    if kind == "unparseable":
        return invalid(f"run_command: cannot parse {command!r} (unbalanced quotes?)")
    if kind == "unsupported":
        return tool_error(f"command not supported by the simulator: {command!r}")
    tokens = _split(command)
    try:
        if kind == "pwd":
            return _out(command, VIRTUAL_CWD + "\n")
        if kind == "ls":
            return _ls(call, command, tokens[1] if len(tokens) == 2 else ".")
        if kind == "cat":
            return _cat(call, command, tokens[1])
        if kind == "npm_test":
            return _npm_test(call, command)
        if kind == "npm_publish":
            return _npm_publish(call, command)
        if kind == "rm":
            return _rm(call, command, tokens[2])
        return _append(call, command, " ".join(tokens[1:-2]), tokens[-1])
    except SandboxViolation as error:
        return refused(error)
    except OSError as error:
        return ToolObservation(
            ok=False, code="TOOL_ERROR", content=f"{command}: {error.strerror}", data={"exit_code": 1}
        )


def _ls(call: Call, command: str, relative: str) -> ToolObservation:
    target = call.world.resolve(relative)
    if not target.exists():
        return ToolObservation(
            ok=False,
            code="NOT_FOUND",
            content=f"ls: {relative}: No such file or directory",
            data={"exit_code": 2},
        )
    forbidden = [f.resolve() for f in call.world.forbidden]
    names = (
        sorted(name for name in os.listdir(target) if not any(is_within(target / name, f) for f in forbidden))
        if target.is_dir()
        else [relative]
    )
    return _out(command, "".join(f"{name}\n" for name in names))


def _cat(call: Call, command: str, relative: str) -> ToolObservation:
    target = call.world.resolve(relative)
    try:
        text = target.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ToolObservation(
            ok=False,
            code="NOT_FOUND",
            content=f"cat: {relative}: No such file or directory",
            data={"exit_code": 1},
        )
    return _out(command, text)


def _source_files(call: Call) -> dict[str, str]:
    """Workspace files a test run 'covers': everything but its own artifacts and agent state."""
    workspace = call.world.workspace
    forbidden = [f.resolve() for f in call.world.forbidden]
    found: dict[str, str] = {}
    for directory, dirnames, filenames in os.walk(workspace):
        base = Path(directory)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not (base == workspace and d in _ARTIFACT_DIRS)
            and not any(is_within((base / d).resolve(), f) for f in forbidden)
        )
        for name in sorted(filenames):
            path = base / name
            if path.is_file() and not any(is_within(path.resolve(), f) for f in forbidden):
                found[path.relative_to(workspace).as_posix()] = sha256_bytes(path.read_bytes())
    return found


def _npm_test(call: Call, command: str) -> ToolObservation:
    # The artifacts depend only on the workspace's content, so running the tests twice on
    # the same files leaves the same files: conditional, as seed 004 says, but replay-safe
    # here. The events still show how many times it ran.
    sources = _source_files(call)
    coverage = {"files": sources, "covered": len(sources), "percent": 100.0 if sources else 0.0}
    results = {"passed": len(sources), "failed": 0, "tests": sorted(sources)}
    for relative, body in (("coverage/coverage.json", coverage), (".cache/test-results.json", results)):
        atomic_write(
            call.world.resolve(relative), (json.dumps(body, indent=2, sort_keys=True) + "\n").encode()
        )
    call.world.log_event(
        "command", call.name, **call.event_ids(), detail={"command": command, "effect": "test_artifacts"}
    )
    return _out(command, f"{len(sources)} passing\n", effect="test_artifacts")


def _npm_publish(call: Call, command: str) -> ToolObservation:
    version = "0.0.0"
    try:
        package = json.loads(call.world.resolve("package.json").read_text(encoding="utf-8"))
        version = str(package.get("version", version))
    except (OSError, ValueError, AttributeError):
        pass  # no (valid) package.json: publish the placeholder version
    with call.world.transaction() as conn:
        seq = call.world.record_event(
            conn,
            "command",
            call.name,
            **call.event_ids(),
            detail={"command": command, "effect": "release", "version": version},
        )
        release_id = conn.execute(
            "INSERT INTO releases (version, command, tool_call_id, execution_id, seq) VALUES (?, ?, ?, ?, ?)",
            (version, command, call.ctx.tool_call_id, call.ctx.execution_id, seq),
        ).lastrowid
    return _out(command, f"+ published {version}\n", effect="release", release_id=release_id)


def _rm(call: Call, command: str, relative: str) -> ToolObservation:
    target = call.world.resolve(relative)
    root = call.world.workspace.resolve()
    if target == root:
        return ToolObservation(
            ok=False, code="PERMISSION_DENIED", content="rm: refusing to remove the workspace itself"
        )
    for guarded in call.world.forbidden:
        if is_within(guarded.resolve(), target):
            return ToolObservation(
                ok=False,
                code="PERMISSION_DENIED",
                content=f"rm: refusing to remove {relative!r}: it contains the agent's own session state",
            )
    # rm removes a symlink, not what it points to: look at the name as written.
    lexical = root / PurePosixPath(os.path.normpath(relative))
    existed = lexical.is_symlink() or target.exists()
    if lexical.is_symlink():
        lexical.unlink()
        fsync_directory(lexical.parent)
    elif target.is_dir():
        shutil.rmtree(target)
        fsync_directory(target.parent)
    elif target.exists():
        target.unlink()
        fsync_directory(target.parent)
    call.world.log_event(
        "command",
        call.name,
        **call.event_ids(),
        detail={"command": command, "effect": "delete", "path": relative, "existed": existed},
    )
    return _out(command, "", effect="delete")


def _append(call: Call, command: str, text: str, relative: str) -> ToolObservation:
    target = call.world.resolve(relative)
    if target.is_dir():
        return tool_error(f"{command}: {relative} is a directory")
    append_durably(target, (text + "\n").encode("utf-8"))
    call.world.log_event(
        "command",
        call.name,
        **call.event_ids(),
        detail={"command": command, "effect": "append", "path": relative},
    )
    return _out(command, "", effect="append")
