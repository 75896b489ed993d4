"""Load a YAML file so that every problem can be named as ``path:line:col: key: problem``.

PyYAML's safe loader forgets where values came from and silently keeps the last of two
duplicate keys. We compose the node tree ourselves, refuse duplicates, and keep a map from
each value's location (a tuple path such as ``("rules", 2, "reply")``) to its line/column,
so a JSON Schema error or a semantic check can point at the exact spot.
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

__all__ = ["Located", "load_schema", "load_yaml", "validate"]


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


def _convert(node: yaml.Node, key: Key, positions: dict[Key, tuple[int, int]], path: Path) -> Any:
    positions.setdefault(key, _mark(node))
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            name = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if not isinstance(name, str) or key_node.tag != "tag:yaml.org,2002:str":
                line, col = _mark(key_node)
                raise YamlError(path, line, col, "mapping keys must be plain strings", key=_dotted(key))
            if name in out:
                line, col = _mark(key_node)
                first = positions[(*key, name)][0]
                raise YamlError(
                    path,
                    line,
                    col,
                    f"duplicate key (first set on line {first}); keep one of them",
                    key=_dotted((*key, name)),
                )
            positions[(*key, name)] = _mark(key_node)
            out[name] = _convert(value_node, (*key, name), positions, path)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, (*key, i), positions, path) for i, item in enumerate(node.value)]
    # Scalars: let the safe constructor resolve ints, bools, nulls, floats.
    constructor = yaml.SafeLoader("")
    try:
        return constructor.construct_object(node, deep=True)
    except yaml.MarkedYAMLError as error:  # an unknown tag such as ``!Ref``
        line, col = _mark(node)
        problem = (error.problem or "cannot construct this value").strip()
        raise YamlError(path, line, col, f"{problem}; write a plain value", key=_dotted(key)) from error
    except (ValueError, TypeError, OverflowError) as error:  # ``!!int abc``, ``2001-02-30``
        line, col = _mark(node)
        raise YamlError(
            path,
            line,
            col,
            f"{node.value!r} is not a valid {node.tag.rsplit(':', 1)[-1]} ({error}); "
            "quote it to make it a string",
            key=_dotted(key),
        ) from error


def load_yaml(path: Path | str, text: str | None = None) -> Located:
    """Parse one YAML document. Raises YamlError for syntax errors and duplicate keys."""
    path = Path(path)
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise YamlError(path, 1, 1, f"file is not UTF-8 text ({error.reason})") from error
        except OSError as error:
            raise YamlError(path, 1, 1, f"cannot read file: {error.strerror}") from error
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
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
    positions: dict[Key, tuple[int, int]] = {}
    data = _convert(node, (), positions, path)
    return Located(path, data, positions)


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
