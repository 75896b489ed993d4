"""A scenario file is parsed once per process while neither it nor a contract of its
directories changes (``harness.input.scenario._LOADED``); any change is read again, and a
broken file fails every time it is loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.errors import YamlError
from crashmatrix.harness.input.scenario import load_scenario

from ...scenario_data import TICKET_SCENARIO, email_once

TICKET = (
    "name: create_ticket\nidempotency: non_idempotent\n"
    "parameters: {type: object, required: [title], properties: {title: {type: string}}}\n"
    "mock: {kind: record_row, table: tickets}\n"
)


def test_an_unchanged_file_is_loaded_once_and_a_changed_one_again(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(email_once(), encoding="utf-8")
    first = load_scenario(path)
    assert load_scenario(path) is first
    path.write_text(email_once().replace("name: ", "name: renamed_", 1), encoding="utf-8")
    again = load_scenario(path)
    assert again is not first and again.name.startswith("renamed_")


def test_the_same_file_named_another_way_keeps_the_name_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "s.yaml").write_text(email_once(), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    relative, absolute = load_scenario("s.yaml"), load_scenario(tmp_path / "s.yaml")
    assert (relative.path, absolute.path) == (Path("s.yaml"), tmp_path / "s.yaml")


def test_a_changed_contract_of_its_directory_is_read_again(tmp_path: Path) -> None:
    (tmp_path / "contracts").mkdir()
    contract = tmp_path / "contracts" / "create_ticket.yaml"
    contract.write_text(TICKET, encoding="utf-8")
    (tmp_path / "s.yaml").write_text(TICKET_SCENARIO, encoding="utf-8")
    first = load_scenario(tmp_path / "s.yaml")
    assert first.contracts["create_ticket"].idempotency == "non_idempotent"
    contract.write_text(TICKET.replace("non_idempotent", "idempotent"), encoding="utf-8")
    assert load_scenario(tmp_path / "s.yaml").contracts["create_ticket"].idempotency == "idempotent"
    # A second file for the same tool is an error a fresh load reports: so does a cached one.
    (tmp_path / "contracts" / "again.yaml").write_text(TICKET, encoding="utf-8")
    with pytest.raises(YamlError, match="already defined"):
        load_scenario(tmp_path / "s.yaml")


def test_a_broken_file_fails_each_time_it_is_loaded(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(email_once() + "turns: [again]\n", encoding="utf-8")  # a duplicate key
    for _ in range(2):
        with pytest.raises(YamlError, match="duplicate"):
            load_scenario(path)
