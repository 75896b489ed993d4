"""``run_command``: a deterministic shell SIMULATOR over the workspace (no real shell).

Seed 004's point is that one tool name hides many behaviours, so the simulator implements
one command of each class and nothing else::

    pwd | ls [PATH...] | cat [FILE...]   read-only
    echo WORDS | wc -l [FILE]            read-only (print)
    npm test                             conditional: writes coverage/ and .cache/ artifacts
    npm publish                          non-idempotent: one more row in ``releases``
    rm -rf PATH...                       destructive
    CMD >> FILE / CMD > FILE             non-idempotent: one more line (seed 000's audit.log)
                                         / the file rewritten

and the compound forms a model writes (seed 004's trap: ``ls; rm -rf src`` starts with a
read-only word): ``;``, ``&&``, ``||`` driven by exit statuses, pipelines (stdout becomes the
next command's stdin), subshells ``( ... )``, ``$( ... )``, ``<`` redirections and ``*``/``?``
globs over the workspace (``mock_tools/shell_syntax.py`` parses them). Every simple command
inside records its own effect in the world exactly as it does alone, so a compound command
replayed by mistake shows up as a second effect. Before each effect but the first, the
call's ``ToolContext.step`` runs: a crash there leaves k of the command's effects done
(``echo a >> log && echo b >> log`` with one line appended), the state a real shell killed
between its sub-commands leaves.

Anything else is refused with TOOL_ERROR naming the unsupported part, not approximated: a
simulator that guesses would make a crash test prove nothing. All paths go through the
sandbox; the literal ones are checked before anything runs (``ls; cat ../x`` runs nothing),
paths only known while running (``$(echo ..)/x``, a glob) when they are reached.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from crashmatrix.harness.core.tools import ToolObservation
from crashmatrix.harness.errors import SandboxViolation
from crashmatrix.harness.session_file import fsync_directory
from crashmatrix.mock_tools.calls import Call, invalid, refused, tool_error
from crashmatrix.mock_tools.fileops import append_durably, atomic_write, sha256_bytes
from crashmatrix.mock_tools.sandbox import is_within
from crashmatrix.mock_tools.shell_syntax import (
    Lit,
    Node,
    Pipeline,
    Sequence,
    ShellSyntaxError,
    Simple,
    Subshell,
    Subst,
    Unsupported,
    Word,
    parse,
    simple_commands,
)

__all__ = ["READ_ONLY_KINDS", "command_kind", "run_command"]

# Kinds whose run changes nothing in the world (an unsupported or unparseable command runs
# nothing at all). The toolbox asks this to tell a lost response of ``npm publish``
# (uncertain) from one of ``ls`` (a plain timeout).
READ_ONLY_KINDS = frozenset(
    {"pwd", "ls", "cat", "echo", "wc", "read_only_compound", "unsupported", "unparseable"}
)
_ARTIFACT_DIRS = ("coverage", ".cache")
VIRTUAL_CWD = "/workspace"  # what ``pwd`` prints: the same in every case directory


def _kind_of(simple: Simple) -> str:
    """The kind of one simple command by its literal words (``unsupported`` when unknown)."""
    if any(r.op in (">", ">>") for r in simple.redirects):
        return "append" if any(r.op == ">>" for r in simple.redirects) else "write"
    name = simple.words[0].literal
    second = simple.words[1].literal if len(simple.words) > 1 else None
    if name in ("pwd", "ls", "cat", "echo", "wc"):
        return name
    if name == "npm" and len(simple.words) == 2 and second in ("test", "publish"):
        return "npm_test" if second == "test" else "npm_publish"
    if name == "rm":
        return "rm"
    return "unsupported"


def command_kind(command: str) -> str:
    """Which simulated command this is; a compound one is ``read_only_compound`` when no
    part of it changes the world and ``compound`` otherwise (``unsupported`` /
    ``unparseable`` when it would not run)."""
    try:
        node = parse(command)
        _check_static(node, None)
    except ShellSyntaxError:
        return "unparseable"
    except (Unsupported, SandboxViolation):
        return "unsupported"
    if isinstance(node, Simple):
        kind = _kind_of(node)
        return "rm" if kind == "rm" else kind
    kinds = {_kind_of(s) for s in simple_commands(node)}
    return "read_only_compound" if kinds <= READ_ONLY_KINDS else "compound"


# ---------------------------------------------------------------- checking before running


def _check_static(node: Node, call: Call | None) -> None:
    """Refuse (Unsupported / SandboxViolation) anything knowable before the first command
    runs: an unknown program or option, a literal path outside the sandbox."""
    for simple in simple_commands(node):
        name = simple.words[0].literal
        if name is None:
            raise Unsupported(f"a program name given by expansion in {simple.text!r}")
        literal = [w.literal for w in simple.words]
        if all(w is not None for w in literal):
            _check_argv(simple.text, [w for w in literal if w is not None])
        if call is None:
            continue
        paths = (
            [] if name in ("echo", "npm") else [w for w in simple.words[1:] if w.literal not in ("-l", "-rf")]
        )
        for word in paths + [r.target for r in simple.redirects]:
            if any(isinstance(p, Subst) for p in word.parts):
                continue  # known only while running
            text = "".join(p.text for p in word.parts if isinstance(p, Lit))
            if word.literal is not None or text.startswith("/") or ".." in text.split("/"):
                call.world.resolve(text)  # a glob is refused here only when it leaves the sandbox


def _check_argv(text: str, argv: list[str]) -> None:
    name, args = argv[0], argv[1:]
    if name == "pwd" and args:
        raise Unsupported(f"'pwd' with arguments in {text!r}")
    if name in ("ls", "cat") and any(a.startswith("-") for a in args):
        raise Unsupported(f"options of {name!r} in {text!r}")
    if name == "echo" and args[:1] and args[0].startswith("-"):
        raise Unsupported(f"options of 'echo' in {text!r}")
    if name == "wc" and (args[:1] != ["-l"] or len(args) > 2):
        raise Unsupported(f"{text!r} (only 'wc -l [FILE]' is simulated)")
    if name == "npm" and args not in (["test"], ["publish"]):
        raise Unsupported(f"{text!r} (only 'npm test' and 'npm publish' are simulated)")
    if name == "rm" and (args[:1] != ["-rf"] or len(args) < 2):
        raise Unsupported(f"{text!r} (only 'rm -rf PATH...' is simulated)")
    if name not in ("pwd", "ls", "cat", "echo", "wc", "npm", "rm"):
        raise Unsupported(f"the program {name!r} in {text!r}")


# ---------------------------------------------------------------- running


@dataclass(slots=True)
class _Result:
    """One command's exit: status, output, and the tool code/message when it failed."""

    status: int = 0
    stdout: str = ""
    code: str | None = None
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class _Runtime:
    def __init__(self, call: Call, command: str) -> None:
        self.call = call
        self.command = command
        self.effects: list[str] = []
        self.stderr: list[str] = []

        # The world seq of this run's first effect: every later effect's event names it
        # (``part_of``), so the world shows which events are ONE run of the command (the
        # invariant non_idempotent_at_most_once counts runs, not events).
        self.first_seq: int | None = None

    def before_effect(self) -> None:
        """A step boundary between two effects of this command (none before the first:
        nothing is done yet, which is the call's ``after_running`` state)."""
        if self.effects:
            self.call.ctx.step()

    def detail(self, detail: Mapping[str, Any]) -> dict[str, Any]:
        """An effect event's detail, naming the run's first effect from the second on."""
        return dict(detail) if self.first_seq is None else {**detail, "part_of": self.first_seq}

    def logged(self, seq: int) -> None:
        if self.first_seq is None:
            self.first_seq = seq

    def run(self, node: Node, stdin: str | None = None) -> _Result:
        if isinstance(node, Simple):
            return self.simple(node, stdin)
        if isinstance(node, Subshell):
            return self.run(node.body, stdin)
        if isinstance(node, Pipeline):
            data = stdin
            result = _Result()
            for command in node.commands:
                result = self.run(command, data)
                data = result.stdout
            return result
        assert isinstance(node, Sequence)
        # Every command of a list writes to the same stdout; the last one run sets the status.
        result = self.run(node.first, stdin)
        stdout = [result.stdout]
        for connector, item in node.rest:
            if connector == "&&" and result.status != 0:
                continue
            if connector == "||" and result.status == 0:
                continue
            result = self.run(item, stdin)
            stdout.append(result.stdout)
        return _Result(result.status, "".join(stdout), result.code, result.message, result.extra)

    def simple(self, simple: Simple, stdin: str | None) -> _Result:
        argv: list[str] = []
        for word in simple.words:
            argv.extend(self.expand(word))
        if not argv:
            raise Unsupported(f"{simple.text!r} expands to no command")
        _check_argv(simple.text, argv)
        for redirect in simple.redirects:
            if redirect.op == "<":
                [source] = self.expand(redirect.target, single=True)
                stdin = _read_text(self.call.world.resolve(source))
        outputs = [r for r in simple.redirects if r.op != "<"]
        if len(outputs) > 1:
            raise Unsupported(f"more than one output redirection in {simple.text!r}")
        target = self.expand(outputs[0].target, single=True)[0] if outputs else None
        if target is not None:
            self.call.world.resolve(target)  # refuse before the command runs
        result = _COMMANDS[argv[0]](self, simple.text, argv, stdin)
        if result.status != 0:
            self.stderr.append(result.message)
        if target is not None and result.status == 0:
            result = _redirect(self, simple.text, outputs[0].op, target, result)
        return result

    def expand(self, word: Word, *, single: bool = False) -> list[str]:
        """Command substitution, field splitting of its output, then globbing."""
        fields: list[list[tuple[str, bool]]] = [[]]  # segments: (text, may glob)
        for part in word.parts:
            if isinstance(part, Lit):
                fields[-1].append((part.text, not part.quoted))
                continue
            text = self.run(part.body).stdout.rstrip("\n")  # as the shell strips them
            pieces = text.split()
            if not pieces:
                continue
            if text[:1].isspace() and fields[-1]:
                fields.append([])
            for index, piece in enumerate(pieces):
                if index:
                    fields.append([])
                fields[-1].append((piece, True))
            if text[-1:].isspace():
                fields.append([])
        out: list[str] = []
        for segments in fields:
            if segments:
                out.extend(self.glob(segments))
        if single and len(out) != 1:
            raise Unsupported(f"a redirection target that expands to {len(out)} words")
        return out

    def glob(self, segments: list[tuple[str, bool]]) -> list[str]:
        text = "".join(t for t, _ in segments)
        if not any(active and ("*" in t or "?" in t) for t, active in segments):
            return [text]
        if text.startswith("/") or ".." in text.split("/"):
            self.call.world.resolve(text)  # raises: absolute or '..'
        components: list[str] = [""]  # one regex per path component
        for piece, active in segments:
            for index, chunk in enumerate(piece.split("/")):
                if index:
                    components.append("")
                components[-1] += _glob_regex(chunk) if active else re.escape(chunk)
        matches = [""]
        for regex, literal in zip(components, text.split("/"), strict=True):
            compiled = re.compile(regex, re.DOTALL)
            following: list[str] = []
            for prefix in matches:
                directory = self.call.world.workspace / prefix if prefix else self.call.world.workspace
                if not directory.is_dir():
                    continue
                for name in sorted(os.listdir(directory)):
                    if name.startswith(".") and not literal.startswith("."):
                        continue
                    path = directory / name
                    if any(is_within(path.resolve(), f.resolve()) for f in self.call.world.forbidden):
                        continue
                    if compiled.fullmatch(name):
                        following.append(f"{prefix}/{name}" if prefix else name)
            matches = following
        return sorted(matches) or [text]  # no match: the pattern stays as written (bash)


