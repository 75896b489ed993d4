"""harness.agents.mcp_relay + the loopback server's /mcp/* routes, end to end with the official
``mcp`` client: the edges a call passes in order, and each tool-side fault acting for real (the
relay's pid dies, the HTTP relay comes back on the same port, the response is dropped, isError,
a result the client refuses), read from the trace's events and the world's counts.

Relays are started as a life starts them, warm (harness.agents.mcp_warm: one server for the
module, the client spawning the launcher); the launcher's ties are tested for real (its relay
goes when it is killed or its agent dies, it dies with a killed relay). One stdio and one HTTP
test start the relay cold (``crashmatrix mcp-serve``), as a team may run it by hand."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from crashmatrix.harness.agents.loopback import LoopbackServer, McpLife
from crashmatrix.harness.agents.mcp_relay import HttpRelay, kill_stdio_relay, relay_command
from crashmatrix.harness.agents.mcp_tools import mcp_tools, takes_key
from crashmatrix.harness.agents.mcp_warm import WarmRelays
from crashmatrix.harness.agents.tool_faults import ToolSideFault, arm, take
from crashmatrix.mock_tools.model import ScriptedModel
from crashmatrix.mock_tools.order_api import OrderAPI
from crashmatrix.mock_tools.registry import catalogue
from crashmatrix.mock_tools.toolbox import MockToolbox
from crashmatrix.mock_tools.world import World

mcp = pytest.importorskip("mcp")
pytestmark = pytest.mark.slow

CONTRACTS = {name: c for name, c in catalogue([]).items() if name in ("send_email", "create_order")}
EMAIL = {"to": "a@example.com", "subject": "s", "body": "b"}


@dataclass
class Life:
    """A life's loopback server with the MCP routes, recording what a real life would."""

    case: Path
    server: LoopbackServer
    world: World
    warm: WarmRelays | None
    trace: list[Mapping[str, Any]] = field(default_factory=list)
    relays: list[HttpRelay] = field(default_factory=list)

    def counts(self) -> Mapping[str, int]:
        return self.world.snapshot().counts

    def events(self, name: str) -> list[Mapping[str, Any]]:
        return [event for event in self.trace if event.get("event") == name]


@pytest.fixture(scope="module")
def warm() -> Iterator[WarmRelays]:
    """One warm relay server for the module (its start imports the SDK once)."""
    server = WarmRelays.spawned()
    yield server
    server.close()


@pytest.fixture
def life(tmp_path: Path, warm: WarmRelays) -> Iterator[Life]:
    World.create(tmp_path / "world")
    world = World(tmp_path / "world")
    trace: list[Mapping[str, Any]] = []
    relays: list[HttpRelay] = []

    def kill(pid: int) -> None:
        if relays:
            relays[0].kill(pid)
        else:
            kill_stdio_relay(pid)

    server = LoopbackServer(
        ScriptedModel([], log_path=tmp_path / "model.jsonl"),
        # The order service the mock create_order calls, as a life's mocked client reaches it.
        tools=MockToolbox(
            world, CONTRACTS, httpx.Client(transport=httpx.MockTransport(OrderAPI(world).handle))
        ),
        idempotency={name: c.idempotency for name, c in CONTRACTS.items()},
        on_edge=lambda boundary, call: trace.append({"event": "edge", "boundary": boundary, "call": call}),
        mcp=McpLife(
            tools=mcp_tools(CONTRACTS),
            keyed=frozenset(name for name, c in CONTRACTS.items() if takes_key(c)),
            take_fault=lambda call: take(tmp_path, call),
            trace=trace.append,
            kill_relay=kill,
        ),
    )
    server.start()
    here = Life(tmp_path, server, world, warm, trace, relays)
    yield here
    for relay in relays:
        relay.close()
    server.close()
    world.close()
    assert server.errors == []


async def _calls(session: Any, *calls: tuple[str, dict[str, Any], str]) -> list[Any]:
    """Each call's result, or the exception the client raised for it."""
    out: list[Any] = []
    for name, arguments, call_id in calls:
        try:
            out.append(
                await asyncio.wait_for(session.call_tool(name, arguments, meta={"tool_call_id": call_id}), 60)
            )
        except Exception as error:  # the client's own verdict on what came back
            out.append(error)
    return out


def _command(life: Life) -> list[str]:
    """The agent's ``{mcp_command}``: the launcher of a warm relay, or the cold relay."""
    if life.warm is None:
        return relay_command(life.server.base_url)
    return life.warm.command(["--life", life.server.base_url])


