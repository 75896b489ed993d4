"""What the model was told, as a category any agent's Tool Result can be read into.

Agents word their Tool Results their own way: crashmatrix's reference agent and seed 004
write ``{"ok": false, "code": "SIDE_EFFECT_UNCERTAIN", ...}``, seed 000's program writes
``{"status": "unknown", ...}``, another agent writes plain text. Portable evals do not care
about the wording, only about what the model learned:

=============  ==================================================================
category       the model was told
=============  ==================================================================
succeeded      the call ran and did what it was asked
replayed       the stored result of an earlier execution (nothing ran again)
error          it failed, nothing was done (timeout before sending, not found,
               permission denied, invalid arguments)
uncertain      it may or may not have happened (SIDE_EFFECT_UNCERTAIN, manual check)
conflict       it was refused because the world or the saved arguments changed (an
               earlier attempt may have acted)
rejected       the user refused it
=============  ==================================================================

A ``ResultMapping`` reads the category from a Tool Result's content: ordered rules on a JSON
field (equals / in / present) or a regex on the text, then a default. The adapter file says
which mapping its agent needs (``results:``); ``crashmatrix`` (also seed 004's shape) and
``seed000`` are built in, and ``auto`` tries the one the content's shape fits.

Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AUTO",
    "BUILTIN_MAPPINGS",
    "CATEGORIES",
    "CRASHMATRIX",
    "SEED000",
    "SEED004",
    "CategoryRule",
    "ResultMapping",
    "category_of",
    "told_for_code",
]

CATEGORIES = ("succeeded", "replayed", "error", "uncertain", "conflict", "rejected")
_MISSING = object()


@dataclass(frozen=True, slots=True)
class CategoryRule:
    """One test on a Tool Result's content; the first rule that holds gives the category.

    ``field`` (a dotted path into the JSON content) with ``equals``, ``one_of`` or
    ``present``; or ``regex``, searched in the text content."""

    category: str
    field: str = ""
    equals: Any = _MISSING
    one_of: tuple[Any, ...] = ()
    present: bool | None = None
    regex: str = ""

    def holds(self, text: str, parsed: Any) -> bool:
        if self.regex:
            return re.search(self.regex, text) is not None
        value = _lookup(parsed, self.field)
        if self.present is not None:
            return (value is not _MISSING and value is not None) == self.present
        if value is _MISSING:
            return False
        if self.one_of:
            return value in self.one_of
        return self.equals is not _MISSING and value == self.equals


def _lookup(parsed: Any, dotted: str) -> Any:
    value = parsed
    for part in dotted.split(".") if dotted else ():
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        else:
            return _MISSING
    return value


@dataclass(frozen=True, slots=True)
class ResultMapping:
    """How to read the category of one agent's Tool Results."""

    name: str
    rules: tuple[CategoryRule, ...] = ()
    default: str = "error"
    # auto only: (a field that marks the shape, the mapping for that shape), tried in order.
    choices: tuple[tuple[str, ResultMapping], ...] = field(default=())

    def category(self, content: str | None) -> str:
        text = content or ""
        try:
            parsed: Any = json.loads(text)
        except ValueError:
            parsed = None
        if self.choices:
            for marker, choice in self.choices:
                if _lookup(parsed, marker) is not _MISSING:
                    return choice.category(text)
            return self.default
        for rule in self.rules:
            if rule.holds(text, parsed):
                return rule.category
        return self.default


# crashmatrix's own Tool Results, which are seed 004's shape (ok, code, metadata) plus a
# ``recovery`` field that says how a result was obtained.
CRASHMATRIX = ResultMapping(
    "crashmatrix",
    (
        CategoryRule("rejected", "code", "REJECTED"),
        CategoryRule("uncertain", "code", one_of=("SIDE_EFFECT_UNCERTAIN", "MANUAL_CHECK_REQUIRED")),
        CategoryRule("conflict", "code", one_of=("CONFLICT", "ARGUMENTS_MISMATCH")),
        CategoryRule("error", "ok", False),
        CategoryRule("replayed", "recovery", "result_replayed"),
        CategoryRule("succeeded", "ok", True),
    ),
)

# Seed 004's observation shape (ok, code, content, metadata): crashmatrix's without ``recovery``.
SEED004 = ResultMapping("seed004", tuple(r for r in CRASHMATRIX.rules if r.field != "recovery"))

# Seed 000's program: a ``status`` per result (``completed`` for its read-only reads).
SEED000 = ResultMapping(
    "seed000",
    (
        CategoryRule("rejected", "status", "rejected"),
        CategoryRule("uncertain", "status", one_of=("unknown", "uncertain")),
        CategoryRule("conflict", "status", "conflict"),
        CategoryRule("error", "status", one_of=("failed", "error")),
        CategoryRule("succeeded", "status", one_of=("succeeded", "completed", "ok")),
    ),
)

# Whichever of the two a result's shape fits: an ``ok`` field is crashmatrix / seed 004's,
# a ``status`` without ``ok`` is seed 000's.
AUTO = ResultMapping("auto", default="error", choices=(("ok", CRASHMATRIX), ("status", SEED000)))

BUILTIN_MAPPINGS: Mapping[str, ResultMapping] = {
    "crashmatrix": CRASHMATRIX,
    "seed004": SEED004,
    "seed000": SEED000,
    "auto": AUTO,
}


def category_of(content: str | None, mapping: ResultMapping = AUTO) -> str:
    return mapping.category(content)


def told_for_code(code: Any) -> Any:
    """The ``told:`` expectation a ``code:`` expectation implies, for any agent.

    A scenario's ``code`` is crashmatrix's vocabulary (null, SIDE_EFFECT_UNCERTAIN, CONFLICT,
    ...); what it says the model must learn is portable: read through ``CRASHMATRIX``, with
    succeeded and replayed allowed alike (another agent may give a stored result as a plain
    success). ``{in: [...]}`` maps option by option."""
    options = code["in"] if isinstance(code, Mapping) and set(code) == {"in"} else [code]
    told: list[str] = []
    for option in options:
        category = CRASHMATRIX.category(json.dumps({"ok": option is None, "code": option}))
        for allowed in ("succeeded", "replayed") if category == "succeeded" else (category,):
            if allowed not in told:
                told.append(allowed)
    return told[0] if len(told) == 1 else {"in": told}
