"""Where scenario files are: the built-in suite, and every scenario YAML under a folder.

The built-in suite is the ``scenarios/`` folder beside the packages: at the top of this
repository in a checkout or an editable install, and installed with the wheel as package
data (``crashmatrix/scenarios``), so ``crashmatrix eval`` runs it from anywhere.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUILTIN_SUITE", "scenario_files"]

# harness/input/suite.py -> harness/ -> the folder holding harness/ and scenarios/.
BUILTIN_SUITE = Path(__file__).resolve().parents[2] / "scenarios"


def scenario_files(root: Path) -> list[Path]:
    """Every scenario YAML under ``root`` (contract folders excluded), sorted."""
    if root.is_file():
        return [root]
    return sorted(
        p
        for p in root.rglob("*.y*ml")
        if p.suffix in (".yaml", ".yml") and "contracts" not in p.relative_to(root).parts
    )