def _stdio(life: Life, *calls: tuple[str, dict[str, Any], str]) -> tuple[list[Any], list[int]]:
    """The calls over a stdio relay the client spawns (as an agent does); the relays' pids."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    command = _command(life)

    async def run() -> list[Any]:
        async with AsyncExitStack() as stack:
            read, write = await stack.enter_async_context(
                stdio_client(StdioServerParameters(command=command[0], args=command[1:]))
            )
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            return await _calls(session, *calls)

    results = asyncio.run(run())
    pids = sorted({int(event["pid"]) for event in life.events("fault") if "pid" in event})
    return results, pids


def _http(life: Life, *calls: tuple[str, dict[str, Any], str]) -> list[Any]:
    """The calls over the life's HTTP relay, each on a fresh connection (a client reconnects
    to a server that restarted)."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    relay = HttpRelay(life.server.base_url, life.case / "relay.stderr", life.trace.append, warm=life.warm)
    life.relays.append(relay)
    relay.start()

    async def run() -> list[Any]:
        out: list[Any] = []
        for call in calls:
            try:
                # Bounded: a port nobody serves any more holds a connection forever.
                async with asyncio.timeout(90), AsyncExitStack() as stack:
                    streams = await stack.enter_async_context(streamable_http_client(relay.url))
                    session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
                    await session.initialize()
                    out += await _calls(session, call)
            except TimeoutError as error:
                out.append(error)
        return out

    return asyncio.run(run())


def _edges(life: Life) -> list[tuple[str, str]]:
    return [(str(e["boundary"]), str(e["call"])) for e in life.events("edge")]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


@pytest.mark.parametrize("start", ["warm", "cold"])
def test_a_call_passes_running_effect_and_sent_in_order_and_tells_the_attribution(
    life: Life, start: str
) -> None:
    if start == "cold":
        life.warm = None
    (result,) = _stdio(life, ("send_email", EMAIL, "call_mail"))[0]
    assert not result.is_error and result.structured_content["ok"] is True
    assert _edges(life) == [
        ("after_running", "call_mail"),
        ("after_side_effect", "call_mail"),  # once: at /mcp/sent, the response written unread
    ]
    assert life.events("mcp_call") == [{"event": "mcp_call", "call": "call_mail", "tool": "send_email"}]
    assert life.counts()["emails"] == 1


def test_a_keyed_call_is_deduplicated_on_its_key(life: Life) -> None:
    order = {"item": "widget", "quantity": 2, "idempotency_key": "k-1"}
    first, again = _stdio(life, ("create_order", order, "call_order"), ("create_order", order, "call_order"))[
        0
    ]
    assert first.structured_content["ok"] and again.structured_content["ok"]
    assert life.counts()["orders"] == 1


def test_tool_server_died_kills_the_stdio_relay_after_the_effect(life: Life) -> None:
    arm(life.case, ToolSideFault("tool_server_died", "call_mail"))
    (result,), pids = _stdio(life, ("send_email", EMAIL, "call_mail"))
    assert isinstance(result, Exception)  # the server is gone: no answer, a broken connection
    assert life.counts()["emails"] == 1  # the effect happened
    [fault] = life.events("fault")
    assert (fault["fault"], fault["call"], fault["acted"]) == ("tool_server_died", "call_mail", True)
    # Gone within a bound, not at once: a killed process closes its files (the client sees
    # the broken pipe) before the kernel marks it a zombie, so the test can look in between.
    assert pids and _gone(pids[0])
    # Its one after_side_effect is passed at /mcp/end: no response will ever be written.
    assert _edges(life) == [("after_running", "call_mail"), ("after_side_effect", "call_mail")]


def test_tool_result_error_runs_nothing_and_answers_is_error(life: Life) -> None:
    arm(life.case, ToolSideFault("tool_result_error", "call_mail"))
    first, retry = _stdio(life, ("send_email", EMAIL, "call_mail"), ("send_email", EMAIL, "call_mail"))[0]
    assert first.is_error and "TOOL_ERROR" in first.content[0].text
    assert not retry.is_error  # taken once: the retry meets a healthy server
    assert life.counts()["emails"] == 1  # the retry's, not the failed call's
    assert [e["fault"] for e in life.events("fault")] == ["tool_result_error"]
    assert _edges(life)[0] == ("after_running", "call_mail")  # the retry's: the error passed none


def test_tool_result_malformed_acts_after_the_effect_and_the_client_refuses_it(life: Life) -> None:
    arm(life.case, ToolSideFault("tool_result_malformed", "call_mail"))
    (result,) = _stdio(life, ("send_email", EMAIL, "call_mail"))[0]
    assert isinstance(result, Exception)
    assert life.counts()["emails"] == 1
    assert [e["fault"] for e in life.events("fault")] == ["tool_result_malformed"]


@pytest.mark.parametrize("start", ["warm", "cold"])
def test_the_http_relay_dies_and_comes_back_on_the_same_port(life: Life, start: str) -> None:
    if start == "cold":
        life.warm = None
    arm(life.case, ToolSideFault("tool_server_died", "call_1"))
    died, after = _http(life, ("send_email", EMAIL, "call_1"), ("send_email", EMAIL, "call_2"))
    assert isinstance(died, Exception)
    assert not after.is_error  # a new connection to the same URL: a new relay answers
    starts = life.events("mcp_relay")
    assert len(starts) == 2 and starts[0]["url"] == starts[1]["url"] and starts[0]["pid"] != starts[1]["pid"]
    assert _gone(int(starts[0]["pid"])) and _alive(int(starts[1]["pid"]))  # _gone: see above
    [fault] = life.events("fault")
    assert fault["pid"] == starts[0]["pid"]
    assert life.counts()["emails"] == 2


