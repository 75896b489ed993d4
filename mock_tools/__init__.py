"""Mock tools whose side effects land in a durable per-case world (files + SQLite).

* ``World`` (``world.py``): the directory that outlives the agent; events, snapshot, faults.
* ``resolve_in_workspace`` (``sandbox.py``): hostile paths become ``SandboxViolation``.
* ``OrderAPI`` / ``install`` (``order_api.py``): an Idempotency-Key HTTP service under respx.
* ``MockToolbox`` (``toolbox.py``): ``harness.core.tools.Toolbox`` over all of the above.
* ``MailAPI`` / ``EMAILS_PATH`` (``mail_api.py``): the order API's mail counterpart; both share
  ``idempotency.py`` and are served over real HTTP by ``harness/agents/loopback.py``.
* ``catalogue()`` (``registry.py``): the built-in YAML contracts.
"""

from __future__ import annotations

from crashmatrix.mock_tools.faults import FAULT_KINDS, FaultSpec
from crashmatrix.mock_tools.mail_api import EMAILS_PATH, MailAPI
from crashmatrix.mock_tools.order_api import BASE_URL, OrderAPI, install
from crashmatrix.mock_tools.registry import CONTRACTS_DIR, catalogue
from crashmatrix.mock_tools.sandbox import resolve_in_workspace
from crashmatrix.mock_tools.toolbox import MockToolbox
from crashmatrix.mock_tools.world import World, WorldEvent, WorldSnapshot

__all__ = [
    "BASE_URL",
    "CONTRACTS_DIR",
    "EMAILS_PATH",
    "FAULT_KINDS",
    "FaultSpec",
    "MailAPI",
    "MockToolbox",
    "OrderAPI",
    "World",
    "WorldEvent",
    "WorldSnapshot",
    "catalogue",
    "install",
    "resolve_in_workspace",
]
