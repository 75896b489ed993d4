"""The reference agent with its tools on an MCP server: kind 2, started as a process would be.

Everything is ``crashmatrix.reference_agent``'s (its loop, seed 000's ledger, seed 004's
recovery by contract); only the toolbox differs: ``McpToolbox`` calls the tools over MCP, on
the server ``CRASHMATRIX_MCP_COMMAND`` (stdio) or ``CRASHMATRIX_MCP_URL`` (streamable HTTP)
names. What it needs beside the server, as any deployment of it would:

* its contracts: the built-in catalogue's for the tools it knows, and for a tool it does not,
  the server's ``tools/list`` entry classified again as seed 004 says (its hints are not
  believed: ``crashmatrix.harness.input.mcp_import``). It offers the model exactly the
  server's tools;
* its model: ``OPENAI_BASE_URL`` through the openai client's own HTTP client;
* its session: ``CRASHMATRIX_SESSION_PATH``, seed 000's JSONL;
* its boundaries: each passes through ``boundary`` (a module attribute, so an adapter's rules
  can mark them), called at the points the reference agent's hook is called;
* a person: approvals asked on stdout, one line, answered on stdin.

Run by ``adapter.yaml`` beside it (docs/adapters.md "Tools over MCP").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import httpx
import openai

from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.records import ToolCall
from crashmatrix.harness.input.mcp_import import contracts_from_mcp
from crashmatrix.mock_tools import MockToolbox, World, catalogue
from crashmatrix.reference_agent.agent import Agent
from crashmatrix.reference_agent.mcp_client import McpToolbox, McpUnavailable, server_from_env
from crashmatrix.reference_agent.model import OpenAIChatModel


def boundary(name: str, call_id: str) -> None:
    """The reference agent's boundary hook: nothing happens here; the adapter's rules mark it."""


def _hook(name: str, call_id: str) -> None:
    # Looked up at each call: the function an adapter's rule wrapped is the one called.
    sys.modules[__name__].boundary(name, call_id)


class LineApprover:
    """A person at the terminal, asked on one line (the prompt an adapter's regex reads)."""

    def __init__(self, stdin: TextIO, stdout: TextIO) -> None:
        self.stdin = stdin
        self.stdout = stdout

    def approve(self, call: ToolCall, preview: Mapping[str, Any], *, again: bool) -> bool:
        asked = " again" if again else ""
        print(f"Approve {call.name}{asked}? [y/N] ", end="", file=self.stdout, flush=True)
        return self.stdin.readline().strip().lower() in ("y", "yes")


def contracts_for(
    tools: Sequence[Mapping[str, Any]], known: Mapping[str, ToolContract]
) -> dict[str, ToolContract]:
    """A contract for each tool the server lists, in its order: the agent's own where it has
    one, else the server's entry classified by seed 004's rules (hints not trusted)."""
    unknown = [tool for tool in tools if tool.get("name") not in known]
    classified = {c.name: c for c in contracts_from_mcp(unknown, source="(tools/list)")} if unknown else {}
    return {
        str(tool["name"]): known.get(str(tool["name"])) or classified[str(tool["name"])] for tool in tools
    }


def build(toolbox: McpToolbox, session_path: Path, workspace: Path) -> Agent:
    contracts = contracts_for(toolbox.list_tools(), catalogue())
    # The runtime's own reads (a write's base and after hashes) on the files where it runs,
    # the ones the server's tools act on: no tool call.
    # (MockToolbox's plan and check_precondition only; its HTTP client is never used.)
    toolbox.planner = MockToolbox(World(workspace.parent), contracts, httpx.Client())
    client = openai.OpenAI(
        base_url=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        api_key=os.environ.get("OPENAI_API_KEY", "unset"),
        max_retries=0,
    )
    return Agent(
        session_path=session_path,
        session_id=os.environ.get("REFERENCE_SESSION_ID", "case"),
        model=OpenAIChatModel(client, os.environ.get("CRASHMATRIX_MODEL", "crashmatrix-scripted")),
        toolbox=toolbox,
        contracts=contracts,
        approver=LineApprover(sys.stdin, sys.stdout),
        hook=_hook,
    )


def main() -> int:
    workspace = Path.cwd()
    session_path = Path(os.environ.get("CRASHMATRIX_SESSION_PATH", ".agent_state/session-case.jsonl"))
    try:
        server = server_from_env()
    except McpUnavailable as error:
        print(f"reference-mcp: {error}", file=sys.stderr)
        return 2
    with McpToolbox(server) as toolbox:
        agent = build(toolbox, session_path, workspace)
        try:
            answer = agent.resume()
            if answer is not None:
                print(f"Agent> {answer}", flush=True)
            while True:
                try:
                    text = input("You> ")
                except EOFError:
                    return 0
                if text.strip():
                    print(f"Agent> {agent.run_turn(text)}", flush=True)
        finally:
            agent.close()


if __name__ == "__main__":
    sys.exit(main())