def _glob_regex(text: str) -> str:
    return "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in text)


def _read_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def _redirect(rt: _Runtime, text: str, op: str, relative: str, result: _Result) -> _Result:
    target = rt.call.world.resolve(relative)
    if target.is_dir():
        return _Result(1, "", "TOOL_ERROR", f"{text}: {relative} is a directory")
    data = result.stdout.encode("utf-8")
    effect = "append" if op == ">>" else "write"
    rt.before_effect()
    if op == ">>":
        append_durably(target, data)
    else:
        atomic_write(target, data)
    rt.effects.append(effect)
    seq = rt.call.world.log_event(
        "command",
        rt.call.name,
        **rt.call.event_ids(),
        detail=rt.detail({"command": text, "effect": effect, "path": relative}),
    )
    rt.logged(seq)
    return _Result(0, "", extra={"effect": effect})


def run_command(call: Call) -> ToolObservation:
    command = str(call.arguments["command"])
    try:
        node = parse(command)
        _check_static(node, call)
    except ShellSyntaxError as error:
        return invalid(f"run_command: cannot parse {command!r} ({error})")
    except Unsupported as error:
        return tool_error(f"command not supported by the simulator: {command!r}: {error}")
    except SandboxViolation as error:
        return refused(error)
    runtime = _Runtime(call, command)
    try:
        result = runtime.run(node)
    except Unsupported as error:
        return _partial(
            runtime, "TOOL_ERROR", f"command not supported by the simulator: {command!r}: {error}"
        )
    except SandboxViolation as error:
        return _partial(runtime, "PERMISSION_DENIED", str(error))
    except OSError as error:
        return ToolObservation(
            ok=False, code="TOOL_ERROR", content=f"{command}: {error.strerror}", data={"exit_code": 1}
        )
    if isinstance(node, Simple):  # exactly what the single command has always returned
        if result.status == 0:
            return _out(command, result.stdout, **result.extra)
        return ToolObservation(
            ok=False, code=result.code, content=result.message, data={"exit_code": result.status}
        )
    data = {
        "command": command,
        "exit_code": result.status,
        "stdout": result.stdout,
        "effects": runtime.effects,
        **({"stderr": "\n".join(runtime.stderr)} if runtime.stderr else {}),
    }
    if result.status == 0:
        return ToolObservation(ok=True, data=data)
    return ToolObservation(ok=False, code=result.code or "TOOL_ERROR", content=result.message, data=data)


