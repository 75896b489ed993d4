"""Load a YAML file so that every problem can be named as ``path:line:col: key: problem``.

PyYAML's safe loader forgets where values came from and silently keeps the last of two
duplicate keys. We compose the node tree ourselves, refuse duplicates, and keep a map from
each value's location (a tuple path such as ``("rules", 2, "reply")``) to its line/column,
so a JSON Schema error or a semantic check can point at the exact spot. We also expand
aliases ourselves, so that one containing itself, an expansion bomb, or nesting deep enough
to exhaust Python's stack is a message rather than a traceback or a hang.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from crashmatrix.harness.core.scenario import Key
from crashmatrix.harness.errors import YamlError
from crashmatrix.harness.input.limits import oversize

__all__ = ["ALIAS_LIMIT", "DEPTH_LIMIT", "Located", "load_schema", "load_yaml", "validate"]


@dataclass(frozen=True, slots=True)
class Located:
    """A parsed YAML document with the position of every key and value."""

    path: Path
    data: Any
    positions: Mapping[Key, tuple[int, int]]  # 1-based (line, col)

    def where(self, key: Key) -> tuple[int, int]:
        """The closest known position for ``key`` (walking up to a parent if needed)."""
        while key and key not in self.positions:
            key = key[:-1]
        return self.positions.get(key, (1, 1))

    def error(self, key: Key, problem: str) -> YamlError:
        line, col = self.where(key)
        return YamlError(self.path, line, col, problem, key=_dotted(key))


def _dotted(key: Key) -> str:
    out = ""
    for part in key:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


# Values that aliases may produce in one file. An alias repeats its anchor's whole value, and
# aliases of aliases multiply: nine lines of nine aliases each make 9**9 (387 million) values,
# enough to hang the harness and exhaust memory ("billion laughs"). A real scenario, contract
# or adapter file has a few hundred values in all, so this leaves room for generous sharing,
# and a file that reaches it is refused in well under a second and about 20 MB.
ALIAS_LIMIT = 100_000

# Levels of nesting (mappings and lists inside each other). Real files nest under ten deep;
# a few hundred would reach Python's recursion limit and end the load with a traceback.
DEPTH_LIMIT = 50
_TOO_DEEP = f"values are nested more than {DEPTH_LIMIT} levels deep; flatten them"


class _Alias(yaml.Node):
    """An alias (``*name``) kept as its own node, so that an error can point at it.

    PyYAML's composer hands back the anchored node itself for an alias, which forgets where
    the alias was written and turns ``&a [*a]`` into a cycle nobody can see coming.
    """

    id = "alias"

    def __init__(self, anchor: str, target: yaml.Node, event: yaml.Event) -> None:
        super().__init__(target.tag, target.value, None, None)
        self.start_mark, self.end_mark = event.start_mark, event.end_mark
        self.anchor = anchor
        self.target = target


class _Loader(yaml.SafeLoader):
    """The safe loader, composing each alias into an ``_Alias`` and refusing deep nesting.

    PyYAML's composer recurses once per level of nesting, so a file of a thousand ``[`` would
    otherwise end in a RecursionError traceback instead of a message.
    """

    def __init__(self, text: str, path: Path) -> None:
        super().__init__(text)
        self.path = path
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in the stubs
        if isinstance(event, yaml.AliasEvent):
            target = super().compose_node(parent, index)  # consumes it; refuses an undefined alias
            assert target is not None
            return _Alias(str(event.anchor), target, event)
        if self.depth >= DEPTH_LIMIT:
            mark = event.start_mark
            line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
            raise YamlError(self.path, line, col, _TOO_DEEP)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


class _Converter:
    """Turns a composed node tree into plain data, recording positions and refusing hazards.

    Aliases are expanded here, so this is where a cycle (an anchor containing its own alias)
    and an expansion bomb are caught, before either can recurse forever or fill memory.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.positions: dict[Key, tuple[int, int]] = {}
        self._open: set[int] = set()  # ids of the nodes being converted right now
        self._expanding: tuple[_Alias, Key] | None = None  # the outermost alias being expanded
        self._expanded = 0  # values produced through aliases so far
        # One safe constructor resolves every scalar (ints, bools, nulls, floats): making one
        # per scalar would cost more than the rest of the load.
        self._constructor = yaml.SafeLoader("")

    def error(self, node: yaml.Node, key: Key, problem: str) -> YamlError:
        line, col = _mark(node)
        return YamlError(self.path, line, col, problem, key=_dotted(key))

    def convert(self, node: yaml.Node, key: Key) -> Any:
        if len(key) >= DEPTH_LIMIT and self._expanding is not None:
            # The composer refused deep nesting as written, so only aliases of aliases get here.
            alias, at = self._expanding
            raise self.error(
                alias,
                at,
                f"alias *{alias.anchor} nests values more than {DEPTH_LIMIT} levels deep; "
                "write the values out or use fewer aliases",
            )
        if isinstance(node, _Alias):
            return self._alias(node, key)
        if self._expanding is not None:
            self._expanded += 1
            if self._expanded > ALIAS_LIMIT:
                alias, at = self._expanding
                raise self.error(
                    alias,
                    at,
                    f"with alias *{alias.anchor}, aliases expand this file past {ALIAS_LIMIT} values; "
                    "write the values out or use fewer aliases",
                )
        self.positions.setdefault(key, _mark(node))
        self._open.add(id(node))
        try:
            return self._value(node, key)
        finally:
            self._open.discard(id(node))

    def _alias(self, alias: _Alias, key: Key) -> Any:
        if id(alias.target) in self._open:
            line = _mark(alias.target)[0]
            raise self.error(
                alias,
                key,
                f"alias *{alias.anchor} is inside the value it names (&{alias.anchor} on line {line}); "
                "write the value out without this alias",
            )
        # The value is used here, so a problem with it as a whole is reported here.
        self.positions.setdefault(key, _mark(alias))
        if self._expanding is not None:
            return self.convert(alias.target, key)
        self._expanding = (alias, key)
        try:
            return self.convert(alias.target, key)
        finally:
            self._expanding = None

    def _value(self, node: yaml.Node, key: Key) -> Any:
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, key)
        if isinstance(node, yaml.SequenceNode):
            return [self.convert(item, (*key, i)) for i, item in enumerate(node.value)]
        return self._scalar(node, key)

    def _mapping(self, node: yaml.MappingNode, key: Key) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            # An alias may stand for a key (``*k: 1``); the key is then its target's text.
            named = key_node.target if isinstance(key_node, _Alias) else key_node
            name = named.value if isinstance(named, yaml.ScalarNode) else None
            if not isinstance(name, str) or named.tag != "tag:yaml.org,2002:str":
                raise self.error(key_node, key, "mapping keys must be plain strings")
            if name in out:
                first = self.positions[(*key, name)][0]
                raise self.error(
                    key_node, (*key, name), f"duplicate key (first set on line {first}); keep one of them"
                )
            self.positions[(*key, name)] = _mark(key_node)
            out[name] = self.convert(value_node, (*key, name))
        return out

    def _scalar(self, node: yaml.Node, key: Key) -> Any:
        try:
            return self._constructor.construct_object(node, deep=True)
        except yaml.MarkedYAMLError as error:  # an unknown tag such as ``!Ref``
            problem = (error.problem or "cannot construct this value").strip()
            raise self.error(node, key, f"{problem}; write a plain value") from error
        except (ValueError, TypeError, OverflowError) as error:  # ``!!int abc``, ``2001-02-30``
            raise self.error(
                node,
                key,
                f"{node.value!r} is not a valid {node.tag.rsplit(':', 1)[-1]} ({error}); "
                "quote it to make it a string",
            ) from error


