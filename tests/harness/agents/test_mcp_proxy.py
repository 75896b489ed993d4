"""Proxy mode: crashmatrix between an agent and a team's real MCP server
(harness.agents.mcp_upstream, the relay's upstream end).

Fast: the upstream's spec (placeholders, the relay's options and back), a server's JSON-RPC
error turned into an ``isError`` result. Slow: a real server (tests/mcp_servers.py) reached
over stdio and HTTP, listed and called, its effects its own."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from crashmatrix.harness.agents.mcp_upstream import Upstream, UpstreamSpec, connect
from crashmatrix.harness.errors import InputError
from tests.mcp_servers import NOTES, notes_over_http

# -- the spec (fast) -----------------------------------------------------------------------


def test_a_spec_is_a_command_or_a_url_never_both_nor_neither() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        UpstreamSpec()
    with pytest.raises(ValueError, match="exactly one"):
        UpstreamSpec(command=("srv",), url="http://127.0.0.1:1/mcp")


def test_placeholders_are_filled_in_the_command_cwd_env_and_url() -> None:
    spec = UpstreamSpec(
        command=("npx", "srv", "{workspace}", "{{literal}}"), cwd="{here}", env={"ROOT": "{workspace}/x"}
    )
    filled = spec.formatted({"workspace": "/case/ws", "here": "/team"})
    assert filled == UpstreamSpec(
        command=("npx", "srv", "/case/ws", "{literal}"), cwd="/team", env={"ROOT": "/case/ws/x"}
    )
    assert (
        UpstreamSpec(url="http://127.0.0.1:{port}/mcp").formatted({"port": "8"}).url
        == "http://127.0.0.1:8/mcp"
    )


@pytest.mark.parametrize(
    "spec",
    [
        UpstreamSpec(command=("npx", "-y", "pkg", "/a b/ws")),
        UpstreamSpec(command=("srv",), cwd="/team", env={"TOKEN": "t", "EMPTY": ""}),
        UpstreamSpec(url="https://mcp.example.test/mcp"),
    ],
    ids=["command", "cwd and env", "url"],
)
def test_the_relays_options_read_back_to_the_same_spec(spec: UpstreamSpec) -> None:
    flag, value = spec.relay_args()
    read = UpstreamSpec.from_relay_args(
        value if flag == "--upstream-command" else None, value if flag == "--upstream-url" else None
    )
    assert read == spec


def test_no_upstream_option_is_served_mode_and_a_bare_list_is_a_command() -> None:
    assert UpstreamSpec.from_relay_args(None, None) is None
    assert UpstreamSpec.from_relay_args('["srv", "x"]', None) == UpstreamSpec(command=("srv", "x"))


@pytest.mark.parametrize(
    ("command_json", "url", "says"),
    [
        ("[1, 2]", None, '--upstream-command: expected {"command": ["program", "arg", ...]'),
        ('{"command": []}', None, "--upstream-command: expected"),
        ('{"command": ["srv"], "env": {"A": 1}}', None, "--upstream-command: expected"),
        ("not json", None, "--upstream-command: not JSON ("),
        (None, "ftp://h/mcp", "--upstream-url ftp://h/mcp: expected an http:// or https:// URL"),
        ('["srv"]', "http://h/mcp", "give --upstream-command or --upstream-url, not both"),
    ],
)
def test_a_bad_relay_option_is_one_line(command_json: str | None, url: str | None, says: str) -> None:
    with pytest.raises(InputError) as caught:
        UpstreamSpec.from_relay_args(command_json, url)
    assert str(caught.value).startswith(says) and "\n" not in str(caught.value)


class _Refusing:
    """A client whose server answers every tools/call with a JSON-RPC error."""

    async def call_tool(self, name: str, arguments: Mapping[str, Any], meta: Any = None) -> Any:
        from mcp import MCPError

        raise MCPError(-32602, f"Invalid params for {name}")


def test_a_json_rpc_error_from_the_server_is_an_is_error_result_naming_it() -> None:
    upstream = Upstream(UpstreamSpec(command=("srv", "/ws")), _Refusing())  # type: ignore[arg-type]
    result = anyio.run(upstream.call_tool, "write_file", {"path": "a"}, None)
    assert result == {
        "content": [
            {
                "type": "text",
                "text": "the MCP server srv /ws answered write_file with error -32602: "
                "Invalid params for write_file",
            }
        ],
        "isError": True,
    }


# -- a real server (slow) ------------------------------------------------------------------


async def _session(spec: UpstreamSpec) -> tuple[list[str], dict[str, Any], dict[str, Any], dict[str, Any]]:
    async with connect(spec) as upstream:
        names = [tool["name"] for tool in await upstream.list_tools()]
        added = await upstream.call_tool(
            "append_note", {"name": "todo", "text": "buy milk"}, {"tool_call_id": "call_1"}
        )
        failed = await upstream.call_tool("fail_note", {"name": "todo"})
        unknown = await upstream.call_tool("no_such_tool", {})
    return names, added, failed, unknown


def _check(
    folder: Path, names: list[str], added: dict[str, Any], failed: dict[str, Any], unknown: dict[str, Any]
) -> None:
    assert names == ["read_note", "append_note", "fail_note"]
    assert added["isError"] is False and added["content"] == [{"type": "text", "text": "added to todo"}]
    assert json.loads(json.dumps(added)) == added  # plain JSON: what the relay posts to the life
    assert failed["isError"] is True and "cannot touch todo" in failed["content"][0]["text"]
    assert unknown["isError"] is True
    # The effect is the server's own: a file in its folder, written once.
    assert (folder / "todo.txt").read_text() == "buy milk\n"


@pytest.mark.slow
def test_a_stdio_server_is_started_in_its_cwd_with_its_env_listed_and_called(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    folder.mkdir()
    # cwd and env reach the server: its folder argument is relative, resolved in cwd.
    spec = UpstreamSpec(
        command=(
            sys.executable,
            "-c",
            "import os, sys; sys.argv[1] = os.environ['NOTES_DIR']; exec(open(sys.argv[2]).read())",
            "x",
            str(NOTES),
        ),
        cwd="{workspace}",
        env={"NOTES_DIR": "."},
    ).formatted({"workspace": str(folder)})
    _check(folder, *anyio.run(_session, spec))


@pytest.mark.slow
def test_an_http_server_is_reached_at_its_url(tmp_path: Path) -> None:
    with notes_over_http(tmp_path) as url:
        result = anyio.run(_session, UpstreamSpec(url=url))
    _check(tmp_path, *result)
