"""What the MCP relay costs (issues 28, 31): its start, cold and warm, over stdio and streamable
HTTP, and the time one tool call takes through it against the same call without MCP. Prints
figures, asserts nothing.

    python benchmarks/mcp_relay.py [--starts 5] [--calls 30]

* close: a stdio client's close, which waits for the relay to exit;
* start: from spawning the relay (stdio: the client spawns it, as an agent does; HTTP: the
  life starts it on its socket) until the client's ``initialize`` has its answer. Cold: a new
  interpreter imports the ``mcp`` SDK (``crashmatrix mcp-serve``, what every relay was before
  issue 31). Warm: the client spawns the launcher (``{mcp_command}``, stdlib only), whose relay
  is forked by a warm server (``harness.agents.mcp_warm``; a life forks its server from the
  fork server, with the SDK preloaded, here it is spawned once: ``warm server start``, from
  spawning it until its first relay answered ``initialize``, the SDK's import included);
* per call: ``send_email`` through the official ``mcp`` client and the relay (each call its
  four round trips to the life: begin, execute, end, sent), against the same mock tool
  through the loopback server's plain ``POST /tools/<name>`` (one round trip) and in process.

The load average is printed before and after: the machine is shared, and a figure taken with
other work on its cores says so.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx

from crashmatrix.harness.agents.loopback import LoopbackServer, McpLife
from crashmatrix.harness.agents.mcp_relay import HttpRelay, relay_command
from crashmatrix.harness.agents.mcp_tools import mcp_tools
from crashmatrix.harness.agents.mcp_warm import WarmRelays
from crashmatrix.harness.core.tools import ToolContext
from crashmatrix.mock_tools.model import ScriptedModel
from crashmatrix.mock_tools.registry import catalogue
from crashmatrix.mock_tools.toolbox import MockToolbox
from crashmatrix.mock_tools.world import World

EMAIL = {"to": "a@example.com", "subject": "s", "body": "b"}


def _life(folder: Path) -> tuple[LoopbackServer, MockToolbox]:
    contracts = {name: c for name, c in catalogue([]).items() if name == "send_email"}
    World.create(folder / "world")
    toolbox = MockToolbox(World(folder / "world"), contracts, httpx.Client())
    server = LoopbackServer(
        ScriptedModel([], log_path=folder / "model.jsonl"),
        tools=toolbox,
        on_edge=lambda boundary, call: None,
        mcp=McpLife(
            tools=mcp_tools(contracts),
            keyed=frozenset(),
            take_fault=lambda call: None,
            trace=lambda event: None,
            kill_relay=lambda pid: None,
        ),
    )
    server.start()
    return server, toolbox


async def _session(
    stack: AsyncExitStack, server: LoopbackServer, url: str, warm: WarmRelays | None = None
) -> Any:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if url:
        streams = await stack.enter_async_context(streamable_http_client(url))
    else:
        command = (
            relay_command(server.base_url) if warm is None else warm.command(["--life", server.base_url])
        )
        params = StdioServerParameters(command=command[0], args=command[1:])
        streams = await stack.enter_async_context(stdio_client(params))
    session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
    await session.initialize()
    return session


async def _timed(step: Callable[[], Awaitable[Any]], times: int) -> list[float]:
    out = []
    for _ in range(times):
        started = time.perf_counter()
        await step()
        out.append(time.perf_counter() - started)
    return out


def _line(label: str, seconds: list[float]) -> str:
    return (
        f"  {label:<34} median {statistics.median(seconds) * 1000:8.1f} ms   "
        f"min {min(seconds) * 1000:8.1f}   max {max(seconds) * 1000:8.1f}   (n={len(seconds)})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--starts", type=int, default=5, help="relay starts measured per transport")
    parser.add_argument("--calls", type=int, default=30, help="tool calls measured per path")
    args = parser.parse_args(argv)
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    folder = Path(tempfile.mkdtemp(prefix="crashmatrix-mcp-bench-"))
    server, toolbox = _life(folder)
    starts: dict[str, list[float]] = {
        "stdio, cold": [],
        "http, cold": [],
        "stdio, warm": [],
        "http, warm": [],
        "warm server start (SDK imported)": [],
    }
    closes: dict[str, list[float]] = {"cold": [], "warm": []}
    calls: dict[str, list[float]] = {}

    async def measure() -> None:
        for _ in range(args.starts):
            started = time.perf_counter()
            async with AsyncExitStack() as stack:
                await _session(stack, server, "")
                starts["stdio, cold"].append(time.perf_counter() - started)
                closing = time.perf_counter()
            closes["cold"].append(time.perf_counter() - closing)
            relay = HttpRelay(server.base_url, folder / "relay.stderr", lambda event: None)
            started = time.perf_counter()
            relay.start()
            try:
                async with AsyncExitStack() as stack:
                    await _session(stack, server, relay.url)
                    starts["http, cold"].append(time.perf_counter() - started)
            finally:
                relay.close()
        for number in range(args.starts):
            # A new warm server each round for its own start; then its relays, warm.
            started = time.perf_counter()
            warm = WarmRelays.spawned()
            try:
                async with AsyncExitStack() as stack:
                    await _session(stack, server, "", warm)
                starts["warm server start (SDK imported)"].append(time.perf_counter() - started)
                for _ in range(1 if number else 3):
                    started = time.perf_counter()
                    async with AsyncExitStack() as stack:
                        await _session(stack, server, "", warm)
                        starts["stdio, warm"].append(time.perf_counter() - started)
                        closing = time.perf_counter()
                    closes["warm"].append(time.perf_counter() - closing)
                relay = HttpRelay(server.base_url, folder / "relay.stderr", lambda event: None, warm=warm)
                started = time.perf_counter()
                relay.start()
                try:
                    async with AsyncExitStack() as stack:
                        await _session(stack, server, relay.url)
                        starts["http, warm"].append(time.perf_counter() - started)
                finally:
                    relay.close()
            finally:
                warm.close()
        async with AsyncExitStack() as stack:
            session = await _session(stack, server, "")
            calls["MCP, stdio relay"] = await _timed(
                lambda: session.call_tool("send_email", EMAIL), args.calls
            )
        warm = WarmRelays.spawned()
        try:
            async with AsyncExitStack() as stack:
                session = await _session(stack, server, "", warm)
                calls["MCP, stdio relay, warm"] = await _timed(
                    lambda: session.call_tool("send_email", EMAIL), args.calls
                )
        finally:
            warm.close()
        relay = HttpRelay(server.base_url, folder / "relay.stderr", lambda event: None)
        relay.start()
        try:
            async with AsyncExitStack() as stack:
                session = await _session(stack, server, relay.url)
                calls["MCP, HTTP relay"] = await _timed(
                    lambda: session.call_tool("send_email", EMAIL), args.calls
                )
        finally:
            relay.close()

    asyncio.run(measure())
    with httpx.Client() as client:
        plain = []
        for number in range(args.calls):
            started = time.perf_counter()
            client.post(
                f"{server.tools_url}/send_email", json=EMAIL, headers={"X-Tool-Call-Id": f"c{number}"}
            )
            plain.append(time.perf_counter() - started)
        calls["loopback POST /tools (no MCP)"] = plain
    inside = []
    for number in range(args.calls):
        started = time.perf_counter()
        toolbox.execute("send_email", EMAIL, ToolContext(f"d{number}", f"d{number}:exec", "", ""))
        inside.append(time.perf_counter() - started)
    calls["in process (MockToolbox)"] = inside
    server.close()
    print("relay start (spawn to initialize answered):")
    for transport, seconds in starts.items():
        print(_line(transport, seconds))
    for kind, seconds in closes.items():
        print(_line(f"stdio, {kind}: close (waits for its exit)", seconds))
    print("one send_email call:")
    for label, seconds in calls.items():
        print(_line(label, seconds))
    mcp = statistics.median(calls["MCP, stdio relay"]) - statistics.median(
        calls["loopback POST /tools (no MCP)"]
    )
    print(f"MCP overhead per call over the plain loopback route (stdio): {mcp * 1000:.1f} ms")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
