"""harness.input.mcp_import: MCP hints suggest, they do not decide (seed 004, "MCP 工具也要重新分类")."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.errors import InputError
from crashmatrix.harness.front.cli import main
from crashmatrix.harness.input.contract_files import load_contract
from crashmatrix.harness.input.mcp_import import contract_to_yaml, contracts_from_mcp, import_mcp, tools_of

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "body": {"type": "string"}},
    "required": ["title"],
}


def tool(name: str, description: str | None = None, **annotations: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "inputSchema": SCHEMA}
    if description is not None:
        out["description"] = description
    if annotations:
        out["annotations"] = annotations
    return out


def only(tools: list[dict[str, Any]], *, trust: bool = False) -> ToolContract:
    [contract] = contracts_from_mcp(tools, trust_annotations=trust)
    return contract


def classes(contract: ToolContract) -> tuple[str, str, str]:
    return contract.idempotency, contract.replay_policy, contract.recovery


WORST = ("non_idempotent", "never", "surface_uncertain")


@pytest.mark.parametrize("trust", [False, True])
@pytest.mark.parametrize(
    "annotations",
    [
        {},
        {"readOnlyHint": True},  # a lying server
        {"readOnlyHint": True, "idempotentHint": True, "destructiveHint": False, "openWorldHint": False},
        {"idempotentHint": True},
    ],
)
def test_mcp_create_issue_defaults_to_non_idempotent(annotations: dict[str, Any], trust: bool) -> None:
    contract = only([tool("create_issue", "Create an issue in the tracker.", **annotations)], trust=trust)
    assert classes(contract) == WORST
    assert "'create'" in contract.reason
    assert contract.approval == "required" and contract.ledger


@pytest.mark.parametrize("name", ["createIssue", "send-email", "charge_customer", "deleteFile", "merge_pr"])
def test_a_write_verb_in_the_name_overrides_a_read_only_hint(name: str) -> None:
    assert classes(only([tool(name, readOnlyHint=True)], trust=True)) == WORST


def test_a_read_only_search_tool_with_hints_is_idempotent() -> None:
    contract = only(
        [tool("search_issues", "Search issues by keyword.", readOnlyHint=True, openWorldHint=False)]
    )
    assert classes(contract) == ("idempotent", "auto", "replay")
    assert contract.approval == "auto"
    assert contract.ledger is False
    assert "readOnlyHint=true" in contract.reason


def test_seed_004_get_order_status_with_read_only_hint_is_idempotent() -> None:
    assert only([tool("get_order_status", readOnlyHint=True)]).idempotency == "idempotent"


def test_missing_annotations_mean_the_worst_case() -> None:
    contract = only([tool("search_issues", "Search issues by keyword.")])
    assert classes(contract) == WORST
    assert "no annotations" in contract.reason


def test_an_untrusted_read_only_hint_loses_to_a_write_verb_in_the_description() -> None:
    contract = only([tool("sync_labels", "Updates the labels of an issue.", readOnlyHint=True)])
    assert classes(contract) == WORST
    assert "'updates'" in contract.reason


def test_a_trusted_read_only_hint_is_believed_over_the_description() -> None:
    contract = only([tool("sync_labels", "Updates the labels of an issue.", readOnlyHint=True)], trust=True)
    assert contract.idempotency == "idempotent"


def test_an_idempotent_hint_is_conditional_only_when_trusted() -> None:
    hinted = tool("set_topic", "Set the channel topic.", idempotentHint=True, destructiveHint=False)
    assert classes(only([hinted], trust=True)) == ("conditional", "ask", "manual")
    untrusted = only([hinted])
    assert classes(untrusted) == WORST
    assert "not trusted" in untrusted.reason


def test_read_only_false_and_no_idempotent_hint_is_the_worst_case() -> None:
    assert (
        classes(only([tool("rotate_keys", readOnlyHint=False, destructiveHint=False)], trust=True)) == WORST
    )


def test_parameters_description_and_source_come_from_the_tool() -> None:
    [contract] = contracts_from_mcp([tool("search_issues", "Find.", readOnlyHint=True)], source="github-mcp")
    assert contract.parameters == SCHEMA
    assert contract.description == "Find."
    assert contract.source == "github-mcp"
    assert contract.tool_schema()["function"]["parameters"] == SCHEMA


def test_the_contracts_keep_the_servers_order() -> None:
    names = [c.name for c in contracts_from_mcp([tool("b"), tool("a"), tool("c")])]
    assert names == ["b", "a", "c"]


@pytest.mark.parametrize(
    ("tools", "where"),
    [
        ([{"inputSchema": SCHEMA}], "tools[0].name"),
        ([tool("ok"), {"name": 3, "inputSchema": SCHEMA}], "tools[1].name"),
        ([{"name": "x"}], "tools[0].inputSchema"),
        ([{"name": "x", "inputSchema": "object"}], "tools[0].inputSchema"),
        ([{"name": "x", "inputSchema": SCHEMA, "description": 5}], "tools[0].description"),
        ([{"name": "x", "inputSchema": SCHEMA, "annotations": []}], "tools[0].annotations"),
        ([tool("x", readOnlyHint="yes")], "tools[0].annotations.readOnlyHint"),
        ([tool("x"), tool("x")], "tools[1].name"),
        ([tool("has.dot")], "tools[0].name"),
        (["search"], "tools[0]"),
    ],
)
def test_a_malformed_tool_list_names_the_index_and_field(tools: list[Any], where: str) -> None:
    with pytest.raises(InputError, match=rf"^{re.escape(where)}:"):
        contracts_from_mcp(tools)


def test_a_tool_list_that_is_not_a_list_is_refused() -> None:
    with pytest.raises(InputError, match="must be a list"):
        contracts_from_mcp({"tools": []})  # type: ignore[arg-type]


@pytest.mark.parametrize("trust", [False, True])
def test_contracts_round_trip_through_yaml_and_load_contract(tmp_path: Path, trust: bool) -> None:
    tools = [
        tool("search_issues", "Search issues: «keyword» 検索.", readOnlyHint=True),
        tool("create_issue", "Create an issue."),
        tool("set_topic", idempotentHint=True),
    ]
    for contract in contracts_from_mcp(tools, trust_annotations=trust):
        path = tmp_path / f"{contract.name}.yaml"
        path.write_text(contract_to_yaml(contract), encoding="utf-8")
        loaded = load_contract(path)
        assert loaded.source == str(path)
        assert dataclasses.replace(loaded, source=contract.source) == contract


def test_yaml_of_a_hand_written_contract_round_trips(tmp_path: Path) -> None:
    from crashmatrix.harness.core.contracts import MockSpec

    contract = ToolContract(
        name="charge_customer",
        idempotency="non_idempotent",
        replay_policy="ask",
        recovery="reconcile",
        lookup_tool="get_charge_by_key",
        side_effects=("charges",),
        path_argument="file",
        content_argument="text",
        mock=MockSpec(kind="record_row", table="charges", honours_idempotency_key=True, result={"ok": 1}),
        source="x",
    )
    path = tmp_path / "c.yaml"
    path.write_text(contract_to_yaml(contract), encoding="utf-8")
    assert dataclasses.replace(load_contract(path), source="x") == contract


# ---------------------------------------------------------------------------- import-mcp

TOOLS = [tool("search_issues", "Find.", readOnlyHint=True), tool("create_issue")]


@pytest.mark.parametrize(
    "raw",
    [
        TOOLS,
        {"tools": TOOLS},
        {"tools": TOOLS, "nextCursor": None},
        {"jsonrpc": "2.0", "id": 1, "result": {"tools": TOOLS}},
    ],
    ids=["bare list", "tools/list result", "result with cursor", "JSON-RPC response"],
)
def test_each_shape_a_tools_list_is_saved_in_gives_the_same_tools(raw: Any) -> None:
    assert list(tools_of(raw)) == TOOLS
    assert [c.name for c in import_mcp(raw).contracts] == ["search_issues", "create_issue"]


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}},
         "JSON-RPC error response (-32601: Method not found)"),
        ({"jsonrpc": "2.0", "id": 1}, 'without a "result" object'),
        ({"content": []}, 'without "tools" (its keys: content)'),
        ("tools", "must be a list"),
    ],
)  # fmt: skip
def test_what_holds_no_tool_list_is_refused_saying_what_it_is(raw: Any, says: str) -> None:
    with pytest.raises(InputError, match=re.escape(says)):
        import_mcp(raw)


def test_a_bad_tool_is_skipped_and_named_and_the_others_are_imported() -> None:
    raw = {"tools": [tool("fs.write_file"), *TOOLS, tool("create_issue"), {"name": "no_schema"}]}
    imported = import_mcp(raw, source="tools.json")
    assert [c.name for c in imported.contracts] == ["search_issues", "create_issue"]
    assert [line.split(": ", 2)[1] for line in imported.skipped] == [
        "tools[0].name",
        "tools[3].name",
        "tools[4].inputSchema",
    ]
    first = imported.skipped[0]
    assert first.startswith("tools.json: tools[0].name: 'fs.write_file' cannot be a contract name (")
    assert first.endswith("; skipped") and "\n" not in first
    assert "is already the name of tools[2]" in imported.skipped[1]  # the first of a name is kept


def test_the_cli_writes_the_good_tools_reports_each_skipped_one_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "tools.json"
    response = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool("fs.write_file"), *TOOLS]}}
    source.write_text(json.dumps(response), encoding="utf-8")
    out = tmp_path / "contracts"
    assert main(["import-mcp", str(source), "--out", str(out)]) == 1
    assert sorted(p.name for p in out.iterdir()) == ["create_issue.yaml", "search_issues.yaml"]
    assert load_contract(out / "create_issue.yaml").idempotency == "non_idempotent"
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"crashmatrix: {source}: tools[0].name: 'fs.write_file' ")


def test_the_cli_exits_0_when_every_tool_is_imported(tmp_path: Path) -> None:
    source = tmp_path / "tools.json"
    source.write_text(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": TOOLS}}), encoding="utf-8")
    assert main(["import-mcp", str(source), "--out", str(tmp_path / "contracts")]) == 0


def test_the_cli_refuses_a_json_rpc_error_in_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "tools.json"
    source.write_text(json.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "no"}}), "utf-8")
    assert main(["import-mcp", str(source), "--out", str(tmp_path / "contracts")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"crashmatrix: {source}: a JSON-RPC error response (1: no)")
