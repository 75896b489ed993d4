"""How to run one case again: the command line that reproduces it.

A case is named as the matrix names it: ``clean``, a point id ``P``, ``power@P`` (a power
loss at P) or ``recovery@P`` (a crash at P, then one at each point the restarted agent
passes while it recovers). ``crashmatrix run FILE --crash NAME`` takes each of those names
as it is, so a rerun line runs that one case and nothing else; a crash while recovering
that is one case of its own (the failing one of a ``recovery@P``, or ``--second Q``) adds
``--second Q``.
"""

from __future__ import annotations

import shlex
from pathlib import Path

__all__ = ["CLEAN", "DEFAULT_KEEP", "POWER", "RECOVERY", "repro_command"]

CLEAN = "clean"
POWER = "power@"
RECOVERY = "recovery@"
# A rerun line names no directory: ``crashmatrix run`` keeps a case it is asked for by name in a
# new directory of its own and prints it (a fixed one would collide on a shared machine).
DEFAULT_KEEP: str | None = None


def _shown(path: Path) -> str:
    try:  # relative to where the user stands, when it can be: shorter to read and to paste
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _shown_agent(agent: str) -> str:
    """An adapter file is a path: shown like the scenario's, so the line works from the
    same directory. A ``module:factory`` spec or a built-in name is kept as it is."""
    if agent.endswith((".yaml", ".yml")) and Path(agent).is_file():
        return _shown(Path(agent))
    return agent


def repro_command(
    scenario_path: Path,
    point_id: str,
    keep: str | None = DEFAULT_KEEP,
    agent: str = "reference",
    second: str | None = None,
) -> str:
    """``crashmatrix run FILE --crash NAME [--second Q] [--agent A] [--keep DIR]``.

    ``point_id`` is the case's name (see the module docstring). ``second``: the one crash
    while recovering that the case is about; for ``recovery@P`` it turns the line into
    ``--crash P --second Q``, the single depth-2 case that failed, rather than all of
    ``recovery@P`` again. ``keep`` None (the default) leaves ``--keep`` out."""
    if second is not None and point_id == CLEAN:
        raise ValueError(f"a second crash needs a first one to recover from, not {point_id!r}")
    crash = point_id.removeprefix(RECOVERY) if second is not None else point_id
    parts = ["crashmatrix", "run", _shown(scenario_path), "--crash", crash]
    if second is not None:
        parts += ["--second", second]
    if agent != "reference":
        parts += ["--agent", _shown_agent(agent)]
    if keep is not None:
        parts += ["--keep", keep]
    return shlex.join(parts)
