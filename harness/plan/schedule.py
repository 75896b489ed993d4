"""How to run one case again: the command line that reproduces it."""

from __future__ import annotations

import shlex
from pathlib import Path

__all__ = ["repro_command"]


def repro_command(
    scenario_path: Path, point_id: str, keep: str = "/tmp/crashmatrix-case", agent: str = "reference"
) -> str:
    try:  # relative to where the user stands, when it can be: shorter to read and to paste
        shown = str(scenario_path.resolve().relative_to(Path.cwd()))
    except ValueError:
        shown = str(scenario_path)
    parts = ["crashmatrix", "run", shown]
    if point_id != "clean":
        parts += ["--crash", point_id]
    if agent != "reference":
        parts += ["--agent", agent]
    parts += ["--keep", keep]
    return shlex.join(parts)
