"""Real MCP servers for the tests of proxy mode and ``import-mcp --server``.

``NOTES``: a small Python server (``tests/harness/agents/data/mcp_notes/server.py``, the
official ``mcp`` SDK) that needs nothing but the venv. ``filesystem_server()``: the reference
filesystem server, ``@modelcontextprotocol/server-filesystem`` from npm, which ``.ci/run``
installs into ``.cache/mcp-servers`` (``npm install --prefix``). Without it a test FAILS under
CI (``CI=true``: a missing server there is a broken CI, as with PostgreSQL) and skips
elsewhere, naming the command that installs it. ``notes_over_http``: the notes server on a
free loopback port, stopped after the block.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.waiting import wait_until

__all__ = ["FILESYSTEM_PACKAGE", "INSTALL", "NOTES", "filesystem_server", "notes_over_http"]

ROOT = Path(__file__).resolve().parents[1]
NOTES = ROOT / "tests" / "harness" / "agents" / "data" / "mcp_notes" / "server.py"
# The version .ci/run installs and examples/mcp_filesystem/contracts/ were imported from.
FILESYSTEM_PACKAGE = "@modelcontextprotocol/server-filesystem@2026.8.31"
CACHE = ROOT / ".cache" / "mcp-servers"
INSTALL = f"npm install --prefix .cache/mcp-servers {FILESYSTEM_PACKAGE}"


def filesystem_server() -> Path:
    """The installed filesystem server's program (``mcp-server-filesystem DIR...``)."""
    program = CACHE / "node_modules" / ".bin" / "mcp-server-filesystem"
    if program.exists():
        return program
    problem = f"the reference MCP filesystem server is not installed ({program}): run {INSTALL} (Node 18+)"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: {problem}; .ci/run installs it", pytrace=False)
    pytest.skip(problem)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


@contextlib.contextmanager
def notes_over_http(folder: Path) -> Iterator[str]:
    """The notes server over streamable HTTP for the block: its MCP endpoint's URL."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(NOTES), str(folder), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        # Bounded by the server's start (an interpreter and the mcp imports), under load.
        if not wait_until(lambda: _answers(port) or process.poll() is not None, within=60):
            pytest.fail(f"the notes MCP server did not listen on port {port} within 60 s")
        if process.poll() is not None:
            assert process.stderr is not None
            pytest.fail(f"the notes MCP server exited: {process.stderr.read().decode()[-500:]}")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait()
