"""notes: a small real MCP server (the official ``mcp`` SDK's ``MCPServer``) for the tests of
proxy mode and ``import-mcp --server``: each note is a file in the folder it is given, so its
effects are files, as a team's filesystem server's are.

    python server.py FOLDER                 stdio
    python server.py FOLDER --http PORT     streamable HTTP at http://127.0.0.1:PORT/mcp

``append_note`` adds a line (not idempotent: a blind retry adds it twice), ``read_note`` reads
one, ``fail_note`` always fails (an ``isError`` result, nothing written).
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

FOLDER = Path(sys.argv[1])
server = MCPServer("notes")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
def read_note(name: str) -> str:
    """Read a note."""
    path = FOLDER / f"{name}.txt"
    return path.read_text(encoding="utf-8") if path.exists() else ""


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False))
def append_note(name: str, text: str) -> str:
    """Add a line to a note."""
    with open(FOLDER / f"{name}.txt", "a", encoding="utf-8") as file:
        file.write(text + "\n")
    return f"added to {name}"


@server.tool()
def fail_note(name: str) -> str:
    """A tool that always fails."""
    raise ToolError(f"cannot touch {name}")


if __name__ == "__main__":
    if "--http" in sys.argv:
        port = int(sys.argv[sys.argv.index("--http") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run()
