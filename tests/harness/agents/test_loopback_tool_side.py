"""Tool-side faults on the loopback server's tools and services routes (issue 32): a kind-2 or
kind-3 agent's own HTTP client sees what a real one sees when the service dies mid-call
(the connection closed, no response), the response is cut off, a 503 comes back before
anything ran, or a 2xx body is cut in half -- and the effect is in the world all the same."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from crashmatrix.harness.agents.loopback import LoopbackServer
from crashmatrix.harness.core.script import Reply, Rule, When
from crashmatrix.mock_tools import MailAPI, MockToolbox, World, catalogue
from crashmatrix.mock_tools.calls import ToolSide
from crashmatrix.mock_tools.model import ScriptedModel
from tests.tls import CONTEXT

EMAIL = {"to": "ann@example.test", "subject": "Invoice", "body": "Attached."}
RULES = [Rule(When(role="user", contains="mail"), Reply(tool_calls=(("call_m", "send_email", EMAIL),)))]


class Armed:
    """One fault armed for ``call_m``, taken once; the trace the server writes, in order."""

    def __init__(self, kind: str) -> None:
        self.kind: str | None = kind
        self.trace: list[tuple[str, str, str]] = []

    def side(self) -> ToolSide:
        def reach(call_id: str, tool: str) -> str | None:
            self.trace.append(("reach", call_id, tool))
            kind, self.kind = (self.kind, None) if call_id == "call_m" else (None, self.kind)
            return kind

        def acted(kind: str, call_id: str, detail: str) -> None:
            self.trace.append(("acted", call_id, kind))

        def saw(call_id: str, tool: str) -> None:
            self.trace.append(("saw", call_id, tool))

        return ToolSide(reach, acted, saw)


@pytest.fixture
def world(tmp_path: Path) -> World:
    root = tmp_path / "world"
    session = root / "workspace" / ".agent_state" / "session-case.jsonl"
    created = World.create(root, session_path=session, files={})
    session.parent.mkdir(parents=True)
    session.write_bytes(b'{"type":"message"}\n')
    return created


def _server(world: World, armed: Armed) -> LoopbackServer:
    model = ScriptedModel(RULES)
    with httpx.Client(verify=CONTEXT) as http:
        toolbox = MockToolbox(world, catalogue(), http)
    return LoopbackServer(
        model,
        tools=toolbox,
        services={"mail": MailAPI(world)},
        on_edge=lambda boundary, call_id: None,
        tool_side=armed.side(),
    )


@pytest.fixture(params=["tools", "service"])
def route(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _send(server: LoopbackServer, route: str) -> tuple[int, bytes]:
    """POST the email as the route wants it, on a connection of its own; raises what
    ``http.client`` raises for a broken answer."""
    path = "/tools/send_email" if route == "tools" else "/emails"
    connection = http.client.HTTPConnection("127.0.0.1", int(server.base_url.rsplit(":", 1)[1]), timeout=10)
    try:
        connection.request(
            "POST",
            path,
            body=json.dumps(EMAIL),
            headers={"X-Tool-Call-Id": "call_m", "Content-Type": "application/json"},
        )
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _emails(world: World) -> int:
    return world.snapshot().counts["emails"]


def test_a_service_that_dies_after_the_effect_closes_the_connection_without_a_response(
    world: World, route: str
) -> None:
    armed = Armed("tool_server_died")
    with _server(world, armed) as server:
        with pytest.raises(http.client.RemoteDisconnected):
            _send(server, route)
        assert _emails(world) == 1
        assert _send(server, route)[0] in (200, 201)  # restarted: the next request is served
    assert _emails(world) == 2
    assert armed.trace[:2] == [("reach", "call_m", "send_email"), ("acted", "call_m", "tool_server_died")]


def test_a_lost_response_is_cut_off_after_its_headers(world: World, route: str) -> None:
    with _server(world, Armed("tool_response_lost")) as server, pytest.raises(http.client.IncompleteRead):
        _send(server, route)
    assert _emails(world) == 1


def test_a_malformed_answer_is_a_2xx_whose_body_does_not_parse(world: World, route: str) -> None:
    with _server(world, Armed("tool_result_malformed")) as server:
        status, body = _send(server, route)
    assert 200 <= status < 300 and body
    with pytest.raises(ValueError):
        json.loads(body)
    assert _emails(world) == 1


def test_an_error_result_is_a_503_before_anything_ran(world: World, route: str) -> None:
    armed = Armed("tool_result_error")
    with _server(world, armed) as server:
        status, body = _send(server, route)
    assert status == 503 and "restarting" in body.decode()
    assert _emails(world) == 0
    assert armed.trace == [("reach", "call_m", "send_email"), ("acted", "call_m", "tool_result_error")]


def test_a_lookup_after_the_fault_is_seen_and_takes_no_fault(world: World) -> None:
    armed = Armed("tool_server_died")
    with _server(world, armed) as server:
        armed.kind = "tool_server_died"  # still armed: a lookup must not take it
        with httpx.Client(verify=CONTEXT) as client:
            answer: Any = client.get(
                f"{server.mail_url}/emails",
                params={"idempotency_key": "k"},
                headers={"X-Tool-Call-Id": "call_m"},
            )
        assert answer.status_code == 404
    assert armed.trace == [("saw", "call_m", "GET /emails")]
    assert armed.kind == "tool_server_died"
