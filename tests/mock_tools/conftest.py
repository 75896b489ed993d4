"""Fixtures for the mock tools: a world with a session file, respx-mocked HTTP, a toolbox."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import respx

from crashmatrix.harness.core.tools import ToolContext
from crashmatrix.mock_tools import MockToolbox, World, catalogue, install
from crashmatrix.mock_tools.order_api import ORDERS_HOST
from tests.tls import CONTEXT

SEED_FILES = {
    "README.md": "hello\n",
    "src/app.js": "console.log('hi')\n",
    "package.json": '{"version": "1.2.3"}',
}
SESSION_LINE = b'{"type":"message"}\n'

MakeCtx = Callable[..., ToolContext]


@pytest.fixture
def world(tmp_path: Path) -> World:
    root = tmp_path / "world"
    session = root / "workspace" / ".agent_state" / "session-demo.jsonl"
    created = World.create(root, session_path=session, files=SEED_FILES)
    session.parent.mkdir(parents=True)
    session.write_bytes(SESSION_LINE)
    return created


@pytest.fixture
def router(world: World) -> Iterator[respx.MockRouter]:
    # assert_all_mocked: a request to any host without a route raises instead of leaving.
    with respx.mock(assert_all_called=False, assert_all_mocked=True) as mock:
        install(mock, world)
        yield mock
        assert all(call.request.url.host == ORDERS_HOST for call in mock.calls)


@pytest.fixture
def http(router: respx.MockRouter) -> Iterator[httpx.Client]:
    with httpx.Client(verify=CONTEXT) as client:
        yield client


@pytest.fixture
def toolbox(world: World, http: httpx.Client) -> MockToolbox:
    return MockToolbox(world, catalogue(), http)


@pytest.fixture
def make_ctx() -> MakeCtx:
    def make(
        tool_call_id: str = "call_1", execution_id: str = "exec_1", idempotency_key: str = "key_1"
    ) -> ToolContext:
        return ToolContext(tool_call_id, execution_id, idempotency_key, "0" * 64)

    return make
