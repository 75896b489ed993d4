"""Mock tools whose side effects land in a durable per-case world (files + SQLite).

* ``World`` (``world.py``): the directory that outlives the agent; events, snapshot, faults.
* ``resolve_in_workspace`` (``sandbox.py``): hostile paths become ``SandboxViolation``.
* ``OrderAPI`` / ``install`` (``order_api.py``): an Idempotency-Key HTTP service under respx.
* ``MockToolbox`` (``toolbox.py``): ``harness.tooling.Toolbox`` over all of the above.
* ``catalogue()`` (``registry.py``): the built-in YAML contracts.
"""

from __future__ import annotations

from .faults import FAULT_KINDS, FaultSpec
from .order_api import BASE_URL, OrderAPI, install
from .registry import CONTRACTS_DIR, catalogue
from .sandbox import resolve_in_workspace
from .toolbox import MockToolbox
from .world import World, WorldEvent, WorldSnapshot

__all__ = [
    "BASE_URL",
    "CONTRACTS_DIR",
    "FAULT_KINDS",
    "FaultSpec",
    "MockToolbox",
    "OrderAPI",
    "World",
    "WorldEvent",
    "WorldSnapshot",
    "catalogue",
    "install",
    "resolve_in_workspace",
]
