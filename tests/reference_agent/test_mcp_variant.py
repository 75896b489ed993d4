"""The reference agent's MCP variant (``reference_agent/mcp_client.py``), in process.

The server here is the SDK's own low-level ``Server`` over its in-memory transport, serving
the mock tools as crashmatrix's relay serves them (``harness.agents.mcp_tools``: contracts as
MCP tools, results as ``CallToolResult``s). The same agent, the same script, the same crash:
through the mock tools in process and through MCP, the session and the world must come out
the same, record for record. The whole suite through the real relay, with SIGKILL, is
``tests/harness/agents/test_mcp_equivalence.py``.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
import respx
from mcp.client._memory import InMemoryTransport
from mcp.client._transport import TransportStreams
from mcp.server import Server

from crashmatrix.harness.agents.mcp_tools import call_tool_result, error_result, mcp_tools
from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.ledger import arguments_sha256
from crashmatrix.harness.core.script import Reply, Rule, When
from crashmatrix.harness.core.tools import Toolbox, ToolContext, ToolObservation
from crashmatrix.mock_tools import MockToolbox, World, catalogue, install
from crashmatrix.mock_tools.model import ScriptedModel
from crashmatrix.reference_agent.agent import Agent
from crashmatrix.reference_agent.approval import ScriptedApprover
from crashmatrix.reference_agent.mcp_client import (
    McpServer,
    McpToolbox,
    McpUnavailable,
    observation_of,
    server_from_env,
)
from crashmatrix.reference_agent.model import ModelSettings, OpenAIChatModel, make_openai_client
from tests.tls import CONTEXT

from .rig import MODEL_BASE_URL, MODEL_URL, SESSION_ID, SimulatedCrash, crash_at

JSON = dict[str, Any]
CTX = ToolContext("call_1", "exec_1", "key-1", "sha")


# -- a served toolbox ----------------------------------------------------------------------------


@dataclass
class Served:
    """The mock tools behind an in-memory MCP server, as the relay and the life serve them."""

    toolbox: Toolbox
    contracts: Mapping[str, ToolContract]
    requests: list[JSON]
    opened: list[int]
    fail_next: list[str]

    def server(self) -> Server[Any]:
        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult.model_validate({"tools": mcp_tools(self.contracts)})

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            meta = dict(params.meta or {})
            arguments = dict(params.arguments or {})
            self.requests.append({"name": params.name, "arguments": arguments, "meta": meta})
            if self.fail_next:
                raise RuntimeError(self.fail_next.pop())
            tool_ctx = ToolContext(
                meta.get("tool_call_id", ""),
                meta.get("execution_id", ""),
                meta.get("idempotency_key", ""),
                arguments_sha256(arguments),
            )
            observation = self.toolbox.execute(params.name, arguments, tool_ctx)
            contract = self.contracts.get(params.name)
            idempotency = contract.idempotency if contract else "non_idempotent"
            result = observation.to_result(
                execution_id=f"{tool_ctx.tool_call_id}:mcp:1", idempotency=idempotency
            )
            return types.CallToolResult.model_validate(call_tool_result(result))

        return Server("served", on_list_tools=list_tools, on_call_tool=call_tool)

    def transport(self) -> Callable[[], AbstractAsyncContextManager[TransportStreams]]:
        server = self.server()

        def opened() -> AbstractAsyncContextManager[TransportStreams]:
            self.opened.append(1)
            return InMemoryTransport(server)

        return opened


def served(toolbox: Toolbox, contracts: Mapping[str, ToolContract]) -> Served:
    return Served(toolbox, contracts, [], [], [])


class _NoPlans:
    def plan(self, name: str, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        return {}

    def check_precondition(self, name: str, arguments: Mapping[str, Any], plan: Mapping[str, Any]) -> Any:
        raise AssertionError("no precondition is checked here")


class _Echo:
    """A toolbox that answers what it is given, to see what reached the server."""

    def __init__(self, answer: ToolObservation) -> None:
        self.answer = answer

    def execute(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolObservation:
        return self.answer

    def plan(self, name: str, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        return {}

    def check_precondition(self, name: str, arguments: Mapping[str, Any], plan: Mapping[str, Any]) -> Any:
        raise AssertionError


# -- the client ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "observation",
    [
        ToolObservation(ok=True, data={"order_id": "ord_1", "replayed": False}),
        ToolObservation(ok=True, content="written", data={"path": "a.txt", "bytes": 3}),
        ToolObservation(ok=False, code="PERMISSION_DENIED", content="no", data={"path": "a.txt"}),
        ToolObservation(ok=False, code="TIMEOUT", content="slow", retryable=True),
        ToolObservation(ok=False, code="SIDE_EFFECT_UNCERTAIN", content="lost", uncertain=True),
    ],
)
def test_a_served_result_reads_back_as_the_observation_the_tool_gave(observation: ToolObservation) -> None:
    served_result = call_tool_result(
        observation.to_result(execution_id="call_1:mcp:1", idempotency="conditional")
    )
    assert observation_of(types.CallToolResult.model_validate(served_result)) == observation


def test_a_text_only_answer_and_an_is_error_answer_are_read_by_their_text() -> None:
    text = types.CallToolResult(content=[types.TextContent(type="text", text="42 files")])
    assert observation_of(text) == ToolObservation(ok=True, content="42 files")
    failed = types.CallToolResult(content=[types.TextContent(type="text", text="disk full")], is_error=True)
    assert observation_of(failed) == ToolObservation(ok=False, code="TOOL_ERROR", content="disk full")
    # The relay's tool_result_error: its text in crashmatrix's shape, a failure that may be retried.
    refused = observation_of(types.CallToolResult.model_validate(error_result("send_email")))
    assert (refused.ok, refused.code, refused.retryable, refused.uncertain) == (
        False,
        "TOOL_ERROR",
        True,
        False,
    )


def test_identities_travel_in_meta_and_the_arguments_stay_the_models() -> None:
    contracts = {name: catalogue()[name] for name in ("create_order", "get_order_by_idempotency_key")}
    server = served(_Echo(ToolObservation(ok=True, data={"order_id": "ord_1"})), contracts)
    with McpToolbox(server.transport(), _NoPlans()) as toolbox:
        listed = [tool["name"] for tool in toolbox.list_tools()]
        assert listed == ["create_order", "get_order_by_idempotency_key"]
        assert toolbox.execute("create_order", {"item": "pen", "quantity": 2}, CTX).data == {
            "order_id": "ord_1"
        }
        toolbox.execute(
            "get_order_by_idempotency_key",
            {"idempotency_key": "key-1"},
            ToolContext("call_1", "", "key-1", "s"),
        )
    assert server.requests == [
        {
            "name": "create_order",
            "arguments": {"item": "pen", "quantity": 2},
            "meta": {"tool_call_id": "call_1", "idempotency_key": "key-1", "execution_id": "exec_1"},
        },
        {
            # An unledgered call has no attempt to name; the lookup's key is its own argument.
            "name": "get_order_by_idempotency_key",
            "arguments": {"idempotency_key": "key-1"},
            "meta": {"tool_call_id": "call_1", "idempotency_key": "key-1"},
        },
    ]
    assert len(server.opened) == 1  # one session for the toolbox's life


def test_a_call_without_a_readable_answer_is_uncertain_and_the_next_call_opens_a_new_session() -> None:
    server = served(_Echo(ToolObservation(ok=True)), {"send_email": catalogue()["send_email"]})
    server.fail_next.append("the server fell over mid-call")
    with McpToolbox(server.transport(), _NoPlans()) as toolbox:
        lost = toolbox.execute("send_email", {"to": "a@b.c", "subject": "s", "body": "b"}, CTX)
        assert (lost.ok, lost.code, lost.uncertain) == (False, "SIDE_EFFECT_UNCERTAIN", True)
        assert lost.ledger_status == "unknown"  # never "failed": the effect may have happened
        assert toolbox.execute("send_email", {"to": "a@b.c", "subject": "s", "body": "b"}, CTX).ok
    assert len(server.opened) == 2, "the lost session was dropped and a new one opened"


def test_a_server_that_cannot_be_reached_failed_and_nothing_was_sent() -> None:
    def unreachable() -> AbstractAsyncContextManager[TransportStreams]:
        raise OSError("connection refused")

    with McpToolbox(unreachable, _NoPlans()) as toolbox:
        failed = toolbox.execute("send_email", {}, CTX)
    assert (failed.ok, failed.code, failed.retryable, failed.uncertain) == (False, "TOOL_ERROR", True, False)
    assert "was not sent" in failed.content


def test_the_server_is_the_url_else_the_command_line_and_none_is_one_line() -> None:
    assert server_from_env({"CRASHMATRIX_MCP_URL": "http://127.0.0.1:9/mcp"}) == McpServer(
        url="http://127.0.0.1:9/mcp"
    )
    command = server_from_env({"CRASHMATRIX_MCP_COMMAND": "/usr/bin/python3 -m relay --life 'http://x y'"})
    assert command == McpServer(command=("/usr/bin/python3", "-m", "relay", "--life", "http://x y"))
    with pytest.raises(McpUnavailable, match=r"CRASHMATRIX_MCP_URL .* or CRASHMATRIX_MCP_COMMAND"):
        server_from_env({})


# -- the same agent, in process and over MCP -----------------------------------------------------


@dataclass
class Run:
    records: list[JSON]
    world: JSON
    events: list[tuple[Any, ...]]
    requests: list[JSON]


def _ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"exec_{next(counter)}"


def _run(
    root: Path,
    rules: Sequence[Rule],
    lives: Sequence[Callable[[str, str], None]],
    *,
    over_mcp: bool,
    setup: Callable[[World], None] = lambda world: None,
) -> Run:
    """Each life a new Agent on the same session (the last one hooked by nothing), the first
    lives crashing where their hook raises: over the mock tools in process, or over MCP."""
    session = root / "workspace" / ".agent_state" / f"session-{SESSION_ID}.jsonl"
    world = World.create(root, session_path=session)
    setup(world)
    contracts = catalogue()
    new_id = _ids()
    requests: list[JSON] = []
    with (
        respx.mock(assert_all_mocked=True, assert_all_called=False) as router,
        httpx.Client(verify=CONTEXT) as http,
    ):
        model = ScriptedModel(list(rules))
        router.post(MODEL_URL).mock(side_effect=model.handle)
        install(router, world)
        tools = MockToolbox(world, contracts, http)
        server = served(tools, contracts)
        for hook in lives:
            mcp = McpToolbox(server.transport(), tools) if over_mcp else None
            client = make_openai_client(ModelSettings(MODEL_BASE_URL, "k", "scripted", max_retries=0), http)
            agent = Agent(
                session_path=session,
                session_id=SESSION_ID,
                model=OpenAIChatModel(client, "scripted"),
                toolbox=mcp if mcp is not None else tools,
                contracts=contracts,
                approver=ScriptedApprover(),
                hook=hook,
                new_id=new_id,
            )
            try:
                agent.resume()
                if not agent.turns_started():
                    agent.run_turn("go")
            except SimulatedCrash:
                pass
            finally:
                agent.close()
                if mcp is not None:
                    mcp.close()
        requests = server.requests
    events = [(e.kind, e.tool, e.tool_call_id, e.execution_id, e.idempotency_key) for e in world.events()]
    records = [json.loads(line) for line in session.read_text(encoding="utf-8").splitlines()]
    return Run(records, world.snapshot().to_json(), events, requests)


def _no_crash(boundary: str, call_id: str) -> None:
    pass


ORDER = {"item": "pen", "quantity": 2}
WRITE = {"path": "notes.txt", "content": "new"}
CASES: Mapping[str, tuple[list[Rule], list[Callable[[str, str], None]], Callable[[World], None]]] = {
    "a clean order": (
        [
            Rule(When(role="user"), Reply(tool_calls=(("call_o", "create_order", ORDER),))),
            Rule(When(role="tool"), Reply("ok")),
        ],
        [_no_crash],
        lambda world: None,
    ),
    "an order killed after it was placed, reconciled by key": (
        [
            Rule(When(role="user"), Reply(tool_calls=(("call_o", "create_order", ORDER),))),
            Rule(When(role="tool"), Reply("ok")),
        ],
        [crash_at("after_side_effect", "call_o"), _no_crash],
        lambda world: None,
    ),
    "a write killed after running, replayed on its recorded plan": (
        [
            Rule(When(role="user"), Reply(tool_calls=(("call_w", "write_file", WRITE),))),
            Rule(When(role="tool"), Reply("ok")),
        ],
        [crash_at("after_running", "call_w"), _no_crash],
        lambda world: world.external_write("notes.txt", "old"),
    ),
    "an email killed after it was sent, surfaced as uncertain": (
        [
            Rule(
                When(role="user"),
                Reply(tool_calls=(("call_e", "send_email", {"to": "a@b.c", "subject": "s", "body": "b"}),)),
            ),
            Rule(When(role="tool"), Reply("ok")),
        ],
        [crash_at("after_side_effect", "call_e"), _no_crash],
        lambda world: None,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_reference_agent_over_mcp_leaves_what_it_leaves_in_process(tmp_path: Path, case: str) -> None:
    rules, lives, setup = CASES[case]
    native = _run(tmp_path / "native", rules, lives, over_mcp=False, setup=setup)
    over_mcp = _run(tmp_path / "mcp", rules, lives, over_mcp=True, setup=setup)
    assert over_mcp.records == native.records
    assert over_mcp.world == native.world
    assert over_mcp.events == native.events
    # Every tool call went over MCP, each under the attempt its ledger names.
    executions = {r["execution_id"] for r in native.records if r["type"] == "tool_execution"}
    assert over_mcp.requests and {
        r["meta"].get("execution_id", "") for r in over_mcp.requests
    } <= executions | {""}


def test_a_lost_mcp_answer_for_an_order_is_reconciled_by_key_not_ordered_twice(tmp_path: Path) -> None:
    rules = [
        Rule(When(role="user"), Reply(tool_calls=(("call_o", "create_order", ORDER),))),
        Rule(When(role="tool"), Reply("ok")),
    ]
    root = tmp_path / "mcp"
    session = root / "workspace" / ".agent_state" / f"session-{SESSION_ID}.jsonl"
    world = World.create(root, session_path=session)
    with (
        respx.mock(assert_all_mocked=True, assert_all_called=False) as router,
        httpx.Client(verify=CONTEXT) as http,
    ):
        router.post(MODEL_URL).mock(side_effect=ScriptedModel(rules).handle)
        install(router, world)
        contracts = catalogue()
        tools = MockToolbox(world, contracts, http)

        class PlacedThenLost:
            """The order is placed, then the server fails before it answers."""

            def execute(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolObservation:
                observation = tools.execute(name, arguments, ctx)
                if name == "create_order":
                    raise RuntimeError("the server died after placing the order")
                return observation

            plan = tools.plan
            check_precondition = tools.check_precondition

        server = served(PlacedThenLost(), contracts)
        client = make_openai_client(ModelSettings(MODEL_BASE_URL, "k", "scripted", max_retries=0), http)
        with McpToolbox(server.transport(), tools) as toolbox:
            agent = Agent(
                session_path=session,
                session_id=SESSION_ID,
                model=OpenAIChatModel(client, "scripted"),
                toolbox=toolbox,
                contracts=contracts,
                approver=ScriptedApprover(),
            )
            try:
                agent.run_turn("order")
            finally:
                agent.close()
    records = [json.loads(line) for line in session.read_text(encoding="utf-8").splitlines()]
    statuses = [r["status"] for r in records if r["type"] == "tool_execution"]
    # The lost answer is unknown, the lookup by key finds the order: one order, reconciled.
    assert statuses == ["approved", "running", "unknown", "approved", "running", "succeeded"], statuses
    assert world.snapshot().counts["orders"] == 1
    assert [r["name"] for r in server.requests] == ["create_order", "get_order_by_idempotency_key"]
    assert len(server.opened) == 2, "the lookup went over a new session"


def test_the_example_without_a_server_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """examples/reference_mcp/agent.py started outside an adapter with ``tools: mcp``."""
    path = Path(__file__).resolve().parents[2] / "examples" / "reference_mcp" / "agent.py"
    spec = importlib.util.spec_from_file_location("reference_mcp_agent", path)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    monkeypatch.delenv("CRASHMATRIX_MCP_URL", raising=False)
    monkeypatch.delenv("CRASHMATRIX_MCP_COMMAND", raising=False)
    assert example.main() == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "CRASHMATRIX_MCP_COMMAND" in err, err