def load_yaml(path: Path | str, text: str | None = None) -> Located:
    """Parse one YAML document.

    Raises YamlError for syntax errors, duplicate keys, recursive aliases, aliases that expand
    past ``ALIAS_LIMIT`` values and nesting deeper than ``DEPTH_LIMIT`` levels.
    """
    path = Path(path)
    if text is None:
        too_large = oversize(path)
        if too_large is not None:
            raise YamlError(path, 1, 1, too_large)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise YamlError(path, 1, 1, f"file is not UTF-8 text ({error.reason})") from error
        except OSError as error:
            raise YamlError(path, 1, 1, f"cannot read file: {error.strerror}") from error
    try:
        loader = _Loader(text, path)  # inside the try: its reader refuses unprintable characters
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = (error.problem or str(error)).strip()
        raise YamlError(path, line, col, f"YAML syntax error: {problem}") from error
    except yaml.reader.ReaderError as error:
        # Not a MarkedYAMLError: it knows only a character offset, and its str() spans two
        # lines, which would break the one-line ``path:line:col`` promise.
        line = text.count("\n", 0, error.position) + 1
        col = error.position - (text.rfind("\n", 0, error.position) + 1) + 1
        char = f"#x{error.character:04x}" if isinstance(error.character, int) else repr(error.character)
        raise YamlError(path, line, col, f"YAML error: unacceptable character {char}; remove it") from error
    except yaml.YAMLError as error:
        raise YamlError(path, 1, 1, f"YAML error: {' '.join(str(error).split())}") from error
    if node is None:
        raise YamlError(path, 1, 1, "file is empty; write a mapping of keys")
    converter = _Converter(path)
    data = converter.convert(node, ())
    return Located(path, data, converter.positions)