def _partial(runtime: _Runtime, code: str, message: str) -> ToolObservation:
    """Refused while running (a path only known after an expansion): what already ran stays
    done and recorded, and the result says so."""
    done = ", ".join(runtime.effects) or "no effect"
    return ToolObservation(
        ok=False,
        code=code,
        content=f"{message}; stopped there (already done: {done})",
        data={"command": runtime.command, "effects": runtime.effects},
    )


def _out(command: str, stdout: str, **extra: object) -> ToolObservation:
    return ToolObservation(ok=True, data={"command": command, "exit_code": 0, "stdout": stdout, **extra})


# ---------------------------------------------------------------- the commands


def _pwd(rt: _Runtime, text: str, argv: list[str], stdin: str | None) -> _Result:
    return _Result(0, VIRTUAL_CWD + "\n")


def _echo(rt: _Runtime, text: str, argv: list[str], stdin: str | None) -> _Result:
    return _Result(0, " ".join(argv[1:]) + "\n")


def _ls(rt: _Runtime, text: str, argv: list[str], stdin: str | None) -> _Result:
    targets = argv[1:] or ["."]
    chunks: list[str] = []
    for relative in targets:
        target = rt.call.world.resolve(relative)
        if not target.exists():
            return _Result(2, "".join(chunks), "NOT_FOUND", f"ls: {relative}: No such file or directory")
        forbidden = [f.resolve() for f in rt.call.world.forbidden]
        if target.is_dir():
            names = sorted(
                n for n in os.listdir(target) if not any(is_within(target / n, f) for f in forbidden)
            )
            listing = "".join(f"{name}\n" for name in names)
            chunks.append(f"{relative}:\n{listing}" if len(targets) > 1 else listing)
        else:
            chunks.append(f"{relative}\n")
    return _Result(0, "".join(chunks))


