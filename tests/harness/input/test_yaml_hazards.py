"""harness.input.yamlfile: aliases that never end or multiply without bound are one-line errors.

A recursive alias (``&a [*a]``) used to end in a RecursionError traceback, and nine lines of
nine aliases each ("billion laughs") ran for minutes and past a GiB. Both now stop with a
``path:line:col: key: problem`` message; plain shared values keep loading.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from crashmatrix.harness.errors import InputError, YamlError
from crashmatrix.harness.front.cli import main
from crashmatrix.harness.input.yamlfile import ALIAS_LIMIT, DEPTH_LIMIT, load_yaml

BROKEN = Path(__file__).parents[1] / "data" / "broken"

# The expansion from the issue: nine levels of nine aliases, 9**9 values if expanded.
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{before}'] * 9)}]\n" for before, name in pairwise("abcdefghi")
)


def error_of(text: str, path: Path = Path("hazard.yaml")) -> YamlError:
    with pytest.raises(YamlError) as caught:
        load_yaml(path, text)
    error = caught.value
    assert "\n" not in str(error)
    assert isinstance(error, InputError)
    return error


def test_a_recursive_alias_names_the_alias_and_its_anchor() -> None:
    error = error_of("a: &a [*a]\n")
    assert str(error) == (
        "hazard.yaml:1:8: a[0]: alias *a is inside the value it names (&a on line 1); "
        "write the value out without this alias"
    )


def test_a_mapping_that_contains_itself_further_down_is_a_recursive_alias() -> None:
    error = error_of("x:\n  m: &m {k: [1, *m]}\n")
    assert (error.line, error.col, error.key) == (2, 17, "x.m.k[1]")
    assert error.problem.startswith("alias *m is inside the value it names (&m on line 2)")


def test_an_anchor_on_the_whole_document_that_refers_to_itself_is_a_recursive_alias() -> None:
    error = error_of("&root {a: *root}\n")
    assert (error.line, error.col, error.key) == (1, 11, "a")


def test_the_nine_level_alias_bomb_is_refused_at_the_alias_that_crosses_the_limit() -> None:
    assert BOMB.count("\n") == 9
    error = error_of(BOMB)
    assert str(error) == (
        f"hazard.yaml:6:8: f[0]: with alias *e, aliases expand this file past {ALIAS_LIMIT} values; "
        "write the values out or use fewer aliases"
    )


def test_aliases_may_expand_to_exactly_the_limit_and_not_one_value_more() -> None:
    # Each ``*a`` expands to the list and its 999 items: 1000 values, so 100 aliases fill the limit.
    shared = "a: &a [" + ", ".join(["0"] * 999) + "]\n"
    uses = ALIAS_LIMIT // 1000
    assert uses * 1000 == ALIAS_LIMIT
    at_limit = shared + "".join(f"u{n}: *a\n" for n in range(uses))
    assert len(load_yaml(Path("ok.yaml"), at_limit).data) == uses + 1
    error = error_of(at_limit + "last: [*a]\n")
    assert (error.line, error.col, error.key) == (uses + 2, 8, "last[0]")
    assert error.problem.startswith("with alias *a, aliases expand this file past")


def test_a_shared_mapping_reused_by_aliases_loads_with_equal_values() -> None:
    text = (
        "defaults: &defaults {to: a@example.com, subject: s, attempts: [1, 2.5, true, null]}\n"
        "first: *defaults\n"
        "calls:\n"
        "  - *defaults\n"
        "  - {body: *defaults}\n"
    )
    doc = load_yaml(Path("shared.yaml"), text)
    shared = {"to": "a@example.com", "subject": "s", "attempts": [1, 2.5, True, None]}
    assert doc.data == {"defaults": shared, "first": shared, "calls": [shared, {"body": shared}]}
    # Each use is its own value: changing one does not change the others.
    doc.data["first"]["subject"] = "changed"
    assert doc.data["defaults"]["subject"] == "s"


def test_an_aliased_value_is_placed_where_the_alias_is_and_its_parts_where_they_are_written() -> None:
    doc = load_yaml(Path("shared.yaml"), "a: &a {k: 1}\nlist: [0, *a]\n")
    assert doc.where(("list", 1)) == (2, 11)
    assert doc.where(("list", 1, "k")) == (1, 8)


def test_an_alias_may_stand_for_a_mapping_key() -> None:
    doc = load_yaml(Path("key.yaml"), "&k name: 1\nother: {*k : 2}\n")
    assert doc.data == {"name": 1, "other": {"name": 2}}


def test_an_alias_to_a_list_is_not_a_mapping_key() -> None:
    error = error_of("a: &a [1]\n*a : 2\n")
    assert str(error) == "hazard.yaml:2:1: mapping keys must be plain strings"


def test_values_nested_past_the_depth_limit_are_refused_instead_of_overflowing_the_stack() -> None:
    deep = 2000
    error = error_of("a: " + "[" * deep + "]" * deep + "\n")
    # The top-level mapping is level 1, so the 50th "[" (column 53) would be level 51.
    assert str(error) == "hazard.yaml:1:53: values are nested more than 50 levels deep; flatten them"


def test_values_nested_just_to_the_depth_limit_load() -> None:
    levels = DEPTH_LIMIT - 1  # under the top-level mapping
    doc = load_yaml(Path("deep.yaml"), "a: " + "[" * levels + "]" * levels + "\n")
    value = doc.data["a"]
    for _ in range(levels - 1):
        value = value[0]
    assert value == []


def test_a_chain_of_aliases_that_nests_too_deep_is_refused_at_the_alias() -> None:
    # Each a<n> is a list holding a<n-1>; a48 is the first whose value, under the top-level
    # mapping, would be 51 levels deep (48 lists of lists, a0's list, then its 1).
    assert DEPTH_LIMIT == 50
    chain = "a0: &a0 [1]\n" + "".join(f"a{n}: &a{n} [*a{n - 1}]\n" for n in range(1, 80))
    error = error_of(chain)
    assert str(error) == (
        "hazard.yaml:49:12: a48[0]: alias *a47 nests values more than 50 levels deep; "
        "write the values out or use fewer aliases"
    )


def test_validate_refuses_the_alias_bomb_with_one_line_and_exit_status_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = BROKEN / "s32_alias_bomb.yaml"
    assert main(["validate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        f"{path}:13:8: f[0]: with alias *e, aliases expand this file past {ALIAS_LIMIT} values; "
        "write the values out or use fewer aliases"
    ]
    assert err == ""


def test_a_command_that_loads_a_recursive_alias_prints_one_line_on_stderr_and_exits_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = BROKEN / "s31_recursive_alias.yaml"
    assert main(["points", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith(
        f"crashmatrix: {path}:9:84: model[0].reply.tool_calls[0].arguments.cc[0]: alias *args "
    )
