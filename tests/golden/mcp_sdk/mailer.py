"""golden: an OpenAI Agents SDK agent whose one tool is on an MCP server (crashmatrix's, over
stdio), correct in what crashmatrix once judged falsely red. The SDK hands the model an MCP
tool's result as a list of text parts (``[{"type": "text", "text": ...}]`` in the chat request,
``input_text`` in its session), which crashmatrix read as the JSON of the list: every result
``error`` to the scripted model and to ``told_the_truth`` (the clean send red, "told 'error',
but it happened"), and ``no_ledger_in_prompt`` red (the request and the session spelled the
list apart). It never retries a call whose answer it could not read: its
``failure_error_function`` tells the model the email may have gone out.

``build_twin`` is the same agent with ``max_retry_attempts=2``: a send whose answer its client
refused (``tool_result_malformed``) is sent again (the real defect, red)."""

from __future__ import annotations

import json
import os
import shlex
from typing import Any

from agents import Agent, SQLiteSession
from agents.mcp import MCPServerStdio


def _may_have_happened(ctx: Any, error: Exception) -> str:
    return json.dumps(
        {"ok": False, "code": "SIDE_EFFECT_UNCERTAIN", "error": f"no answer: {type(error).__name__}"}
    )


def _agent(retries: int) -> Agent[Any]:
    argv = shlex.split(os.environ["MAILER_MCP"])
    server = MCPServerStdio(
        params={"command": argv[0], "args": argv[1:]},
        cache_tools_list=True,
        client_session_timeout_seconds=60,
        max_retry_attempts=retries,
        failure_error_function=_may_have_happened,
    )
    return Agent(name="mailer", model="gpt-4o-mini", mcp_servers=[server])


def build(ctx: Any) -> tuple[Agent[Any], SQLiteSession]:
    return _agent(0), SQLiteSession("u", "chat.db")


def build_twin(ctx: Any) -> tuple[Agent[Any], SQLiteSession]:
    return _agent(2), SQLiteSession("u", "chat.db")
