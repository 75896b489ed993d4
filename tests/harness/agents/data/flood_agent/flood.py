"""examples/blackbox_agent, after printing FLOOD_BYTES (default 200 MB) to stdout and as many
to stderr: a black box that talks too much is still judged on what it does."""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

AGENT = Path(__file__).resolve().parents[5] / "examples" / "blackbox_agent" / "agent.py"

total = int(os.environ.get("FLOOD_BYTES", str(200 * 1024 * 1024)))
block = (b"flood " * 10 + b"\n") * (1 << 14)  # about 1 MiB of lines
for stream in (sys.stdout.buffer, sys.stderr.buffer):
    left = total
    while left > 0:
        stream.write(block[:left])
        left -= len(block)
    stream.write(b"\n")  # its prompt then starts a line, as prompts do
    stream.flush()
sys.argv = [str(AGENT)]
runpy.run_path(str(AGENT), run_name="__main__")
