"""Every shipped contract loads and says what the brief and seed 004 say it should."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashmatrix import mock_tools
from crashmatrix.harness.errors import YamlError
from crashmatrix.harness.input.contract_files import load_contract
from crashmatrix.mock_tools import CONTRACTS_DIR, catalogue
from crashmatrix.mock_tools.toolbox import BUILTIN_TOOLS

CONTRACT_FILES = sorted(CONTRACTS_DIR.glob("*.yaml"))


@pytest.mark.parametrize("path", CONTRACT_FILES, ids=[p.stem for p in CONTRACT_FILES])
def test_every_contract_file_loads_and_is_named_after_its_tool(path: Path) -> None:
    contract = load_contract(path)
    assert contract.name == path.stem
    assert contract.description
    assert contract.parameters.get("type") == "object"


def test_the_catalogue_has_every_builtin_and_the_yaml_only_tools() -> None:
    tools = catalogue()
    assert set(BUILTIN_TOOLS) <= set(tools)
    assert {"refund_payment", "get_refund_by_idempotency_key", "send_email_yaml", "create_order_yaml"} <= set(
        tools
    )


def test_every_lookup_tool_exists_and_is_idempotent() -> None:
    tools = catalogue()
    for contract in tools.values():
        if contract.lookup_tool:
            assert tools[contract.lookup_tool].idempotency == "idempotent"


@pytest.mark.parametrize(
    ("name", "idempotency", "policy", "recovery"),
    [
        ("read_file", "idempotent", "auto", "replay"),
        ("list_files", "idempotent", "auto", "replay"),
        ("write_file", "conditional", "auto", "precondition"),
        ("create_order", "non_idempotent", "never", "reconcile"),
        ("create_order_unkeyed", "non_idempotent", "never", "surface_uncertain"),
        ("send_email", "non_idempotent", "never", "surface_uncertain"),
        ("run_command", "non_idempotent", "never", "surface_uncertain"),
        ("refund_payment", "non_idempotent", "never", "reconcile"),
    ],
)
def test_contract_classes(name: str, idempotency: str, policy: str, recovery: str) -> None:
    contract = catalogue()[name]
    assert (contract.idempotency, contract.replay_policy, contract.recovery) == (
        idempotency,
        policy,
        recovery,
    )


def test_read_only_file_tools_write_no_ledger_and_write_file_needs_approval() -> None:
    tools = catalogue()
    assert not tools["read_file"].ledger and not tools["list_files"].ledger
    assert tools["write_file"].approval == "required"
    assert tools["create_order"].lookup_tool == "get_order_by_idempotency_key"
    assert tools["run_command"].classify == "run_command"


def test_extra_dirs_add_tools_and_a_duplicate_name_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "ping.yaml").write_text("name: ping\nidempotency: idempotent\nmock: {kind: read_only}\n")
    assert "ping" in catalogue([tmp_path])
    (tmp_path / "send_email.yaml").write_text("name: send_email\nidempotency: non_idempotent\n")
    with pytest.raises(YamlError, match="already defined"):
        catalogue([tmp_path])


def test_the_package_exports_a_sorted_public_api() -> None:
    assert mock_tools.__all__ == sorted(mock_tools.__all__)
    for name in mock_tools.__all__:
        assert hasattr(mock_tools, name)
