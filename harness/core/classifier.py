"""Classify one ``run_command`` call: may recovery run this exact command string again?

Seed 004 ("命令工具最容易骗人"): ``run_command`` is one tool name with many behaviours, so its
idempotency is decided per call, from the command string, before it runs::

    ls src                  idempotent      auto
    npm test                conditional     ask     (may write coverage, cache, snapshots)
    npm install             non_idempotent  never   (side effects)
    npm publish             non_idempotent  never
    rm -rf dist             non_idempotent  never   (destructive)
    prisma migrate deploy   non_idempotent  never
    echo x >> audit.log     non_idempotent  never   (appends a line per run)

The seed sketches this with a prefix regex (``^(pwd|ls|find|rg|cat|sed|wc)\\b``). That is
exactly what must NOT be copied: ``ls; rm -rf x``, ``ls $(npm publish)`` and ``find . -delete``
all start with an allowlisted word. A wrong "auto" re-runs a side effect after a crash; a
wrong "never" only asks a person. So this classifier is built to err one way only:

* A list or pipeline of plain words joined only by ``;``, ``&&``, ``||`` or ``|`` is judged
  part by part: ``auto`` only when every part is, otherwise as its worst part (``ls; rm -rf
  src`` is destructive, ``ls && npm test`` asks). The simulator runs such commands part by
  part, so a wrong verdict shows up as a replayed effect.
* Otherwise the command is refused outright (``non_idempotent`` / ``never``) when it contains
  anything the shell would interpret: other separators, subshells, redirections, substitutions of any kind,
  ``$`` anywhere, globs, quotes and escapes, environment-assignment prefixes, control or
  non-ASCII characters (a Cyrillic ``ѕ`` or a zero-width space can make a different program
  look like ``ls``), a program given by path, or a program not on the allowlist.
* Only then is it split with ``shlex`` and the program and its options examined.

The allowlist (``READ_ONLY_PROGRAMS``) holds programs that only read files and print, and
each one's options that can write or run other programs are refused:

=========  ===================================================================
pwd, ls,   no option writes or executes anything.
cat, wc,
head, grep
tail       ``-f``/``-F``/``--follow`` never terminate, so a replay would hang.
rg         ``--pre``/``--pre-glob`` and ``--hostname-bin`` run a program;
           ``-z``/``--search-zip`` runs decompressors.
find       ``-exec``, ``-execdir``, ``-ok``, ``-okdir`` run programs; ``-delete``
           deletes; ``-fprint*``/``-fls`` write files.
sed        only ``sed -n <print script> FILE...`` (``p``, ``3p``, ``1,5p``): every other
           script may carry ``w``/``e`` commands or ``-i`` edits in place.
=========  ===================================================================

Arguments must be plain literals (letters, digits and ``-_./=,:@+``), so what is written is
what the program receives. Everything else is ``never``; the ``kind`` and ``reason`` only say
which rule decided, for the report and the person asked to check.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "READ_ONLY_PROGRAMS",
    "TEST_RUNNERS",
    "CommandVerdict",
    "classify_command",
]

Idempotency = Literal["idempotent", "conditional", "non_idempotent"]
ReplayPolicy = Literal["auto", "ask", "never"]


@dataclass(frozen=True, slots=True)
class CommandVerdict:
    """How recovery must treat one command string (seed 004's three classes)."""

    idempotency: Idempotency
    replay_policy: ReplayPolicy
    kind: str  # read_only, test, install, publish, destructive, append, compound, ... unknown
    reason: str  # one English sentence naming the rule that decided


READ_ONLY_PROGRAMS = frozenset({"pwd", "ls", "cat", "wc", "head", "tail", "rg", "grep", "find", "sed"})
# Seed 004: ``npm test`` is "theoretically read-only" but test scripts may write coverage,
# caches and snapshots, so it is conditional: ask before replaying.
TEST_RUNNERS = frozenset({"npm", "pnpm", "yarn"})

# Every character of a command that may be auto-replayed. Space is the only separator
# allowed: a tab is harmless to the shell but has no business in a model's ``ls``.
_PLAIN = re.compile(r"[A-Za-z0-9 \-_./=,:@+]*")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_SED_PRINT = re.compile(r"(?:[0-9]+(?:,[0-9]+)?)?p")

# Programs whose effect is known well enough to name; all of them are ``never``.
_DESTRUCTIVE = frozenset({"rm", "rmdir", "unlink", "shred", "truncate", "dd", "mkfs", "wipefs"})
_WRITERS = frozenset({"mv", "cp", "touch", "mkdir", "chmod", "chown", "ln", "tee", "install", "rsync"})
_WRAPPERS = frozenset((
    "sudo", "doas", "su", "env", "xargs", "nohup", "time", "timeout", "nice", "watch", "parallel",
    "bash", "sh", "zsh", "dash", "eval", "exec", "command", "builtin", "source", ".",
))  # fmt: skip
_INSTALLERS = (
    "pip", "pip3", "uv", "poetry", "apt", "apt-get", "brew", "cargo", "go", "gem", "conda", "dnf",
    "yum", "apk",
)  # fmt: skip
_NETWORK = frozenset({"curl", "wget", "ssh", "scp", "nc", "ftp", "http", "gh"})
# (program, subcommand) -> kind. A package manager's install/publish has effects outside the
# workspace (registry, lockfile, node_modules), which is why seed 004 calls them out.
_SUBCOMMANDS: Mapping[tuple[str, str], str] = {
    **{
        (pm, sub): "install"
        for pm in ("npm", "pnpm", "yarn", "bun")
        for sub in ("install", "i", "ci", "add", "update", "upgrade", "up", "uninstall", "remove", "link")
    },
    **{
        (pm, sub): "publish"
        for pm in ("npm", "pnpm", "yarn", "bun")
        for sub in ("publish", "unpublish", "deprecate", "dist-tag")
    },
    **{(pm, "install"): "install" for pm in _INSTALLERS},
    ("cargo", "publish"): "publish",
    ("poetry", "publish"): "publish",
    ("gem", "push"): "publish",
    ("twine", "upload"): "publish",
    ("git", "push"): "publish",
    ("git", "clean"): "destructive",
    ("git", "reset"): "destructive",
    ("git", "checkout"): "destructive",
    ("git", "restore"): "destructive",
    ("prisma", "migrate"): "migration",
    ("prisma", "db"): "migration",
    ("alembic", "upgrade"): "migration",
    ("alembic", "downgrade"): "migration",
    ("kubectl", "apply"): "deploy",
    ("kubectl", "delete"): "destructive",
    ("terraform", "apply"): "deploy",
    ("terraform", "destroy"): "destructive",
}
_KIND_REASON: Mapping[str, str] = {
    "install": "installs or changes packages, which writes lockfiles, caches and installed files",
    "publish": "publishes to a registry or remote, which cannot be taken back or done twice",
    "destructive": "deletes or overwrites data, which a second run cannot make safe",
    "migration": "applies a database migration, a one-way change of shared state",
    "deploy": "deploys or applies infrastructure, a change of shared state",
    "write": "creates, moves or changes files",
    "wrapper": "runs another command that is not classified here",
    "network": "talks to the network, where a request may have effects elsewhere",
}


def _never(kind: str, reason: str) -> CommandVerdict:
    return CommandVerdict("non_idempotent", "never", kind, reason)


def classify_command(command: str) -> CommandVerdict:
    """Classify one command string; never raises, and only allowlisted plain reads are auto.

    The checks run from the coarsest to the finest on purpose: the character-level refusals
    come before ``shlex``, so no tokenizer subtlety (a quoted ``;``, an escaped newline) can
    ever turn a hostile string into an allowlisted one.
    """
    value: object = command  # callers pass JSON values through; a number is not a command
    if not isinstance(value, str):
        return _never("unknown", f"the command is a {type(value).__name__}, not a string.")
    if not command.strip():
        return _never("empty", "the command is empty, so there is nothing known to replay.")
    for index, char in enumerate(command):
        if ord(char) > 0x7E:
            return _never(
                "unknown",
                f"the command contains the non-ASCII character U+{ord(char):04X} at index {index}, "
                "which can disguise one program as another.",
            )
    if "\n" in command or "\r" in command:
        return _never("compound", "the command contains a line break, so the shell runs several commands.")
    for index, char in enumerate(command):
        if ord(char) < 0x20 or ord(char) == 0x7F:
            return _never(
                "unknown", f"the command contains the control character 0x{ord(char):02X} at index {index}."
            )
    if "`" in command or "$" in command:
        # Even inside single quotes: refusing a literal '$' costs one question to a person.
        return _never(
            "substitution",
            "the command uses '$' or a backtick, so what runs depends on a variable or another command.",
        )
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError as error:  # unbalanced quotes, trailing backslash
        return _never("unknown", f"the command cannot be parsed as shell words ({error}).")
    compound = _compound_verdict(command, tokens)
    if compound is not None:
        return compound
    operator = _operator_verdict(tokens)
    if operator is not None:
        return operator
    if not tokens:
        return _never("empty", "the command has no words, so there is nothing known to replay.")
    return _simple_command(command, tokens)


# The separators a compound command may use and still be replayed: each runs whole commands
# one after another (or feeds one's output to the next) and adds no effect of its own.
_SEPARATORS = frozenset({";", "&&", "||", "|"})
_PLAIN_COMPOUND = re.compile(r"[A-Za-z0-9 \-_./=,:@+;|&]*")


def _compound_verdict(command: str, tokens: Sequence[str]) -> CommandVerdict | None:
    """A list or pipeline of plain simple commands, judged by its worst part.

    Seed 004's prefix regex calls ``ls; rm -rf src`` read-only because it starts with
    ``ls``; here every part is classified on its own: the whole is ``auto`` only when every
    part is, ``ask`` when the worst part asks, and ``never`` (with that part's kind, a
    destructive part first) when any part is never. Only plain words and the separators
    ``;``, ``&&``, ``||``, ``|`` get here; subshells, redirections, ``&`` and anything quoted
    fall through to the refusals of ``_operator_verdict`` and ``_simple_command``.
    """
    if not any(t in _SEPARATORS for t in tokens) or _PLAIN_COMPOUND.fullmatch(command) is None:
        return None
    if any(t and all(c in ";|&" for c in t) and t not in _SEPARATORS for t in tokens):
        return None  # '&', ';;', '|&', '&&&': the operator refusal names it
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token in _SEPARATORS:
            parts.append([])
        else:
            parts[-1].append(token)
    if any(not part for part in parts):
        return _never("compound", "the command has an empty part between its separators.")
    verdicts = [(" ".join(part), _simple_command(" ".join(part), part)) for part in parts]
    never = [(text, v) for text, v in verdicts if v.replay_policy == "never"]
    if never:
        text, worst = next(((t, v) for t, v in never if v.kind == "destructive"), never[0])
        return _never(worst.kind, f"its part {text!r} decides for the whole compound command: {worst.reason}")
    ask = [(text, v) for text, v in verdicts if v.replay_policy == "ask"]
    if ask:
        text, worst = ask[0]
        return dataclasses.replace(
            worst, reason=f"its part {text!r} decides for the whole command: {worst.reason}"
        )
    return CommandVerdict(
        "idempotent",
        "auto",
        "read_only",
        f"every part of the compound command ({', '.join(repr(t) for t, _ in verdicts)}) only reads files "
        "and prints, and its separators add no effect.",
    )


def _operator_verdict(tokens: Sequence[str]) -> CommandVerdict | None:
    """Shell operators found by ``shlex`` (``punctuation_chars`` groups ``();<>|&``).

    shlex cannot tell a quoted ``";"`` from a bare one; both are refused here, which is the
    safe side of that ambiguity.
    """
    found: list[str] = [t for t in tokens if t and all(c in "();<>|&" for c in t)]
    if not found:
        return None
    if any("<(" in op or ">(" in op for op in found):
        return _never("substitution", "the command uses process substitution, which runs another command.")
    separators = [op for op in found if any(c in op for c in ";|&()") and not _is_redirect(op)]
    if separators:
        return _never(
            "compound",
            f"the command uses the shell operator {separators[0]!r}, so it runs more than one command "
            "or a subshell.",
        )
    if any(">>" in op for op in found):
        return _never(
            "append",
            "the command appends with '>>', so every run adds to the file again (seed 004: "
            "echo x >> audit.log writes two lines when replayed).",
        )
    if any("<<" in op for op in found):
        return _never("redirect", "the command uses a here-document, whose body is not classified.")
    return _never(
        "redirect",
        f"the command redirects with {found[0]!r}, so it writes or reads a file chosen by the shell.",
    )


# shlex glues adjacent punctuation (``ls>;x`` gives ``>;``), so an operator is a redirection
# only when it is exactly one of these; ``>&``/``&>`` contain '&' and ``>|`` contains '|'
# without being separators.
_REDIRECTS = frozenset({">", ">>", "<", "<<", "<<<", "<>", ">&", "<&", "&>", "&>>", ">|"})


def _is_redirect(op: str) -> bool:
    return op in _REDIRECTS


def _simple_command(command: str, words: Sequence[str]) -> CommandVerdict:
    if _ASSIGNMENT.match(words[0]):
        return _never(
            "unknown",
            f"the command starts with the environment assignment {words[0].split('=', 1)[0]}=..., "
            "which can change what the program does.",
        )
    program = words[0]
    if "/" in program:
        return _never(
            "unknown", f"the program is given by path ({program!r}), so which program runs is unknown."
        )
    plain = _PLAIN.fullmatch(command) is not None
    named = _named_kind(words)
    if named is not None:
        return _never(named, f"{' '.join(words[:3])!r} {_KIND_REASON[named]}.")
    if program in TEST_RUNNERS and _is_test(words):
        if not plain:
            return _never(
                "unknown", "the test command uses quoting or expansion characters, so it is not classified."
            )
        return CommandVerdict(
            "conditional",
            "ask",
            "test",
            "a test run is meant to be read-only but test scripts may write coverage, caches or "
            "snapshots, so replaying it needs a check first.",
        )
    if program not in READ_ONLY_PROGRAMS:
        return _never(
            "unknown", f"{program!r} is not on the read-only allowlist, so its effects are unknown."
        )
    if not plain:
        bad = next(c for c in command if _PLAIN.fullmatch(c) is None)
        return _never(
            "unknown",
            f"the command contains {bad!r} (quoting, escaping, globbing or other shell syntax), so its "
            "arguments may not be the literal words written.",
        )
    refusal = _unsafe_option(program, words[1:])
    if refusal is not None:
        return refusal
    return CommandVerdict(
        "idempotent", "auto", "read_only", f"{program!r} with plain arguments only reads files and prints."
    )


def _named_kind(words: Sequence[str]) -> str | None:
    program = words[0]
    if program in ("npx", "bunx", "pnpx") and len(words) > 1:  # ``npx prisma migrate deploy``
        return _named_kind(words[1:])
    if program in _DESTRUCTIVE:
        return "destructive"
    if program in _WRITERS:
        return "write"
    if program in _WRAPPERS:
        return "wrapper"
    if program in _NETWORK:
        return "network"
    if len(words) > 1:
        kind = _SUBCOMMANDS.get((program, words[1]))
        if kind is not None and kind in _KIND_REASON:
            return kind
    return None


def _is_test(words: Sequence[str]) -> bool:
    rest = list(words[1:])
    if rest[:1] == ["run"]:
        rest = rest[1:]
    return rest[:1] in (["test"], ["t"]) if words[0] == "npm" else rest[:1] == ["test"]


_FIND_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls"})


def _unsafe_option(program: str, args: Sequence[str]) -> CommandVerdict | None:
    """Refuse the options of an allowlisted program that write, execute or never end."""
    if program == "find":
        for arg in args:
            if arg == "-delete":
                return _never("destructive", "'find -delete' deletes the files it finds.")
            if arg in _FIND_ACTIONS:
                return _never("unknown", f"'find {arg}' runs another program on each file it finds.")
            if arg.startswith("-fprint"):
                return _never("write", f"'find {arg}' writes its output to a file.")
    elif program == "sed":
        # Only ``sed -n SCRIPT FILE...`` with a print-only script: ``w`` and ``e`` commands
        # and ``-i`` hide inside scripts and option clusters, so nothing else is accepted.
        files = args[2:]
        if (
            len(args) < 2
            or args[0] != "-n"
            or _SED_PRINT.fullmatch(args[1]) is None
            or any(f.startswith("-") for f in files)
        ):
            if any(a == "-i" or a.startswith("--in-place") or (a.startswith("-") and "i" in a) for a in args):
                return _never("write", "'sed -i' edits files in place.")
            return _never(
                "unknown",
                "sed is only replayed as 'sed -n <print script> FILE...'; this form may write or execute.",
            )
    elif program == "tail":
        for arg in args:
            if (
                arg.startswith("--follow")
                or arg.startswith("--retry")
                or (arg.startswith("-") and not arg.startswith("--") and ("f" in arg or "F" in arg))
            ):
                return _never("unknown", f"'tail {arg}' follows the file forever, so a replay would not end.")
    elif program == "rg":
        for arg in args:
            name = arg.split("=", 1)[0]
            if name in ("--pre", "--pre-glob", "--hostname-bin", "--search-zip") or (
                arg.startswith("-") and not arg.startswith("--") and "z" in arg
            ):
                return _never("unknown", f"'rg {arg}' runs other programs while searching.")
    return None
