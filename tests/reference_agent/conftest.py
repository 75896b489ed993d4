"""The ``rig`` fixture (see ``rig.py``): a world, respx-mocked HTTP and agents on one session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import respx

from crashmatrix.mock_tools import World, install
from tests.tls import CONTEXT

from .rig import MODEL_URL, SESSION_ID, Rig


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    root = tmp_path / "world"
    session = root / "workspace" / ".agent_state" / f"session-{SESSION_ID}.jsonl"
    world = World.create(root, session_path=session)
    with (
        respx.mock(assert_all_mocked=True, assert_all_called=False) as router,
        httpx.Client(verify=CONTEXT) as http,
    ):
        route = router.post(MODEL_URL)
        install(router, world)
        built = Rig(root, world, session, http, router, route)
        try:
            yield built
        finally:
            for agent in built.agents:
                agent.close()
