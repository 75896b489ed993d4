"""Loading refuses what would make a cell green without testing anything: a tool the mock
tools cannot run, a reconcile lookup that does not exist, and an expected word outside its
vocabulary (the broken corpus pins each message; these tests draw the lines around them)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.core.categories import CATEGORIES
from crashmatrix.harness.core.contracts import (
    BUILTIN_BEHAVIOURS,
    RECOVERY_OUTCOMES,
    MockSpec,
    ToolContract,
)
from crashmatrix.harness.core.ledger import STATUSES
from crashmatrix.harness.core.tools import CODES
from crashmatrix.harness.errors import YamlError
from crashmatrix.harness.input.contract_files import load_contracts
from crashmatrix.harness.input.mcp_import import contract_to_yaml, contracts_from_mcp
from crashmatrix.harness.input.scenario import NO_RESULT, load_scenario
from crashmatrix.mock_tools.registry import catalogue
from crashmatrix.mock_tools.toolbox import BUILTIN_TOOLS
from crashmatrix.reference_agent.recovery import OUTCOMES

from ...scenario_data import TICKET_SCENARIO, email_once

TICKET = (
    "name: create_ticket\nidempotency: non_idempotent\n"
    "parameters: {type: object, required: [title], properties: {title: {type: string}}}\n"
)


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------- the vocabularies agree


def test_the_built_in_behaviours_scenario_loading_knows_are_the_toolboxs_own() -> None:
    assert set(BUILTIN_TOOLS) == BUILTIN_BEHAVIOURS


def test_the_recovery_outcomes_scenarios_are_checked_against_are_the_reference_agents() -> None:
    # One tuple, not two kept equal: the agent exports the core's (a copy would drift).
    assert OUTCOMES is RECOVERY_OUTCOMES


def test_every_built_in_contract_can_run() -> None:
    assert [name for name, contract in catalogue().items() if not contract.has_mock_behaviour] == []


@pytest.mark.parametrize(
    ("contract", "runs"),
    [
        (ToolContract("send_email"), True),  # built in, by name
        (ToolContract("create_ticket"), False),
        (ToolContract("create_ticket", mock=MockSpec(kind="read_only")), True),
    ],
)
def test_a_contract_runs_if_it_is_built_in_or_declares_a_mock(contract: ToolContract, runs: bool) -> None:
    assert contract.has_mock_behaviour is runs


# ------------------------------------------------------------- a tool nothing can run


def test_a_scenario_whose_tool_has_no_mock_is_refused_at_its_tools_entry(tmp_path: Path) -> None:
    contract = write(tmp_path / "contracts", "create_ticket.yaml", TICKET)
    scenario = write(tmp_path, "s.yaml", TICKET_SCENARIO)
    with pytest.raises(YamlError) as caught:
        load_scenario(scenario)
    error = caught.value
    assert (error.path, error.line, error.key) == (scenario, 2, "tools[0]")
    assert f"tool 'create_ticket' has a contract ({contract.resolve()}) but no mock behaviour" in str(error)
    assert "add a 'mock:' section" in str(error)


def test_the_same_scenario_loads_once_its_contract_has_a_mock(tmp_path: Path) -> None:
    write(tmp_path / "contracts", "create_ticket.yaml", TICKET + "mock: {kind: record_row, table: tickets}\n")
    scenario = load_scenario(write(tmp_path, "s.yaml", TICKET_SCENARIO))
    assert scenario.tools == ("create_ticket",)


def test_a_contract_without_a_mock_that_no_scenario_uses_does_not_stop_others(tmp_path: Path) -> None:
    write(tmp_path / "contracts", "create_ticket.yaml", TICKET)
    text = email_once() + "contracts_dir: contracts\n"
    assert load_scenario(write(tmp_path, "s.yaml", text)).tools == ("send_email",)


# ------------------------------------------------------------- reconcile lookups

CHARGE = (
    "name: charge_card\nidempotency: non_idempotent\nrecovery: reconcile\n"
    "reconcile: {{lookup_tool: {lookup}}}\nmock: {{kind: record_row, table: charges}}\n"
)
FIND = "name: find_charge\nidempotency: idempotent\n"


def test_a_lookup_tool_in_another_file_of_the_set_is_accepted(tmp_path: Path) -> None:
    paths = [
        write(tmp_path, "charge.yaml", CHARGE.format(lookup="find_charge")),
        write(tmp_path, "find.yaml", FIND + "mock: {kind: lookup_row, table: charges}\n"),
    ]
    assert load_contracts(paths)["charge_card"].lookup_tool == "find_charge"


def test_a_lookup_tool_nobody_defines_is_refused_where_it_is_named(tmp_path: Path) -> None:
    charge = write(tmp_path, "charge.yaml", CHARGE.format(lookup="find_charges"))
    paths = [charge, write(tmp_path, "find.yaml", FIND + "mock: {kind: lookup_row, table: charges}\n")]
    with pytest.raises(YamlError) as caught:
        load_contracts(paths)
    error = caught.value
    assert (error.path, error.line, error.key) == (charge, 4, "reconcile.lookup_tool")
    assert "lookup tool 'find_charges' has no contract" in str(error)
    assert "name a known tool (charge_card, find_charge)" in str(error)


def test_a_lookup_tool_without_a_mock_is_refused_where_it_is_named(tmp_path: Path) -> None:
    charge = write(tmp_path, "charge.yaml", CHARGE.format(lookup="find_charge"))
    find = write(tmp_path, "find.yaml", FIND)
    with pytest.raises(YamlError) as caught:
        load_contracts([charge, find])
    assert (caught.value.path, caught.value.key) == (charge, "reconcile.lookup_tool")
    assert f"lookup tool 'find_charge' ({find}) has no mock behaviour" in str(caught.value)


# ------------------------------------------------------------- expected words


def load_expecting(tmp_path: Path, expectation: dict[str, Any]) -> None:
    load_scenario(write(tmp_path, "s.yaml", email_once(expect={"default": expectation})))


@pytest.mark.parametrize(
    "expectation",
    [
        *({"outcome": {"call_1": word}} for word in (*RECOVERY_OUTCOMES, NO_RESULT)),
        *({"code": {"call_1": code}} for code in (None, *CODES)),
        *({"told": {"call_1": category}} for category in (*CATEGORIES, NO_RESULT)),
        {"ledger": {"call_1": list(STATUSES)}},
        {"ledger": {"call_1": {"in": [[], ["planned", "approved", "running", "unknown"]]}}},
        {"outcome": {"call_1": {"in": list(RECOVERY_OUTCOMES)}}},
        {"code": {"call_1": {"in": [None, *CODES]}}},
    ],
)
def test_every_word_of_each_vocabulary_is_accepted(tmp_path: Path, expectation: dict[str, Any]) -> None:
    load_expecting(tmp_path, expectation)


@pytest.mark.parametrize(
    ("expectation", "key", "problem"),
    [
        ({"outcome": {"call_1": "compelted"}}, "outcome.call_1", "'compelted' is not a recovery outcome"),
        (
            {"outcome": {"call_1": {"in": ["reconciled", "Reconciled"]}}},
            "outcome.call_1.in[1]",
            "'Reconciled' is not a recovery outcome",
        ),
        ({"code": {"call_1": "null"}}, "code.call_1", "'null' is not a code"),  # the text, not null
        (
            {"code": {"call_1": {"in": ["TIMEOUT", "TIMED_OUT"]}}},
            "code.call_1.in[1]",
            "'TIMED_OUT' is not a code",
        ),
        (
            {"told": {"call_1": {"in": ["uncertain", "lost"]}}},
            "told.call_1.in[1]",
            "'lost' is not a category",
        ),
        (
            {"ledger": {"call_1": ["approved", "started"]}},
            "ledger.call_1[1]",
            "'started' is not a ledger status",
        ),
        (
            {"ledger": {"call_1": {"in": [[], ["done"]]}}},
            "ledger.call_1.in[1][0]",
            "'done' is not a ledger status",
        ),
        ({"ledger": {"call_1": "succeeded"}}, "ledger.call_1", "expected a list of ledger statuses"),
    ],
)
def test_a_word_outside_its_vocabulary_is_refused_where_it_is_written(
    tmp_path: Path, expectation: dict[str, Any], key: str, problem: str
) -> None:
    with pytest.raises(YamlError) as caught:
        load_expecting(tmp_path, expectation)
    assert caught.value.key == f"expect.default.{key}"
    assert re.match(
        rf"^\S+:\d+:\d+: expect\.default\.{re.escape(key)}: {re.escape(problem)}", str(caught.value)
    )


# ------------------------------------------------------------- imported tools run

SCHEMA = {"type": "object", "properties": {"title": {"type": "string"}}}


def test_every_imported_contract_has_a_mock_of_its_class() -> None:
    contracts = contracts_from_mcp(
        [
            {"name": "search_issues", "inputSchema": SCHEMA, "annotations": {"readOnlyHint": True}},
            {"name": "create_issue", "inputSchema": SCHEMA},
            {"name": "set_topic", "inputSchema": SCHEMA, "annotations": {"idempotentHint": True}},
        ],
        trust_annotations=True,
    )
    kinds = [(c.name, c.idempotency, c.mock.kind if c.mock else None) for c in contracts]
    assert kinds == [
        ("search_issues", "idempotent", "read_only"),
        ("create_issue", "non_idempotent", "record_row"),
        ("set_topic", "conditional", "record_row"),
    ]


@pytest.mark.parametrize(
    ("names", "tables"),
    [
        (
            ["createIssue", "create-issue", "create_issue"],
            ["create_issue", "create_issue_2", "create_issue_3"],
        ),
        (["_9_"], ["rows"]),  # nothing usable is left: a table still needs a name
        (["Post" + "x" * 60], ["post" + "x" * 37]),
        (["a" * 41 + "_b", "a" * 41 + "_c"], ["a" * 41, "a" * 39 + "_2"]),
    ],
)
def test_an_imported_tool_writes_to_a_table_of_its_own_that_the_schema_accepts(
    names: list[str], tables: list[str]
) -> None:
    contracts = contracts_from_mcp([{"name": name, "inputSchema": SCHEMA} for name in names])
    assert [c.mock.table if c.mock else None for c in contracts] == tables
    assert all(re.fullmatch(r"[a-z][a-z0-9_]{0,40}", table) for table in tables)


def test_a_scenario_over_freshly_imported_contracts_loads(tmp_path: Path) -> None:
    [contract] = contracts_from_mcp([{"name": "create_ticket", "inputSchema": SCHEMA}], source="tools.json")
    text = contract_to_yaml(contract)
    assert "# mock: is how the crash tests run this tool" in text  # a reviewer learns it is a stub
    write(tmp_path / "contracts", "create_ticket.yaml", text)
    scenario = load_scenario(write(tmp_path, "s.yaml", TICKET_SCENARIO))
    assert scenario.contracts["create_ticket"].mock == MockSpec(kind="record_row", table="create_ticket")


def test_torn_recovery_writes_without_recovery_crashes_are_refused_where_they_are_asked(
    tmp_path: Path,
) -> None:
    # Torn writes are more second crashes: with none asked for they would never act.
    path = tmp_path / "s.yaml"
    path.write_text(email_once(recovery_crashes=False, recovery_torn_writes=True), encoding="utf-8")
    with pytest.raises(YamlError) as caught:
        load_scenario(path)
    error = caught.value
    assert (error.path, error.key) == (path, "recovery_torn_writes")
    assert "\n" not in str(error) and "drop one of the two" in str(error)
    path.write_text(email_once(recovery_torn_writes="yes"), encoding="utf-8")
    with pytest.raises(YamlError, match=r"s\.yaml:\d+:\d+: recovery_torn_writes: "):
        load_scenario(path)  # a boolean, by the schema
    path.write_text(email_once(recovery_torn_writes=True), encoding="utf-8")
    assert load_scenario(path).recovery_torn_writes
    path.write_text(email_once(), encoding="utf-8")
    assert not load_scenario(path).recovery_torn_writes  # off by default
