"""harness.core.contracts: seed 004's defaults, consistency rules, and per-call run_command classes."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix.harness.core.contracts import ToolContract, contract_from_mapping, default_contract
from crashmatrix.harness.errors import YamlError
from crashmatrix.harness.input.contract_files import load_contract, load_contracts


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_tool_without_a_contract_is_the_worst_case() -> None:
    contract = default_contract("send_email")
    assert (contract.idempotency, contract.replay_policy, contract.recovery) == (
        "non_idempotent",
        "never",
        "surface_uncertain",
    )
    assert contract.approval == "required" and contract.ledger
    assert contract.has_side_effects
    assert "worst case" in contract.source


def test_an_empty_contract_object_is_also_the_worst_case() -> None:
    assert (ToolContract("x").idempotency, ToolContract("x").replay_policy) == ("non_idempotent", "never")


@pytest.mark.parametrize(
    ("idempotency", "policy", "recovery", "approval", "ledger"),
    [
        ("idempotent", "auto", "replay", "auto", False),
        ("conditional", "ask", "precondition", "required", True),
        ("non_idempotent", "never", "surface_uncertain", "required", True),
    ],
)
def test_defaults_are_filled_by_idempotency_class(
    tmp_path: Path, idempotency: str, policy: str, recovery: str, approval: str, ledger: bool
) -> None:
    contract = load_contract(write(tmp_path, f"name: t\nidempotency: {idempotency}\n"))
    assert (contract.replay_policy, contract.recovery, contract.approval, contract.ledger) == (
        policy,
        recovery,
        approval,
        ledger,
    )


def test_an_idempotent_tool_with_side_effects_keeps_a_ledger(tmp_path: Path) -> None:
    contract = load_contract(write(tmp_path, "name: t\nidempotency: idempotent\nside_effects: [files]\n"))
    assert contract.ledger is True
    assert contract.has_side_effects


def test_explicit_values_override_the_defaults(tmp_path: Path) -> None:
    text = (
        "name: charge\nidempotency: non_idempotent\nreplay_policy: ask\nrecovery: reconcile\n"
        "reconcile: {lookup_tool: get_charge}\napproval: auto\nledger: true\n"
        "precondition: {path_argument: file, content_argument: text}\n"
        "mock: {kind: record_row, table: charges, honours_idempotency_key: true}\n"
    )
    contract = load_contract(write(tmp_path, text))
    assert contract.replay_policy == "ask"
    assert contract.recovery == "reconcile" and contract.lookup_tool == "get_charge"
    assert contract.approval == "auto"
    assert (contract.path_argument, contract.content_argument) == ("file", "text")
    assert contract.mock is not None and contract.mock.table == "charges"
    assert contract.mock.honours_idempotency_key


def test_the_source_is_the_file_path(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nidempotency: idempotent\n")
    assert load_contract(path).source == str(path)


def test_a_contract_file_is_parsed_once_until_its_bytes_change(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nidempotency: idempotent\n")
    first = load_contract(path)
    assert load_contract(path) is first  # every scenario loads the catalogue: parsed once
    write(tmp_path, "name: t\nidempotency: non_idempotent\n")  # changed on disk
    assert load_contract(path).idempotency == "non_idempotent"
    write(tmp_path, "name: t\nidempotency: sometimes\n")
    with pytest.raises(YamlError, match="sometimes"):
        load_contract(path)
    with pytest.raises(YamlError, match="sometimes"):  # a failure is not cached as a success
        load_contract(path)


def test_contract_from_mapping_fills_the_same_defaults() -> None:
    contract = contract_from_mapping({"name": "t", "idempotency": "conditional"}, source="here")
    assert (contract.replay_policy, contract.recovery, contract.source) == ("ask", "precondition", "here")


@pytest.mark.parametrize(
    ("text", "line", "key", "message"),
    [
        (
            "name: t\nidempotency: non_idempotent\nreplay_policy: auto\n",
            3,
            "replay_policy",
            "a non_idempotent tool cannot replay automatically; write 'never' (or 'ask')",
        ),
        (
            "name: t\nidempotency: non_idempotent\nrecovery: replay\n",
            3,
            "recovery",
            "a non_idempotent tool cannot recover by 'replay'; write reconcile (with "
            "reconcile.lookup_tool), surface_uncertain or manual",
        ),
        (
            "name: t\nidempotency: non_idempotent\nrecovery: precondition\n",
            3,
            "recovery",
            "a non_idempotent tool cannot recover by 'precondition'; write reconcile (with "
            "reconcile.lookup_tool), surface_uncertain or manual",
        ),
        (
            "name: t\nidempotency: conditional\nrecovery: reconcile\n",
            3,
            "recovery",
            "reconcile needs 'reconcile: {lookup_tool: NAME}' naming the lookup tool",
        ),
        (
            "name: t\nidempotency: non_idempotent\nmock:\n  kind: record_row\n",
            4,
            "mock.kind",
            "mock kind 'record_row' needs 'table: NAME'",
        ),
        (
            "name: t\nidempotency: idempotent\nmock:\n  kind: lookup_row\n",
            4,
            "mock.kind",
            "mock kind 'lookup_row' needs 'table: NAME'",
        ),
    ],
)
def test_inconsistent_contracts_are_refused_with_the_exact_message(
    tmp_path: Path, text: str, line: int, key: str, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(YamlError) as caught:
        load_contract(path)
    assert str(caught.value) == f"{path}:{line}:{caught.value.col}: {key}: {message}"
    assert caught.value.line == line


def test_non_idempotent_may_ask_and_may_reconcile(tmp_path: Path) -> None:
    text = "name: t\nidempotency: non_idempotent\nreplay_policy: ask\nrecovery: reconcile\n"
    contract = load_contract(write(tmp_path, text + "reconcile: {lookup_tool: find_t}\n"))
    assert (contract.replay_policy, contract.recovery) == ("ask", "reconcile")


def test_a_tool_name_defined_twice_across_files_is_an_error(tmp_path: Path) -> None:
    first = write(tmp_path, "name: send_email\nidempotency: non_idempotent\n", "a.yaml")
    second = write(tmp_path, "# again\nname: send_email\nidempotency: idempotent\n", "b.yaml")
    with pytest.raises(YamlError) as caught:
        load_contracts([second, first])
    error = caught.value
    assert (error.path, error.line, error.key) == (second, 2, "name")
    assert f"tool 'send_email' is already defined in {first}; rename one of them" in str(error)


def test_load_contracts_indexes_by_name(tmp_path: Path) -> None:
    paths = [
        write(tmp_path, "name: read_file\nidempotency: idempotent\n", "r.yaml"),
        write(tmp_path, "name: write_file\nidempotency: conditional\n", "w.yaml"),
    ]
    contracts = load_contracts(paths)
    assert sorted(contracts) == ["read_file", "write_file"]
    assert contracts["write_file"].recovery == "precondition"


RUN_COMMAND = "name: run_command\nidempotency: non_idempotent\nclassify: run_command\n"


def test_for_call_on_run_command_classifies_ls_as_auto_without_ledger(tmp_path: Path) -> None:
    contract = load_contract(write(tmp_path, RUN_COMMAND)).for_call({"command": "ls"})
    assert (contract.idempotency, contract.replay_policy, contract.recovery) == (
        "idempotent",
        "auto",
        "replay",
    )
    assert contract.approval == "auto" and contract.ledger is False
    assert contract.reason


def test_for_call_on_run_command_never_replays_npm_publish(tmp_path: Path) -> None:
    contract = load_contract(write(tmp_path, RUN_COMMAND)).for_call({"command": "npm publish"})
    assert (contract.idempotency, contract.replay_policy, contract.recovery) == (
        "non_idempotent",
        "never",
        "surface_uncertain",
    )
    assert contract.approval == "required" and contract.ledger is True


def test_for_call_on_run_command_replays_npm_test_only_after_asking(tmp_path: Path) -> None:
    # Seed 004: conditional + ask. A command has no base/after hash to check, so recovery
    # is a replay, gated by asking the user (replay_policy ask), never automatic.
    contract = load_contract(write(tmp_path, RUN_COMMAND)).for_call({"command": "npm test"})
    assert (contract.idempotency, contract.replay_policy, contract.recovery) == (
        "conditional",
        "ask",
        "replay",
    )


@pytest.mark.parametrize("arguments", [{}, {"command": None}, {"command": ["ls"]}, {"cmd": "ls"}])
def test_for_call_without_a_usable_command_is_never_replayed(
    tmp_path: Path, arguments: dict[str, object]
) -> None:
    contract = load_contract(write(tmp_path, RUN_COMMAND)).for_call(arguments)
    assert contract.replay_policy == "never"


def test_for_call_leaves_other_tools_unchanged(tmp_path: Path) -> None:
    contract = load_contract(write(tmp_path, "name: write_file\nidempotency: conditional\n"))
    assert contract.for_call({"command": "ls"}) is contract


def test_tool_schema_is_the_openai_function_entry() -> None:
    contract = ToolContract("read_file", description="Read a file.", parameters={"type": "object"})
    assert contract.tool_schema() == {
        "type": "function",
        "function": {"name": "read_file", "description": "Read a file.", "parameters": {"type": "object"}},
    }
    assert ToolContract("x").tool_schema()["function"]["parameters"] == {"type": "object", "properties": {}}


def test_a_read_only_command_has_no_side_effects_though_run_command_declares_some(tmp_path: Path) -> None:
    contract = load_contract(write(tmp_path, RUN_COMMAND + "side_effects: [workspace, releases]\n"))
    assert contract.for_call({"command": "npm publish"}).side_effects == ("workspace", "releases")
    assert not contract.for_call({"command": "ls src"}).has_side_effects
