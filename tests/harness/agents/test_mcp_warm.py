"""harness.agents.mcp_warm, what needs no process: an MCP agent's fork server imports the SDK
once (so each life forks its warm relay server with it in memory), and ``{mcp_command}`` is
the stdlib launcher, run without ``site``. The relays themselves: test_mcp_relay.py (slow)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from crashmatrix.harness.agents.foreign import load_foreign_adapter
from crashmatrix.harness.agents.mcp_warm import LAUNCHER, PRELOAD, WarmRelays, available

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(not available(), reason="warm relays need Linux")


@pytest.mark.parametrize("adapter", ["mcp_plain/adapter.yaml", "reference_mcp/adapter_http.yaml"])
def test_an_mcp_agents_fork_server_preloads_the_sdk(adapter: str) -> None:
    preload = load_foreign_adapter(ROOT / "examples" / adapter).preload
    assert set(PRELOAD) <= set(preload)
    assert "mcp.server.lowlevel" in preload


def test_an_agent_without_mcp_preloads_none_of_it() -> None:
    preload = load_foreign_adapter(ROOT / "examples" / "http_agent" / "adapter.yaml").preload
    assert not set(PRELOAD) & set(preload)


def test_the_command_is_the_launcher_without_site_asking_this_server() -> None:
    warm = WarmRelays()
    try:
        command = warm.command(["--life", "http://127.0.0.1:1"])
    finally:
        warm.close()
    assert command[:4] == [sys.executable, "-I", "-S", str(LAUNCHER)]
    assert command[4] == warm.address and warm.address.startswith("@")
    assert command[5:] == ["--life", "http://127.0.0.1:1"]


def test_the_launcher_imports_the_standard_library_only() -> None:
    # Run with -S: a third-party import (or crashmatrix's) would fail in every agent's server.
    tree = ast.parse(LAUNCHER.read_text(encoding="utf-8"))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")])
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
