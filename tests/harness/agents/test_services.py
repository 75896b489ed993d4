"""The order and mail APIs served by the loopback server over real HTTP: the world counts
every effect, keys deduplicate, faults break the connection, and service requests pass the
crash edges of the tool call the model handed out."""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.agents.loopback import LoopbackServer, ServiceHandler
from crashmatrix.harness.core.script import Reply, Rule, When
from crashmatrix.harness.core.tools import ToolContext, ToolObservation
from crashmatrix.harness.errors import InputError
from crashmatrix.mock_tools import FaultSpec, MailAPI, OrderAPI, World
from crashmatrix.mock_tools.model import ScriptedModel

ORDER = {"item": "pen", "quantity": 2}
EMAIL = {"to": "ann@example.test", "subject": "Invoice", "body": "Attached."}
SESSION_LINE = b'{"type":"message"}\n'
RULES = [
    Rule(
        When(role="user", contains="two orders"),
        Reply(tool_calls=(("call_1", "create_order", ORDER), ("call_2", "create_order", ORDER))),
    ),
    Rule(When(role="user", contains="order"), Reply(tool_calls=(("call_1", "create_order", ORDER),))),
    Rule(When(role="user", contains="mail"), Reply(tool_calls=(("call_m", "send_email", EMAIL),))),
    Rule(When(role="tool"), Reply(content="done")),
]


@dataclass(frozen=True, slots=True)
class Service:
    """One mounted service as the parametrized tests see it."""

    name: str  # the LoopbackServer's name for it
    path: str
    payload: Mapping[str, Any]
    other_payload: Mapping[str, Any]
    table: str  # its count in the world snapshot
    tool: str
    prompt: str  # a user message that makes the model hand out a call of ``tool``
    call_id: str


