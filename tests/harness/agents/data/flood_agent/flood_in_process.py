"""Kind 2: examples/blackbox_agent run in the harness's life process, after printing
FLOOD_BYTES (default 200 MB) to stdout and as many to stderr (fd 2: ``life-N.stderr``)."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

AGENT = Path(__file__).resolve().parents[5] / "examples" / "blackbox_agent" / "agent.py"


def main() -> None:
    total = int(os.environ.get("FLOOD_BYTES", str(200 * 1024 * 1024)))
    line = "flood " * 10 + "\n"
    block = line * (1 << 14)  # about 1 MiB of lines, printed a line at a time to stdout
    for _ in range(total // len(block)):
        for _ in range(1 << 14):
            print(line, end="")
    err = os.fdopen(os.dup(2), "wb")
    for _ in range(total // len(block)):
        err.write(block.encode())
    err.close()
    print()
    runpy.run_path(str(AGENT), run_name="__main__")