@cache
def load_schema(name: str) -> dict[str, Any]:
    """A JSON Schema shipped in ``harness/input/schemas/``."""
    text = resources.files("crashmatrix.harness.input").joinpath("schemas", name).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _properties(error: jsonschema.ValidationError) -> list[str]:
    schema = error.schema
    return sorted(schema.get("properties", {})) if isinstance(schema, Mapping) else []


def _describe(error: jsonschema.ValidationError) -> str:
    # The stubs type these with an ``Unset`` sentinel; for a raised error they are set.
    value: Any = error.validator_value
    instance: Any = error.instance
    if error.validator == "additionalProperties":
        allowed = _properties(error)
        extra = sorted(set(instance) - set(allowed)) if isinstance(instance, dict) else []
        return f"unknown key {', '.join(map(repr, extra))}; allowed keys: {', '.join(allowed)}"
    if error.validator == "enum":
        return f"{instance!r} is not one of {', '.join(map(repr, value))}"
    if error.validator == "required":
        missing = [key for key in value if key not in instance]
        return f"{missing[0]!r} is required here; add '{missing[0]}:'"
    if error.validator == "type":
        names: list[str] = value if isinstance(value, list) else [value]
        wanted = " or ".join(_TYPE_WORDS.get(name, name) for name in names)
        got = _TYPE_WORDS.get(_json_type(instance), type(instance).__name__)
        return f"expected {wanted}, got {got}" + ("" if instance is None else f" {instance!r}")
    if error.validator == "minItems":
        return f"needs at least {value} item(s), got {len(instance)}"
    if error.validator == "pattern":
        return f"{instance!r} is not allowed here: it must match {value}"
    return error.message


# Words a YAML author knows, for JSON Schema's type names.
_TYPE_WORDS = {
    "object": "a mapping (key: value)",
    "array": "a list",
    "string": "text",
    "boolean": "true or false",
    "integer": "a whole number",
    "number": "a number",
    "null": "nothing (null)",
}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "null" if value is None else type(value).__name__


def validate(doc: Located, schema_name: str) -> None:
    """Validate against a shipped schema; the first (deepest, then earliest) error is raised."""
    schema = load_schema(schema_name)
    validator = jsonschema.Draft202012Validator(schema)
    errors = list(validator.iter_errors(doc.data))
    if not errors:
        return

    def rank(error: jsonschema.ValidationError) -> tuple[int, int, int]:
        line, col = doc.where(tuple(error.absolute_path))
        return (line, -len(error.absolute_path), col)

    best = min((_leaf(e) for e in errors), key=rank)
    key: Key = tuple(best.absolute_path)
    if best.validator == "additionalProperties" and isinstance(best.instance, dict):
        extra = sorted(set(best.instance) - set(_properties(best)))
        if extra:
            key = (*key, extra[0])
    raise doc.error(key, _describe(best))


def _leaf(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """For oneOf/anyOf failures, the most specific sub-error says more than 'is not valid'."""
    while error.context:
        error = max(error.context, key=lambda e: len(e.absolute_path))
    return error