def test_the_http_relay_drops_a_lost_response_after_the_effect(life: Life) -> None:
    arm(life.case, ToolSideFault("tool_response_lost", "call_1"))
    lost, after = _http(life, ("send_email", EMAIL, "call_1"), ("send_email", EMAIL, "call_2"))
    assert isinstance(lost, Exception)  # the connection closed under the response
    assert not after.is_error
    assert [e["fault"] for e in life.events("fault")] == ["tool_response_lost"]
    assert life.counts()["emails"] == 2
    assert _edges(life).count(("after_side_effect", "call_1")) == 1  # at /mcp/end, never sent
    assert len(life.events("mcp_relay")) == 1  # the same relay answered the next call


def test_an_http_call_passes_the_same_edges(life: Life) -> None:
    (result,) = _http(life, ("send_email", EMAIL, "call_1"))
    assert not result.is_error
    assert [b for b, _ in _edges(life)] == ["after_running", "after_side_effect"]
    assert os.path.exists(life.case / "relay.stderr")


# -- the launcher ({mcp_command}) and its warm relay: the agent's view of its child ----------

INITIALIZE = (
    b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": '
    b'"2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}\n'
)


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as listing:
            return [int(child) for child in listing.read().split()]
    except OSError:
        return []


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _launched(life: Life) -> tuple[subprocess.Popen[bytes], int]:
    """The launcher, spawned as an agent spawns its server and answering ``initialize``, and
    the pid of the relay serving it (the warm server's one new child)."""
    assert life.warm is not None
    before = set(_children(life.warm.pid))
    launcher = subprocess.Popen(_command(life), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert launcher.stdin is not None and launcher.stdout is not None
    launcher.stdin.write(INITIALIZE)
    launcher.stdin.flush()
    assert b'"id":1' in launcher.stdout.readline().replace(b" ", b"")
    [relay] = set(_children(life.warm.pid)) - before
    return launcher, relay


def test_a_killed_relay_is_end_of_file_to_the_agent_and_its_launcher_dies_killed(life: Life) -> None:
    launcher, relay = _launched(life)
    kill_stdio_relay(relay)  # tool_server_died
    assert launcher.stdout is not None and launcher.stdout.read() == b""  # no one else holds the pipe
    assert launcher.wait(10) == -signal.SIGKILL  # the server process the agent knows died killed
    assert _gone(relay)


def test_closing_the_launchers_stdin_ends_the_relay_and_the_launcher_exits_0(life: Life) -> None:
    launcher, relay = _launched(life)
    assert launcher.stdin is not None
    launcher.stdin.close()  # the agent's MCP client closes the session
    assert launcher.wait(10) == 0
    assert _gone(relay)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_a_launcher_the_agent_kills_takes_its_relay(life: Life, how: signal.Signals) -> None:
    launcher, relay = _launched(life)
    launcher.send_signal(how)
    launcher.wait(10)
    assert _gone(relay), "the relay outlived the launcher its agent killed"


def test_an_agent_killed_leaves_neither_its_launcher_nor_its_relay(life: Life) -> None:
    assert life.warm is not None
    before = set(_children(life.warm.pid))
    agent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)\n"
            "print(p.pid, flush=True)\n"
            "time.sleep(120)\n",
            *_command(life),
        ],
        stdout=subprocess.PIPE,
    )
    assert agent.stdout is not None
    launcher = int(agent.stdout.readline())
    deadline = time.monotonic() + 30
    while not set(_children(life.warm.pid)) - before and time.monotonic() < deadline:
        time.sleep(0.01)  # the relay is forked once the launcher asked for it
    [relay] = set(_children(life.warm.pid)) - before
    agent.kill()
    agent.wait()
    assert _gone(launcher) and _gone(relay)


def test_a_warm_server_that_dies_takes_its_relays(life: Life) -> None:
    """A life that dies takes its warm server (PR_SET_PDEATHSIG), which takes every relay."""
    own = WarmRelays.spawned()
    life.warm = own
    try:
        launcher, relay = _launched(life)
    finally:
        own.close()
    assert _gone(relay)
    assert launcher.wait(10) == -signal.SIGKILL  # its agent sees its server die


def test_a_launcher_run_outside_its_life_says_so_in_one_line(tmp_path: Path) -> None:
    # An {mcp_command} copied out of a case and run by hand: its life, and its server, are gone.
    gone = WarmRelays()
    command = gone.command(["--life", "http://127.0.0.1:9"])
    gone.close()
    ran = subprocess.run(command, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert ran.returncode == 1
    assert ran.stderr.count("\n") == 1 and gone.address in ran.stderr and "inside the life" in ran.stderr
