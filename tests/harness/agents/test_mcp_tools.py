"""harness.agents.mcp_tools: the suite's contracts as MCP tools, and mock results as MCP
``CallToolResult``s, checked against the importer (its inverse) and the official SDK's types."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from crashmatrix.harness.agents.mcp_tools import (
    KEY_ARGUMENT,
    call_tool_result,
    error_result,
    malformed_result,
    mcp_tool,
    mcp_tools,
    split_key,
    takes_key,
)
from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.input.mcp_import import import_mcp
from crashmatrix.mock_tools.registry import catalogue

types = pytest.importorskip("mcp.types")
CONTRACTS = catalogue([])


def test_every_served_tool_is_a_valid_mcp_tool_with_the_contracts_schema_and_hints() -> None:
    tools = mcp_tools(CONTRACTS)
    assert [tool["name"] for tool in tools] == sorted(CONTRACTS)
    for tool in tools:
        types.Tool.model_validate(tool)  # what an MCP client parses
        contract = CONTRACTS[tool["name"]]
        properties = dict(tool["inputSchema"].get("properties") or {})
        properties.pop(KEY_ARGUMENT, None) if takes_key(contract) else None
        assert properties == dict(contract.parameters.get("properties") or {}), tool["name"]
        hints = tool["annotations"]
        assert hints["readOnlyHint"] is (contract.idempotency == "idempotent")
        assert hints["destructiveHint"] is (contract.idempotency == "non_idempotent")


def test_importing_what_is_served_gives_back_each_contracts_class() -> None:
    """The round trip: ``import_mcp`` (trusting the hints) of the served list gives every tool
    the class of its contract, except where a write verb in the name overrides any hint (the
    importer's first rule: ``write_file`` is conditional here, ``list_sent_emails`` read-only,
    and a name saying 'write' or 'sent' is imported non-idempotent whatever it is served as)."""
    # The suite's one conditional tool is write_file: one more, named without a write verb.
    contracts = {**CONTRACTS, "refresh_cache": ToolContract(name="refresh_cache", idempotency="conditional")}
    imported = {c.name: c for c in import_mcp(mcp_tools(contracts), trust_annotations=True).contracts}
    assert set(imported) == set(contracts)
    overridden = []
    for name, contract in contracts.items():
        if imported[name].reason.startswith("the name contains the write verb"):
            assert imported[name].idempotency == "non_idempotent"
            if contract.idempotency != "non_idempotent":
                overridden.append(name)
            continue
        assert imported[name].idempotency == contract.idempotency, name
        served = imported[name].parameters.get("properties", {})
        assert served.keys() >= contract.parameters.get("properties", {}).keys()
    assert sorted(overridden) == ["list_sent_emails", "write_file"]
    # Every class is carried (a round trip of only one class would prove little).
    kept = {c.idempotency for name, c in contracts.items() if name not in overridden}
    assert kept == {"idempotent", "conditional", "non_idempotent"}


def test_a_keyed_tool_gets_an_optional_key_argument_and_a_lookup_keeps_its_own() -> None:
    order = mcp_tool(CONTRACTS["create_order"])  # reconciles by key
    assert order["inputSchema"]["properties"][KEY_ARGUMENT]["type"] == "string"
    assert KEY_ARGUMENT not in order["inputSchema"]["required"]
    lookup = CONTRACTS["get_order_by_idempotency_key"]  # the key IS its argument
    assert not takes_key(lookup)
    assert mcp_tool(lookup)["inputSchema"] == dict(lookup.parameters)
    assert not takes_key(CONTRACTS["send_email"])
    assert KEY_ARGUMENT not in mcp_tool(CONTRACTS["send_email"])["inputSchema"]["properties"]


def test_the_key_comes_from_meta_first_and_is_stripped_only_where_it_was_added() -> None:
    given = {"item": "x", KEY_ARGUMENT: "from-argument"}
    assert split_key(given, {KEY_ARGUMENT: "from-meta"}, keyed=True) == ({"item": "x"}, "from-meta")
    assert split_key(given, None, keyed=True) == ({"item": "x"}, "from-argument")
    # A tool whose own schema has the argument (a lookup by key) sees it as it came.
    assert split_key(given, None, keyed=False) == (given, "")
    assert split_key({"item": "x"}, {}, keyed=True) == ({"item": "x"}, "")


def test_a_result_is_its_json_as_text_and_structured_content_and_a_failure_is_is_error() -> None:
    ok = {"ok": True, "status": "succeeded", "execution_id": "call_1:exec", "email": {"id": "m1"}}
    result = types.CallToolResult.model_validate(call_tool_result(ok))
    assert (json.loads(result.content[0].text), result.structured_content, result.is_error) == (ok, ok, False)
    failed = {"ok": False, "status": "unknown", "code": "SIDE_EFFECT_UNCERTAIN"}
    assert types.CallToolResult.model_validate(call_tool_result(failed)).is_error is True
    error = types.CallToolResult.model_validate(error_result("send_email"))
    assert error.is_error and json.loads(error.content[0].text)["code"] == "TOOL_ERROR"


def test_a_malformed_result_is_one_the_sdk_refuses() -> None:
    good = call_tool_result({"ok": True, "status": "succeeded"})
    with pytest.raises(ValidationError):
        types.CallToolResult.model_validate(malformed_result(good))


def test_a_contract_without_parameters_is_served_an_object_schema() -> None:
    tool = mcp_tool(ToolContract(name="ping", idempotency="idempotent"))
    assert tool["inputSchema"] == {"type": "object"}
    types.Tool.model_validate(tool)
