"""The suite's tools as MCP shapes, and their results as MCP ``CallToolResult``s (pure).

The inverse of ``harness.input.mcp_import``: a contract becomes an MCP ``Tool`` dict whose
``inputSchema`` is the contract's ``parameters`` and whose annotations say its class, so
``import_mcp(..., trust_annotations=True)`` of what crashmatrix serves gives back the same
classes (but where a write verb in the name overrides any hint: ``write_file`` is served as
the conditional tool it is and imported as non-idempotent, by the import's first rule).

Idempotency keys: a tool whose contract reconciles by key (``reconcile.lookup_tool``) or
whose mock honours keys deduplicates on the key the caller sends. Over MCP an agent sends
one in the request's ``_meta`` (``idempotency_key``) or as an argument: the served schema of
such a tool ADDS an optional string property ``idempotency_key`` (``KEY_ARGUMENT``), which
``split_key`` takes out again before the mock tool sees the arguments.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from crashmatrix.harness.core.contracts import ToolContract

__all__ = [
    "KEY_ARGUMENT",
    "MALFORMED_TYPE",
    "call_tool_result",
    "error_result",
    "malformed_result",
    "mcp_tool",
    "mcp_tools",
    "split_key",
    "takes_key",
]

KEY_ARGUMENT = "idempotency_key"
# A content type no MCP client knows: its SDK refuses the whole result (pydantic's
# discriminated union of content blocks), as it would a server that sent garbage.
MALFORMED_TYPE = "crashmatrix-malformed"

# Each class's hints, written out (MCP's defaults for an absent hint are the worst case).
_HINTS: Mapping[str, Mapping[str, bool]] = {
    "idempotent": {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True},
    "conditional": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True},
    "non_idempotent": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False},
}


def takes_key(contract: ToolContract) -> bool:
    """Whether the served schema of ``contract`` gets the optional ``idempotency_key``: it
    deduplicates on a key, and has no argument of that name already (a lookup by key has)."""
    keyed = contract.lookup_tool is not None or (
        contract.mock is not None and contract.mock.honours_idempotency_key
    )
    properties = contract.parameters.get("properties") or {}
    return keyed and KEY_ARGUMENT not in properties


def mcp_tool(contract: ToolContract) -> dict[str, Any]:
    """The MCP ``Tool`` dict crashmatrix serves for ``contract``."""
    schema: dict[str, Any] = json.loads(json.dumps(dict(contract.parameters))) or {"type": "object"}
    schema.setdefault("type", "object")
    if takes_key(contract):
        properties = dict(schema.get("properties") or {})
        properties[KEY_ARGUMENT] = {
            "type": "string",
            "description": "Optional: your idempotency key; a retry with the same key is not repeated.",
        }
        schema["properties"] = properties
    annotations: dict[str, Any] = {**_HINTS[contract.idempotency], "openWorldHint": False}
    tool: dict[str, Any] = {"name": contract.name, "inputSchema": schema, "annotations": annotations}
    if contract.description:
        tool["description"] = contract.description.strip()
    return tool


def mcp_tools(contracts: Mapping[str, ToolContract]) -> list[dict[str, Any]]:
    """Every contract's tool, by name."""
    return [mcp_tool(contracts[name]) for name in sorted(contracts)]


def split_key(
    arguments: Mapping[str, Any], meta: Mapping[str, Any] | None, *, keyed: bool
) -> tuple[dict[str, Any], str]:
    """The arguments the mock tool sees and the idempotency key of the call: ``_meta``'s
    ``idempotency_key`` first, else the argument (taken out only where the served schema
    added it: ``keyed``), else ""."""
    given = dict(arguments)
    argument = given.pop(KEY_ARGUMENT, None) if keyed else None
    from_meta = (meta or {}).get(KEY_ARGUMENT)
    for key in (from_meta, argument):
        if isinstance(key, str) and key:
            return given, key
    return given, ""


def call_tool_result(result: Mapping[str, Any]) -> dict[str, Any]:
    """A mock tool's result dict (``ToolObservation.to_result``) as a ``CallToolResult``: its
    JSON as the text the model is shown, the dict as ``structuredContent``, and ``isError``
    when the tool failed (``ok`` false)."""
    return {
        "content": [{"type": "text", "text": json.dumps(result, ensure_ascii=False)}],
        "structuredContent": dict(result),
        "isError": result.get("ok") is False,
    }


def error_result(tool: str) -> dict[str, Any]:
    """``tool_result_error``: the server failed the call before anything ran (an MCP
    ``isError`` result; the text is the mock tools' error shape, so a ``results:`` mapping
    reads it as a failure that may be retried)."""
    body = {
        "ok": False,
        "status": "failed",
        "code": "TOOL_ERROR",
        "content": f"the tool server failed the {tool} call before running it; nothing was done",
        "metadata": {"retryable": True},
    }
    return {"content": [{"type": "text", "text": json.dumps(body)}], "isError": True}


def malformed_result(result: Mapping[str, Any]) -> dict[str, Any]:
    """``tool_result_malformed``: the call's result, broken so that the client's SDK rejects
    it (a content block of a type MCP does not have)."""
    text = json.dumps(dict(result.get("structuredContent") or {}), ensure_ascii=False)
    return {"content": [{"type": MALFORMED_TYPE, "data": text}], "isError": "no"}
