"""Tools imported from an MCP tools/list run in the mock tools as imported: their stub mock
records a writer's calls as rows and answers a reader, never UNKNOWN_TOOL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from crashmatrix.harness.core.tools import ToolContext
from crashmatrix.harness.input.mcp_import import contract_to_yaml, contracts_from_mcp
from crashmatrix.mock_tools import MockToolbox, World, catalogue

MakeCtx = Callable[..., ToolContext]  # the make_ctx fixture (conftest.py)

SCHEMA = {"type": "object", "properties": {"title": {"type": "string"}}}
TOOLS = [
    {"name": "createTicket", "inputSchema": SCHEMA},
    {"name": "search_tickets", "inputSchema": SCHEMA, "annotations": {"readOnlyHint": True}},
]


def imported_toolbox(tmp_path: Path, world: World, http: httpx.Client) -> MockToolbox:
    extra = tmp_path / "imported"
    extra.mkdir()
    for contract in contracts_from_mcp(TOOLS, source="tools.json"):
        (extra / f"{contract.name}.yaml").write_text(contract_to_yaml(contract), encoding="utf-8")
    return MockToolbox(world, catalogue([extra]), http)


def test_an_imported_writer_records_each_call_as_a_row_of_its_table(
    tmp_path: Path, world: World, http: httpx.Client, make_ctx: MakeCtx
) -> None:
    toolbox = imported_toolbox(tmp_path, world, http)
    observation = toolbox.execute("createTicket", {"title": "Broken"}, make_ctx())
    assert (observation.ok, observation.code) == (True, None)
    assert observation.data["row"]["payload"] == {"title": "Broken"}
    assert world.snapshot().counts["rows:create_ticket"] == 1


def test_an_imported_reader_answers_and_changes_nothing(
    tmp_path: Path, world: World, http: httpx.Client, make_ctx: MakeCtx
) -> None:
    toolbox = imported_toolbox(tmp_path, world, http)
    observation = toolbox.execute("search_tickets", {"title": "Broken"}, make_ctx())
    assert (observation.ok, observation.code) == (True, None)
    assert world.events() == []