ORDERS = Service(
    "orders", "/orders", ORDER, {**ORDER, "quantity": 3}, "orders", "create_order", "an order", "call_1"
)
MAIL = Service(
    "mail", "/emails", EMAIL, {**EMAIL, "subject": "Other"}, "emails", "send_email", "a mail", "call_m"
)
BOTH = pytest.mark.parametrize("svc", [ORDERS, MAIL], ids=["orders", "mail"])


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: Mapping[str, str]  # lower-case names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def _http(
    method: str, url: str, body: Mapping[str, Any] | None = None, headers: Mapping[str, str] | None = None
) -> Answer:
    """One request on its own connection. A connection closed without an answer raises
    ``http.client.RemoteDisconnected``."""
    parts = urllib.parse.urlsplit(url)
    assert parts.hostname is not None
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    data = None if body is None else json.dumps(body).encode()
    try:
        connection.request(
            method, target, body=data, headers={"Content-Type": "application/json", **(headers or {})}
        )
        response = connection.getresponse()
        return Answer(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        connection.close()


@dataclass
class Recorder:
    """What the server told its owner, in one ordered log: ``("request", route)`` and
    ``(boundary, tool_call_id)``; ``counts`` holds the world's counts at each edge.

    ``freeze`` stands in for the owner stopping the agent: the server calls the
    ``after_model_reply`` hook after the reply is written, so a client that goes on
    before ``settle()`` could overtake the edge."""

    world: World
    log: list[tuple[str, str]] = field(default_factory=list)
    counts: list[tuple[str, int, int]] = field(default_factory=list)
    frozen: threading.Lock = field(default_factory=threading.Lock)
    stopped: list[bool] = field(default_factory=list)  # per edge: was the agent stopped

    @contextlib.contextmanager
    def freeze(self) -> Iterator[None]:
        with self.frozen:
            yield

    def settle(self) -> None:
        """Wait until the edges of the last reply were recorded (the agent is resumed)."""
        with self.frozen:
            pass

    def edge(self, boundary: str, tool_call_id: str) -> None:
        self.log.append((boundary, tool_call_id))
        self.stopped.append(self.frozen.locked())
        counts = self.world.snapshot().counts
        self.counts.append((boundary, counts["orders"], counts["emails"]))

    def request(self, route: str) -> None:
        self.log.append(("request", route))

    @property
    def edges(self) -> list[tuple[str, str]]:
        return [entry for entry in self.log if entry[0] != "request"]

    @property
    def routes(self) -> list[str]:
        return [route for kind, route in self.log if kind == "request"]


def _world(tmp_path: Path, faults: Sequence[FaultSpec] = ()) -> World:
    root = tmp_path / "world"
    session = root / "workspace" / ".agent_state" / "session-demo.jsonl"
    world = World.create(root, session_path=session, faults=faults)
    session.parent.mkdir(parents=True)
    session.write_bytes(SESSION_LINE)
    return world


def _server(
    tmp_path: Path,
    world: World,
    recorder: Recorder,
    *,
    services: Mapping[str, ServiceHandler] | None = None,
    **options: Any,
) -> LoopbackServer:
    model = ScriptedModel(RULES, log_path=tmp_path / "requests.jsonl")
    return LoopbackServer(
        model,
        services=services if services is not None else {"orders": OrderAPI(world), "mail": MailAPI(world)},
        on_edge=recorder.edge,
        on_request=recorder.request,
        freeze=recorder.freeze,
        **options,
    )


def _chat(server: LoopbackServer, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    answer = _http("POST", f"{server.model_url}/chat/completions", {"messages": list(messages)})
    assert answer.status == 200, answer.body
    body: dict[str, Any] = answer.json()
    return body


def _ask(server: LoopbackServer, recorder: Recorder, prompt: str) -> list[dict[str, Any]]:
    """The conversation so far after the model answered ``prompt`` with tool calls."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    messages.append(_chat(server, messages)["choices"][0]["message"])
    recorder.settle()
    return messages


def _answer(messages: list[dict[str, Any]], *call_ids: str) -> list[dict[str, Any]]:
    return [*messages, *({"role": "tool", "tool_call_id": c, "content": '{"ok": true}'} for c in call_ids)]


def _url(server: LoopbackServer, svc: Service) -> str:
    base = server.orders_url if svc.name == "orders" else server.mail_url
    return f"{base}{svc.path}"


def _post(
    server: LoopbackServer,
    svc: Service,
    key: str | None,
    payload: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Answer:
    keyed = {"Idempotency-Key": key} if key is not None else {}
    return _http("POST", _url(server, svc), dict(payload or svc.payload), {**keyed, **(headers or {})})


def _count(world: World, svc: Service) -> int:
    return world.snapshot().counts[svc.table]


# -- one effect, counted ------------------------------------------------------------------------


@BOTH
@pytest.mark.parametrize("stoppable", [True, False])
def test_a_stoppable_agent_is_stopped_at_every_edge_so_a_killing_hook_leaves_it_no_moment_to_act(
    tmp_path: Path, svc: Service, stoppable: bool
) -> None:
    # The hook kills by ending the life, whose sockets close before the kernel SIGKILLs its
    # children: an agent left running sees its request fail in that window and writes
    # "uncertain" (the http agent's running_after_effect bug then passed, its late started
    # line hiding that the effect came first). Stopped, it dies where the case says.
    world = _world(tmp_path)
    recorder = Recorder(world)
    with _server(tmp_path, world, recorder, stoppable=stoppable) as server:
        _ask(server, recorder, svc.prompt)
        assert _post(server, svc, "k1").status == 201
    assert [boundary for boundary, _ in recorder.edges] == [
        "after_model_reply",
        "after_running",
        "after_side_effect",
    ]
    assert recorder.stopped == [stoppable] * 3


@BOTH
def test_a_request_lands_as_one_row_and_one_event_of_the_handed_out_call(
    tmp_path: Path, svc: Service
) -> None:
    world = _world(tmp_path)
    recorder = Recorder(world)
    with _server(tmp_path, world, recorder) as server:
        _ask(server, recorder, svc.prompt)
        answer = _post(server, svc, "k1", headers={"X-Execution-Id": "exec_1"})
    assert answer.status == 201
    assert answer.json()["idempotency_key"] == "k1"
    assert _count(world, svc) == 1
    [effect] = [e for e in world.events() if e.kind != "fault"]
    assert (effect.tool, effect.tool_call_id, effect.execution_id, effect.idempotency_key) == (
        svc.tool,
        svc.call_id,
        "exec_1",
        "k1",
    )
    assert effect.session_bytes == len(SESSION_LINE)
    assert recorder.edges == [
        ("after_model_reply", svc.call_id),
        ("after_running", svc.call_id),
        ("after_side_effect", svc.call_id),
    ]
    # after_running: nothing ran yet; after_side_effect: the effect is committed.
    own, other = (1, 2) if svc.name == "orders" else (2, 1)
    assert [counts[own] for counts in recorder.counts] == [0, 0, 1]
    assert [counts[other] for counts in recorder.counts] == [0, 0, 0]


@BOTH
def test_a_retry_with_the_same_key_is_replayed_and_says_so(tmp_path: Path, svc: Service) -> None:
    world = _world(tmp_path)
    with _server(tmp_path, world, Recorder(world)) as server:
        first = _post(server, svc, "k1")
        again = _post(server, svc, "k1")
    assert (first.status, again.status) == (201, 200)
    assert again.headers.get("idempotent-replayed") == "true"
    assert "idempotent-replayed" not in first.headers
    assert again.body == first.body
    assert _count(world, svc) == 1


@BOTH
def test_a_retry_without_a_key_is_a_second_row(tmp_path: Path, svc: Service) -> None:
    world = _world(tmp_path)
    with _server(tmp_path, world, Recorder(world)) as server:
        statuses = [_post(server, svc, None).status for _ in range(2)]
    assert statuses == [201, 201]
    assert _count(world, svc) == 2


@BOTH
def test_the_same_key_with_another_payload_is_422(tmp_path: Path, svc: Service) -> None:
    world = _world(tmp_path)
    with _server(tmp_path, world, Recorder(world)) as server:
        _post(server, svc, "k1")
        reused = _post(server, svc, "k1", svc.other_payload)
    assert (reused.status, reused.json()["error"]["code"]) == (422, "idempotency_key_reused")
    assert _count(world, svc) == 1


@BOTH
def test_the_same_key_while_the_first_is_in_flight_is_409(tmp_path: Path, svc: Service) -> None:
    world = _world(tmp_path)
    claimed, release = threading.Event(), threading.Event()

    def hold(_key: str) -> None:
        claimed.set()
        release.wait(10)

    handler: ServiceHandler = (
        OrderAPI(world, on_in_flight=hold) if svc.name == "orders" else MailAPI(world, on_in_flight=hold)
    )
    server = _server(tmp_path, world, Recorder(world), services={svc.name: handler})
    with server, ThreadPoolExecutor(1) as pool:
        first = pool.submit(_post, server, svc, "k1")
        assert claimed.wait(10)
        second = _post(server, svc, "k1")
        release.set()
        assert (second.status, second.json()["error"]["code"]) == (409, "request_in_progress")
        assert first.result().status == 201
    assert _count(world, svc) == 1


@BOTH
def test_a_lookup_by_key_forwards_the_query_and_passes_no_edge(tmp_path: Path, svc: Service) -> None:
    world = _world(tmp_path)
    recorder = Recorder(world)
    with _server(tmp_path, world, recorder) as server:
        _ask(server, recorder, svc.prompt)
        created = _post(server, svc, "k 1/&").json()  # a key that needs quoting in a query
        edges = list(recorder.edges)
        found = _http("GET", f"{_url(server, svc)}?{urllib.parse.urlencode({'idempotency_key': 'k 1/&'})}")
        missing = _http("GET", f"{_url(server, svc)}?idempotency_key=k2")
    assert (found.status, found.json()) == (200, created)
    assert (missing.status, missing.json()["error"]["code"]) == (404, "not_found")
    assert recorder.edges == edges
    assert recorder.routes[-2:] == [svc.name, svc.name]


def test_order_and_mail_keys_do_not_collide(tmp_path: Path) -> None:
    world = _world(tmp_path)
    with _server(tmp_path, world, Recorder(world)) as server:
        order = _post(server, ORDERS, "k1")
        email = _post(server, MAIL, "k1")
        email_again = _post(server, MAIL, "k1")
    # One namespace would have made the email a 422 (another payload for the same key).
    assert (order.status, email.status, email_again.status) == (201, 201, 200)
    assert email_again.json()["id"] == email.json()["id"] == "msg_000001"
    assert (_count(world, ORDERS), _count(world, MAIL)) == (1, 1)


# -- faults over real HTTP ----------------------------------------------------------------------


def test_response_lost_sends_the_email_and_closes_the_connection_unanswered(tmp_path: Path) -> None:
    world = _world(tmp_path, [FaultSpec("send_email", "response_lost")])
    recorder = Recorder(world)
    with _server(tmp_path, world, recorder) as server:
        _ask(server, recorder, MAIL.prompt)
        with pytest.raises(http.client.RemoteDisconnected):
            _post(server, MAIL, "k1")
        assert _count(world, MAIL) == 1
        retry = _post(server, MAIL, "k1")
    assert (retry.status, retry.headers.get("idempotent-replayed")) == (200, "true")
    assert _count(world, MAIL) == 1
    assert [e.kind for e in world.events()] == ["fault", "email"]
    # The lost answer still passed after_side_effect: the email was committed.
    assert recorder.edges[1:3] == [("after_running", "call_m"), ("after_side_effect", "call_m")]


def test_timeout_before_commits_nothing_and_closes_the_connection_unanswered(tmp_path: Path) -> None:
    world = _world(tmp_path, [FaultSpec("create_order", "timeout_before")])
    recorder = Recorder(world)
    with _server(tmp_path, world, recorder) as server:
        _ask(server, recorder, ORDERS.prompt)
        with pytest.raises(http.client.RemoteDisconnected):
            _post(server, ORDERS, "k1")
        assert _count(world, ORDERS) == 0
        # The request "never reached the service": after_running, and no after_side_effect.
        assert recorder.edges[1:] == [("after_running", "call_1")]
        retry = _post(server, ORDERS, "k1")
    assert retry.status == 201  # the retry is a first request
    assert _count(world, ORDERS) == 1


def test_permission_denied_bound_to_the_attributed_call_is_403(tmp_path: Path) -> None:
    # Bound to call_1: it fires only if the server told the service whose request this is.
    world = _world(tmp_path, [FaultSpec("create_order", "permission_denied", tool_call_id="call_1")])
    recorder = Recorder(world)
    with _server(tmp_path, world, recorder) as server:
        _ask(server, recorder, ORDERS.prompt)
        denied = _post(server, ORDERS, "k1")
    assert (denied.status, denied.json()["error"]["code"]) == (403, "permission_denied")
    assert _count(world, ORDERS) == 0
    [fault] = world.events("fault")
    assert (fault.tool, fault.tool_call_id) == ("create_order", "call_1")


def test_a_lookup_does_not_consume_a_fault_armed_for_the_sending_tool(tmp_path: Path) -> None:
    world = _world(tmp_path, [FaultSpec("create_order", "permission_denied")])
    with _server(tmp_path, world, Recorder(world)) as server:
        lookup = _http("GET", f"{server.orders_url}/orders?idempotency_key=k1")
        create = _post(server, ORDERS, "k1")
    assert (lookup.status, create.status) == (404, 403)


# -- attribution and the owner's callbacks -------------------------------------------------------


def test_requests_go_to_the_oldest_unanswered_call_then_the_latest(tmp_path: Path) -> None:
    world = _world(tmp_path)
    recorder = Recorder(world)
    with _server(tmp_path, world, recorder) as server:
        messages = _ask(server, recorder, "two orders please")
        _post(server, ORDERS, None)  # call_1 is being executed
        _post(server, ORDERS, None)  # ... and retried, still unanswered
        _chat(server, _answer(messages, "call_1"))
        _post(server, ORDERS, None)  # call_1 answered: call_2 is next
        _chat(server, _answer(messages, "call_1", "call_2"))
        _post(server, ORDERS, None)  # all answered: a retry of the latest
        _post(server, ORDERS, None, headers={"X-Tool-Call-Id": "call_9"})  # the agent says whose
    expected = ["call_1", "call_1", "call_2", "call_2", "call_9"]
    assert [e.tool_call_id for e in world.events("order")] == expected
    assert [call for boundary, call in recorder.edges if boundary == "after_running"] == expected


def test_a_request_with_no_call_of_its_tool_passes_no_edge(tmp_path: Path) -> None:
    world = _world(tmp_path)
    recorder = Recorder(world)
    with _server(tmp_path, world, recorder) as server:
        _ask(server, recorder, MAIL.prompt)  # hands out a send_email call, none of create_order
        created = _post(server, ORDERS, "k1")
    assert created.status == 201
    assert recorder.edges == [("after_model_reply", "call_m")]
    [order] = world.events("order")
    assert (order.tool, order.tool_call_id) == ("create_order", None)


def test_service_tools_names_the_tool_a_service_stands_for(tmp_path: Path) -> None:
    world = _world(tmp_path)
    recorder = Recorder(world)
    with _server(tmp_path, world, recorder, service_tools={"mail": "create_order"}) as server:
        _ask(server, recorder, ORDERS.prompt)
        _post(server, MAIL, None)
    assert recorder.edges[1:] == [("after_running", "call_1"), ("after_side_effect", "call_1")]
    [email] = world.events("email")
    assert (email.tool, email.tool_call_id) == ("create_order", "call_1")


class _Tools:
    def execute(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolObservation:
        return ToolObservation(ok=True, data={})


def test_on_request_is_told_of_every_request_before_anything_happens(tmp_path: Path) -> None:
    world = _world(tmp_path)
    recorder = Recorder(world)
    with _server(tmp_path, world, recorder, tools=_Tools()) as server:
        _ask(server, recorder, ORDERS.prompt)
        _http("POST", f"{server.tools_url}/create_order", {}, {"X-Tool-Call-Id": "call_1"})
        _post(server, ORDERS, "k1")
        _post(server, MAIL, "k1")
        _http("GET", f"{server.mail_url}/emails?idempotency_key=k1")
        unknown = _http("GET", f"{server.base_url}/nowhere")
    assert unknown.status == 404
    assert recorder.log == [
        ("request", "chat"),
        ("after_model_reply", "call_1"),
        ("request", "tool:create_order"),
        ("after_running", "call_1"),
        ("after_side_effect", "call_1"),
        ("request", "orders"),
        ("after_running", "call_1"),
        ("after_side_effect", "call_1"),
        ("request", "mail"),  # no send_email call was handed out: no edges
        ("request", "mail"),
        ("request", "other"),
    ]


def test_before_tool_runs_before_each_service_request_so_the_event_measures_the_synced_session(
    tmp_path: Path,
) -> None:
    world = _world(tmp_path)
    assert world.session_path is not None
    session = world.session_path
    synced: list[int] = []

    def sync() -> None:
        # What the owner does: bring the session copy up to date before the world measures it.
        with session.open("ab") as out:
            out.write(SESSION_LINE)
        synced.append(session.stat().st_size)

    with _server(tmp_path, world, Recorder(world), before_tool=sync) as server:
        _post(server, ORDERS, "k1")
        _post(server, MAIL, None)
        _http("GET", f"{server.orders_url}/orders?idempotency_key=k1")
    assert synced == [2 * len(SESSION_LINE), 3 * len(SESSION_LINE), 4 * len(SESSION_LINE)]
    assert [e.session_bytes for e in world.events()] == synced[:2]


def test_a_service_that_is_not_mounted_is_404(tmp_path: Path) -> None:
    world = _world(tmp_path)
    recorder = Recorder(world)
    with _server(tmp_path, world, recorder, services={"orders": OrderAPI(world)}) as server:
        answer = _post(server, MAIL, "k1")
    assert answer.status == 404
    assert recorder.routes == ["mail"]
    assert _count(world, MAIL) == 0


def test_an_unknown_service_name_is_refused_with_the_names_it_knows(tmp_path: Path) -> None:
    world = _world(tmp_path)
    with pytest.raises(InputError, match=r"'billing'.*'orders' or 'mail'"):
        _server(tmp_path, world, Recorder(world), services={"billing": OrderAPI(world)})


def test_service_urls_are_the_servers_own_base(tmp_path: Path) -> None:
    world = _world(tmp_path)
    server = _server(tmp_path, world, Recorder(world))
    try:
        assert server.orders_url == server.mail_url == server.base_url
        assert server.base_url.startswith("http://127.0.0.1:")
    finally:
        server.close()
