"""A small shell grammar for the ``run_command`` simulator: parse, never execute.

Seed 004's trap is the compound command: ``ls; rm -rf src`` starts with a read-only word.
The simulator must run such commands for real (in the sandbox) so that a misclassified one
shows up as a replayed effect, and it must refuse what it does not understand rather than
guess. This module turns a command string into a tree of the few constructs it supports::

    list        := pipeline (("; " | "&&" | "||" | newline) pipeline)* [";"]
    pipeline    := command ("|" command)*
    command     := "(" list ")" | simple
    simple      := (word | redirect)+          redirect := (">" | ">>" | "<") word
    word        := literal | 'single' | "double" | \\x | $( list ) | glob chars * ?

Everything else the shell would interpret (variables, backticks, ``&``, here-documents,
file-descriptor redirections, brace/tilde expansion, ``[...]`` globs, comments, ``!``) raises
:class:`Unsupported` naming the construct; unbalanced quotes or parentheses raise
:class:`ShellSyntaxError`. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Connector",
    "Lit",
    "Node",
    "Pipeline",
    "Redirect",
    "Sequence",
    "ShellSyntaxError",
    "Simple",
    "Subshell",
    "Subst",
    "Unsupported",
    "Word",
    "parse",
    "simple_commands",
]


class ShellSyntaxError(ValueError):
    """The string is not a well-formed command (unbalanced quotes or parentheses)."""


class Unsupported(ValueError):
    """Well-formed shell, but a construct the simulator does not implement."""


@dataclass(frozen=True, slots=True)
class Lit:
    text: str
    quoted: bool  # quoted text is never globbed


@dataclass(frozen=True, slots=True)
class Subst:
    body: Node  # ``$( body )``: its stdout, split on whitespace


Part = Lit | Subst


@dataclass(frozen=True, slots=True)
class Word:
    parts: tuple[Part, ...]

    @property
    def literal(self) -> str | None:
        """The word's text when it needs no expansion (no substitution, no active glob)."""
        if any(
            isinstance(p, Subst) or (not p.quoted and ("*" in p.text or "?" in p.text)) for p in self.parts
        ):
            return None
        return "".join(p.text for p in self.parts if isinstance(p, Lit))


@dataclass(frozen=True, slots=True)
class Redirect:
    op: Literal[">", ">>", "<"]
    target: Word


@dataclass(frozen=True, slots=True)
class Simple:
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...]
    text: str  # the command as written (recorded in the world's events)


@dataclass(frozen=True, slots=True)
class Pipeline:
    commands: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Subshell:
    body: Node


Connector = Literal[";", "&&", "||"]


@dataclass(frozen=True, slots=True)
class Sequence:
    first: Node
    rest: tuple[tuple[Connector, Node], ...]


Node = Simple | Pipeline | Subshell | Sequence

_BREAK = frozenset(" \t\n;&|()<>")
_NEVER_UNQUOTED = {
    "`": "backtick command substitution",
    "{": "brace expansion or grouping '{'",
    "}": "brace grouping '}'",
    "[": "'[...]' glob or test",
    "]": "'[...]' glob or test",
    "!": "history expansion or negation '!'",
}


def parse(command: str) -> Node:
    """The command's syntax tree; raises ShellSyntaxError or Unsupported."""
    parser = _Parser(command)
    node = parser.parse_list(top=True)
    if node is None:
        raise Unsupported("an empty command")
    return node


def simple_commands(node: Node) -> list[Simple]:
    """Every simple command in the tree, substitutions included, in source order."""
    found: list[Simple] = []

    def words(word: Word) -> None:
        for part in word.parts:
            if isinstance(part, Subst):
                walk(part.body)

    def walk(n: Node) -> None:
        if isinstance(n, Simple):
            for w in n.words:
                words(w)
            for r in n.redirects:
                words(r.target)
            found.append(n)
        elif isinstance(n, Pipeline):
            for c in n.commands:
                walk(c)
        elif isinstance(n, Subshell):
            walk(n.body)
        else:
            walk(n.first)
            for _, item in n.rest:
                walk(item)

    walk(node)
    return found


