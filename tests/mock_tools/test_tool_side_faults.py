"""Tool-side faults at the mock tools' backend boundary (issue 32): where the tool's client
meets the order API (on the wire: httpx's own exceptions) or an in-process backend (the
outbox, files, commands), each kind acts at its moment and the client words the answer it
got: uncertain after the effect, an error before it, never "succeeded" without an answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS
from crashmatrix.harness.core.tools import ToolContext
from crashmatrix.mock_tools import MockToolbox, World, catalogue
from crashmatrix.mock_tools.calls import FaultyHttp, ToolSide

MakeCtx = Callable[..., ToolContext]  # the make_ctx fixture (conftest.py)

ORDER = {"item": "pen", "quantity": 2}
EMAIL = {"to": "a@b.test", "subject": "hi", "body": "hello"}


class Armed:
    """A ToolSide with one fault armed for one call, fired once; what it was told, in order."""

    def __init__(self, kind: str | None, call_id: str = "call_1") -> None:
        self.kind, self.call_id = kind, call_id
        self.events: list[tuple[str, ...]] = []

    def side(self) -> ToolSide:
        def reach(call_id: str, tool: str) -> str | None:
            self.events.append(("reach", call_id, tool))
            if self.kind is not None and call_id == self.call_id:
                kind, self.kind = self.kind, None
                return kind
            return None

        def acted(kind: str, call_id: str, detail: str) -> None:
            self.events.append(("acted", kind, call_id))

        return ToolSide(reach, acted)


def _toolbox(world: World, http: httpx.Client, armed: Armed) -> MockToolbox:
    return MockToolbox(world, catalogue(), http, armed.side())


def _count(world: World, table: str) -> int:
    return world.snapshot().counts[table]


@pytest.mark.parametrize("kind", ["tool_server_died", "tool_response_lost", "tool_result_malformed"])
@pytest.mark.parametrize(
    ("tool", "arguments", "table"), [("create_order", ORDER, "orders"), ("send_email", EMAIL, "emails")]
)
def test_a_fault_after_the_effect_leaves_the_effect_and_an_uncertain_answer(
    world: World,
    http: httpx.Client,
    make_ctx: MakeCtx,
    kind: str,
    tool: str,
    arguments: dict[str, Any],
    table: str,
) -> None:
    armed = Armed(kind)
    observation = _toolbox(world, http, armed).execute(tool, arguments, make_ctx())
    assert _count(world, table) == 1  # committed before the answer was lost
    assert (observation.ok, observation.code, observation.uncertain) == (False, "SIDE_EFFECT_UNCERTAIN", True)
    assert observation.ledger_status == "unknown"
    assert armed.events == [("reach", "call_1", tool), ("acted", kind, "call_1")]


@pytest.mark.parametrize(
    ("tool", "arguments", "table"), [("create_order", ORDER, "orders"), ("send_email", EMAIL, "emails")]
)
def test_an_error_result_comes_back_before_anything_ran(
    world: World, http: httpx.Client, make_ctx: MakeCtx, tool: str, arguments: dict[str, Any], table: str
) -> None:
    observation = _toolbox(world, http, Armed("tool_result_error")).execute(tool, arguments, make_ctx())
    assert _count(world, table) == 0
    assert (observation.ok, observation.code, observation.uncertain) == (False, "TOOL_ERROR", False)
    assert "503" in observation.content


def test_the_fault_acts_on_its_call_once_and_the_lookup_after_it_meets_a_healthy_service(
    world: World, http: httpx.Client, make_ctx: MakeCtx
) -> None:
    armed = Armed("tool_server_died")
    toolbox = _toolbox(world, http, armed)
    assert toolbox.execute("create_order", ORDER, make_ctx()).code == "SIDE_EFFECT_UNCERTAIN"
    found = toolbox.execute("get_order_by_idempotency_key", {"idempotency_key": "key_1"}, make_ctx())
    assert (found.ok, found.data["found"]) == (True, True)
    assert armed.events[-1] == ("reach", "call_1", "get_order_by_idempotency_key")


def test_another_call_and_invalid_arguments_take_no_fault(
    world: World, http: httpx.Client, make_ctx: MakeCtx
) -> None:
    armed = Armed("tool_server_died", call_id="call_9")
    toolbox = _toolbox(world, http, armed)
    assert toolbox.execute("send_email", {"to": "x"}, make_ctx("call_9")).code == "INVALID_ARGUMENTS"
    assert toolbox.execute("send_email", EMAIL, make_ctx("call_1")).ok
    assert armed.kind == "tool_server_died"  # still armed: neither request was call_9's to take
    assert ("reach", "call_9", "send_email") not in armed.events


@pytest.mark.parametrize("kind", TOOL_SIDE_KINDS)
def test_a_read_whose_answer_is_lost_is_a_retryable_error_never_a_success(
    world: World, http: httpx.Client, make_ctx: MakeCtx, kind: str
) -> None:
    observation = _toolbox(world, http, Armed(kind)).execute("read_file", {"path": "README.md"}, make_ctx())
    assert (observation.ok, observation.retryable, observation.uncertain) == (False, True, False)


def test_the_wire_fault_raises_what_httpx_raises(world: World, http: httpx.Client) -> None:
    url = "http://orders.crashmatrix.test/orders"
    with pytest.raises(httpx.RemoteProtocolError, match="Server disconnected without sending a response"):
        FaultyHttp(http, "tool_server_died").post(url, json=ORDER)
    with pytest.raises(httpx.ReadTimeout):
        FaultyHttp(http, "tool_response_lost").post(url, json=ORDER)
    assert _count(world, "orders") == 2  # both committed: only the answers were lost
    cut = FaultyHttp(http, "tool_result_malformed").post(url, json=ORDER)
    with pytest.raises(ValueError):
        cut.json()
    refused = FaultyHttp(http, "tool_result_error")
    assert refused.post(url, json=ORDER).status_code == 503
    assert refused.post(url, json=ORDER).status_code == 201  # the next request: the service is back
    assert _count(world, "orders") == 4
