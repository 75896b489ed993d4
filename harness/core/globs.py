"""Globs over workspace paths, the way pathlib and shells read them: ``*`` and ``?`` stay
inside one path segment, ``**`` spans any number of segments (none included), ``[...]`` is a
character class (``[!...]`` its complement). ``outbox/*.eml`` is the mails directly in
``outbox``; ``outbox/**/*.eml`` every mail under it. Paths are relative and ``/``-separated.

``fnmatch`` lets ``*`` cross ``/``, so ``*.txt`` also matched ``notes/old/x.txt``: a glob
that watches more than it says. Pure."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

__all__ = ["matches", "matches_any"]


def _segment(text: str) -> str:
    """One segment's pattern as a regular expression (no ``/`` in it)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = text.find("]", i + 2 if text[i + 1 : i + 2] in ("!", "]") else i + 1)
            if end < 0:
                out.append(re.escape(char))  # an unclosed bracket is itself, as in fnmatch
            else:
                body = text[i + 1 : end]
                negated = body.startswith("!")
                body = body[1:] if negated else body
                out.append(("[^/" if negated else "[") + body.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    parts = pattern.strip("/").split("/")
    out = ""
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            # Any number of whole segments: "a/**/b" is a/b, a/x/b, a/x/y/b; "a/**" all under a.
            out += ".*" if last else "(?:[^/]+/)*"
        else:
            out += _segment(part) + ("" if last else "/")
    return re.compile(out + r"\Z", re.DOTALL)


def matches(path: str, pattern: str) -> bool:
    """Whether the relative ``path`` is one ``pattern`` names."""
    return _compiled(pattern).match(path.strip("/")) is not None


def matches_any(path: str, patterns: Iterable[str]) -> bool:
    return any(matches(path, pattern) for pattern in patterns)
