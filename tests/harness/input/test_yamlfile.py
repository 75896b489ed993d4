"""harness.input.yamlfile: every YAML problem is one line, ``path:line:col: key: problem``."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.errors import InputError, YamlError
from crashmatrix.harness.input.contract_files import load_contract
from crashmatrix.harness.input.yamlfile import load_yaml


def write(tmp_path: Path, text: str | bytes, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path) -> YamlError:
    with pytest.raises(YamlError) as caught:
        load_contract(path)
    error = caught.value
    assert "\n" not in str(error)
    assert isinstance(error, InputError) and isinstance(error, ValueError)
    return error


def test_positions_of_keys_and_items_are_one_based(tmp_path: Path) -> None:
    doc = load_yaml(write(tmp_path, "name: x\nrules:\n  - a: 1\n  - b: 2\n"))
    assert doc.data == {"name": "x", "rules": [{"a": 1}, {"b": 2}]}
    assert doc.where(("name",)) == (1, 1)
    assert doc.where(("rules", 1, "b")) == (4, 5)
    assert doc.where(("rules", 1, "missing")) == (4, 5)  # falls back to the parent


def test_a_duplicate_key_names_the_second_line_and_the_first(tmp_path: Path) -> None:
    path = write(tmp_path, "name: a\nidempotency: idempotent\nname: b\n")
    with pytest.raises(YamlError) as caught:
        load_yaml(path)
    error = caught.value
    assert (error.line, error.col, error.key) == (3, 1, "name")
    assert "first set on line 1" in error.problem
    assert str(error) == f"{path}:3:1: name: duplicate key (first set on line 1); keep one of them"


def test_a_nested_duplicate_key_gets_a_dotted_key(tmp_path: Path) -> None:
    path = write(tmp_path, "mock:\n  kind: read_only\n  kind: record_row\n")
    with pytest.raises(YamlError, match=r":3:3: mock\.kind: duplicate key \(first set on line 2\)"):
        load_yaml(path)


def test_a_syntax_error_reports_its_position(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nidempotency: [idempotent\n")
    error = error_of(path)
    assert error.line == 3
    assert error.problem.startswith("YAML syntax error:")
    assert str(error).startswith(f"{path}:3:")


def test_a_tab_indent_error_points_at_the_tab(tmp_path: Path) -> None:
    error = error_of(write(tmp_path, "name: x\n\tidempotency: idempotent\n"))
    assert (error.line, error.col) == (2, 1)


def test_an_empty_file_says_what_to_write(tmp_path: Path) -> None:
    error = error_of(write(tmp_path, ""))
    assert (error.line, error.col) == (1, 1)
    assert "file is empty" in error.problem


def test_a_comment_only_file_is_empty(tmp_path: Path) -> None:
    assert "file is empty" in error_of(write(tmp_path, "# nothing\n")).problem


def test_a_non_utf8_file_is_refused_at_line_one(tmp_path: Path) -> None:
    error = error_of(write(tmp_path, b"name: caf\xe9\n"))
    assert "not UTF-8" in error.problem


def test_a_missing_file_is_a_yaml_error(tmp_path: Path) -> None:
    assert "cannot read file" in error_of(tmp_path / "absent.yaml").problem


def test_a_control_character_is_reported_on_one_line_with_its_position(tmp_path: Path) -> None:
    error = error_of(write(tmp_path, "name: x\nidempotency: idem\x07potent\n"))
    assert (error.line, error.col) == (2, 18)
    assert "#x0007" in error.problem


def test_an_unknown_tag_is_a_yaml_error_at_the_value(tmp_path: Path) -> None:
    error = error_of(write(tmp_path, "name: !Ref x\nidempotency: idempotent\n"))
    assert (error.line, error.col, error.key) == (1, 7, "name")
    assert "!Ref" in error.problem


@pytest.mark.parametrize("value", ["!!int abc", "2001-02-30"])
def test_a_scalar_that_cannot_be_constructed_is_a_yaml_error(tmp_path: Path, value: str) -> None:
    error = error_of(write(tmp_path, f"name: x\nidempotency: idempotent\ndescription: {value}\n"))
    assert (error.line, error.key) == (3, "description")
    assert "quote it" in error.problem


def test_a_non_string_key_is_refused(tmp_path: Path) -> None:
    error = error_of(write(tmp_path, "name: x\n1: idempotent\n"))
    assert (error.line, error.col) == (2, 1)
    assert "plain strings" in error.problem


# --- schema errors through load_contract --------------------------------------------


def test_an_unknown_key_is_named_with_its_position_and_the_allowed_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nidempotency: idempotent\nreplay: auto\n")
    error = error_of(path)
    assert (error.line, error.col, error.key) == (3, 1, "replay")
    assert "unknown key 'replay'" in error.problem
    assert "replay_policy" in error.problem  # the fix is in the list
    assert str(error).startswith(f"{path}:3:1: replay: unknown key")


def test_an_unknown_nested_key_gets_a_dotted_key(tmp_path: Path) -> None:
    error = error_of(
        write(tmp_path, "name: x\nidempotency: idempotent\nmock:\n  kind: read_only\n  tabel: t\n")
    )
    assert (error.line, error.col, error.key) == (5, 3, "mock.tabel")


def test_a_wrong_type_names_expected_and_got(tmp_path: Path) -> None:
    error = error_of(write(tmp_path, "name: x\nidempotency: idempotent\nledger: 'yes'\n"))
    assert (error.line, error.key) == (3, "ledger")
    assert error.problem == "expected true or false, got text 'yes'"


def test_a_value_outside_an_enum_lists_the_choices(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nidempotency: sometimes\n")
    error = error_of(path)
    assert (error.line, error.col, error.key) == (2, 1, "idempotency")
    assert error.problem == "'sometimes' is not one of 'idempotent', 'conditional', 'non_idempotent'"
    assert str(error) == f"{path}:2:1: idempotency: {error.problem}"


def test_a_missing_required_key_is_named(tmp_path: Path) -> None:
    error = error_of(write(tmp_path, "name: x\nreplay_policy: never\n"))
    assert (error.line, error.col) == (1, 1)
    assert error.problem == "'idempotency' is required here; add 'idempotency:'"


def test_a_missing_required_nested_key_points_at_its_parent(tmp_path: Path) -> None:
    error = error_of(write(tmp_path, "name: x\nidempotency: idempotent\nreconcile: {}\n"))
    assert error.key == "reconcile"
    assert error.line == 3
    assert "'lookup_tool' is required here" in error.problem


def test_a_pattern_violation_names_the_key(tmp_path: Path) -> None:
    error = error_of(write(tmp_path, "name: 9lives\nidempotency: idempotent\n"))
    assert error.key == "name"
    assert error.problem == "'9lives' is not allowed here: it must match ^[A-Za-z_][A-Za-z0-9_\\-]{0,63}$"


def test_a_document_that_is_not_a_mapping_is_refused(tmp_path: Path) -> None:
    error = error_of(write(tmp_path, "- name: x\n"))
    assert error.problem.startswith("expected a mapping (key: value), got a list")


def test_the_earliest_error_in_the_file_is_reported_first(tmp_path: Path) -> None:
    error = error_of(write(tmp_path, "name: x\nidempotency: bad\napproval: maybe\n"))
    assert error.key == "idempotency"