class _Parser:
    def __init__(self, src: str) -> None:
        self.src = src
        self.i = 0

    # -- lexical helpers ----------------------------------------------------------------------
    def peek(self, n: int = 1) -> str:
        return self.src[self.i : self.i + n]

    def skip_blanks(self) -> None:
        while self.peek() in (" ", "\t"):
            self.i += 1

    def operator(self) -> str | None:
        """The operator at the cursor (not consumed), refusing those we do not run."""
        self.skip_blanks()
        two, one = self.peek(2), self.peek()
        for bad in ("<<", "<>", "<(", ">(", ">&", "<&", ">|", "&>", "|&", ";;"):
            if two == bad:
                raise Unsupported(f"the shell operator {bad!r}")
        if two in ("&&", "||", ">>"):
            return two
        if one == "&":
            raise Unsupported("background execution '&'")
        if one and one in ";|()<>\n":
            return one
        return None

    # -- grammar ------------------------------------------------------------------------------
    def parse_list(self, *, top: bool) -> Node | None:
        first = self.parse_pipeline()
        if first is None:
            return None
        rest: list[tuple[Connector, Node]] = []
        while True:
            op = self.operator()
            if op in (";", "\n"):
                self.i += 1
                nxt = self.parse_pipeline()
                if nxt is None:  # a trailing ';' ends the list
                    break
                rest.append((";", nxt))
            elif op in ("&&", "||"):
                self.i += 2
                while self.operator() == "\n":
                    self.i += 1
                nxt = self.parse_pipeline()
                if nxt is None:
                    raise ShellSyntaxError(f"{op!r} at the end of the command has no right-hand side")
                rest.append(("&&" if op == "&&" else "||", nxt))
            else:
                break
        op = self.operator()
        if top and self.i < len(self.src):
            raise ShellSyntaxError(f"unexpected {self.src[self.i]!r} at index {self.i}")
        if not top and op != ")":
            raise ShellSyntaxError("a '(' or '$(' is never closed")
        return first if not rest else Sequence(first, tuple(rest))

    def parse_pipeline(self) -> Node | None:
        first = self.parse_command()
        if first is None:
            return None
        commands = [first]
        while self.operator() == "|":
            self.i += 1
            nxt = self.parse_command()
            if nxt is None:
                raise ShellSyntaxError("'|' has no command after it")
            commands.append(nxt)
        return first if len(commands) == 1 else Pipeline(tuple(commands))

    def parse_command(self) -> Node | None:
        op = self.operator()
        if op == "(":
            self.i += 1
            body = self.parse_list(top=False)
            if body is None:
                raise ShellSyntaxError("an empty subshell '()'")
            self.i += 1  # the ')'
            after = self.operator()
            if after in (">", ">>", "<"):
                raise Unsupported("a redirection of a subshell")
            if after is None and self.i < len(self.src):
                raise ShellSyntaxError(f"unexpected word after ')' at index {self.i}")
            return Subshell(body)
        start = self.i
        words: list[Word] = []
        redirects: list[Redirect] = []
        while True:
            op = self.operator()
            if op in (">", ">>", "<"):
                self.i += len(op)
                self.skip_blanks()
                target = self.parse_word()
                if target is None:
                    raise ShellSyntaxError(f"{op!r} has no file after it")
                redirects.append(Redirect(op, target))  # type: ignore[arg-type]
                continue
            if op is not None:
                break
            if self.i >= len(self.src):
                break
            word_start = self.i
            word = self.parse_word()
            if word is None:
                break
            if self.peek() in ("<", ">") and self.src[word_start : self.i].isdigit():
                raise Unsupported(f"the file-descriptor redirection {self.src[word_start : self.i + 1]!r}")
            words.append(word)
        if not words:
            if redirects:
                raise Unsupported("a redirection without a command")
            return None
        return Simple(tuple(words), tuple(redirects), self.src[start : self.i].strip())

    def parse_word(self) -> Word | None:
        parts: list[Part] = []
        start = self.i
        while self.i < len(self.src):
            c = self.src[self.i]
            if c in _BREAK:
                break
            at_start = self.i == start
            if c == "'":
                end = self.src.find("'", self.i + 1)
                if end < 0:
                    raise ShellSyntaxError("unbalanced single quote")
                parts.append(Lit(self.src[self.i + 1 : end], quoted=True))
                self.i = end + 1
            elif c == '"':
                parts.append(Lit(self.double_quoted(), quoted=True))
            elif c == "\\":
                if self.i + 1 >= len(self.src):
                    raise ShellSyntaxError("a trailing backslash")
                nxt = self.src[self.i + 1]
                if nxt != "\n":  # backslash-newline is a line continuation
                    parts.append(Lit(nxt, quoted=True))
                self.i += 2
            elif c == "$":
                if self.peek(2) != "$(" or self.peek(3) == "$((":
                    raise Unsupported(
                        f"the expansion {self.src[self.i : self.i + 6]!r}... (only $( ... ) is run)"
                    )
                self.i += 2
                body = self.parse_list(top=False)
                if body is None:
                    raise Unsupported("an empty command substitution '$()'")
                self.i += 1  # the ')'
                parts.append(Subst(body))
            elif c in _NEVER_UNQUOTED:
                raise Unsupported(_NEVER_UNQUOTED[c])
            elif at_start and c in "~#":
                raise Unsupported("tilde expansion '~'" if c == "~" else "a comment '#'")
            else:
                parts.append(Lit(c, quoted=False))
                self.i += 1
        if self.i == start:
            return None
        return Word(_merge(parts))

    def double_quoted(self) -> str:
        self.i += 1
        out: list[str] = []
        while self.i < len(self.src):
            c = self.src[self.i]
            if c == '"':
                self.i += 1
                return "".join(out)
            if c in "$`":
                raise Unsupported(f"{c!r} inside double quotes")
            if c == "\\" and self.peek(2)[1:] in ('"', "\\", "$", "`"):
                out.append(self.src[self.i + 1])
                self.i += 2
                continue
            out.append(c)
            self.i += 1
        raise ShellSyntaxError("unbalanced double quote")


def _merge(parts: list[Part]) -> tuple[Part, ...]:
    merged: list[Part] = []
    for part in parts:
        last = merged[-1] if merged else None
        if isinstance(part, Lit) and isinstance(last, Lit) and last.quoted == part.quoted:
            merged[-1] = Lit(last.text + part.text, part.quoted)
        else:
            merged.append(part)
    return tuple(merged)
