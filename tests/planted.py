"""An example agent's adapter file with one of its planted bugs switched on."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml


def plant(here: Path, adapter: str, variable: str, bug: str, where: Path) -> Path:
    """``here/adapter`` with ``variable=bug`` in its env, written under ``where``: the agent's
    own files stay where they are ({here} and script: made absolute), its helper modules (a
    ``returns:`` hook) are copied beside the new file, where the harness looks for them."""
    data: dict[str, Any] = yaml.safe_load((here / adapter).read_text(encoding="utf-8"))
    if "python" in data:
        data["python"]["script"] = str(here / data["python"]["script"])
    if "command" in data:
        data["command"] = [part.replace("{here}", str(here)) for part in data["command"]]
    data["env"] = {**(data.get("env") or {}), variable: bug}
    where.mkdir(parents=True, exist_ok=True)
    for helper in here.glob("*.py"):
        if helper.name != "agent.py":
            shutil.copy(helper, where / helper.name)
    path = where / f"{here.name}-{Path(adapter).stem}-{bug}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path