def _cat(rt: _Runtime, text: str, argv: list[str], stdin: str | None) -> _Result:
    if len(argv) == 1:
        return _Result(0, stdin or "")
    out: list[str] = []
    for relative in argv[1:]:
        try:
            out.append(_read_text(rt.call.world.resolve(relative)))
        except FileNotFoundError:
            return _Result(1, "".join(out), "NOT_FOUND", f"cat: {relative}: No such file or directory")
    return _Result(0, "".join(out))


def _wc(rt: _Runtime, text: str, argv: list[str], stdin: str | None) -> _Result:
    if len(argv) == 2:
        return _Result(0, f"{(stdin or '').count(chr(10))}\n")
    relative = argv[2]
    try:
        body = _read_text(rt.call.world.resolve(relative))
    except FileNotFoundError:
        return _Result(1, "", "NOT_FOUND", f"wc: {relative}: No such file or directory")
    return _Result(0, f"{body.count(chr(10))} {relative}\n")


def _npm(rt: _Runtime, text: str, argv: list[str], stdin: str | None) -> _Result:
    rt.before_effect()
    observation = (_npm_test if argv[1] == "test" else _npm_publish)(rt, text)
    rt.effects.append(str(observation.data["effect"]))
    extra = {k: v for k, v in observation.data.items() if k not in ("command", "exit_code", "stdout")}
    return _Result(0, str(observation.data["stdout"]), extra=extra)


