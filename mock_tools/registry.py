"""The built-in tool contracts (``mock_tools/contracts/*.yaml``) and ``catalogue()``."""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.input.contract_files import load_contracts

__all__ = ["CONTRACTS_DIR", "catalogue"]

CONTRACTS_DIR = Path(str(resources.files("crashmatrix.mock_tools").joinpath("contracts")))


def _yaml_files(directory: Path) -> list[Path]:
    return sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")])


def catalogue(extra_dirs: Iterable[Path | str] = ()) -> dict[str, ToolContract]:
    """Every built-in contract plus those in ``extra_dirs``, by tool name.

    A tool defined twice is a YamlError naming both files (``load_contracts``), never a
    silent override: which definition governs recovery must not depend on load order.
    """
    paths = _yaml_files(CONTRACTS_DIR)
    for directory in extra_dirs:
        paths.extend(_yaml_files(Path(directory)))
    return load_contracts(paths)