def _rm_all(rt: _Runtime, text: str, argv: list[str], stdin: str | None) -> _Result:
    for relative in argv[2:]:
        rt.before_effect()
        observation = _rm(rt, text, relative)
        if not observation.ok:
            return _Result(1, "", observation.code, observation.content)
        rt.effects.append("delete")
    return _Result(0, "", extra={"effect": "delete"})


_COMMANDS: Mapping[str, Callable[[_Runtime, str, list[str], str | None], _Result]] = {
    "pwd": _pwd,
    "echo": _echo,
    "ls": _ls,
    "cat": _cat,
    "wc": _wc,
    "npm": _npm,
    "rm": _rm_all,
}


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


def _npm_test(rt: _Runtime, command: str) -> ToolObservation:
    call = rt.call
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
    seq = call.world.log_event(
        "command",
        call.name,
        **call.event_ids(),
        detail=rt.detail({"command": command, "effect": "test_artifacts"}),
    )
    rt.logged(seq)
    return _out(command, f"{len(sources)} passing\n", effect="test_artifacts")


def _npm_publish(rt: _Runtime, command: str) -> ToolObservation:
    call = rt.call
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
            detail=rt.detail({"command": command, "effect": "release", "version": version}),
        )
        release_id = conn.execute(
            "INSERT INTO releases (version, command, tool_call_id, execution_id, seq) VALUES (?, ?, ?, ?, ?)",
            (version, command, call.ctx.tool_call_id, call.ctx.execution_id, seq),
        ).lastrowid
    rt.logged(seq)
    return _out(command, f"+ published {version}\n", effect="release", release_id=release_id)


def _rm(rt: _Runtime, command: str, relative: str) -> ToolObservation:
    call = rt.call
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
    seq = call.world.log_event(
        "command",
        call.name,
        **call.event_ids(),
        detail=rt.detail({"command": command, "effect": "delete", "path": relative, "existed": existed}),
    )
    rt.logged(seq)
    return _out(command, "", effect="delete")
