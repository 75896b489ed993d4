"""The mail API: one email per Idempotency-Key, one outbox row + one event per email, the
order API's faults, and keys of its own (never the order API's)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import respx

from crashmatrix.mock_tools import BASE_URL, EMAILS_PATH, FaultSpec, MailAPI, OrderAPI, World
from crashmatrix.mock_tools.mail_api import MAIL_BASE_URL, MAIL_HOST
from tests.tls import CONTEXT

EMAIL = {"to": "ann@example.test", "subject": "Invoice", "body": "Attached."}
URL = f"{MAIL_BASE_URL}{EMAILS_PATH}"


def _post(client: httpx.Client, key: str | None, body: object = EMAIL) -> httpx.Response:
    headers = {"X-Tool-Call-Id": "call_1", "X-Execution-Id": "exec_1"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post(URL, json=body, headers=headers)


def _mocked(world: World, service: MailAPI | None = None) -> tuple[respx.MockRouter, MailAPI]:
    service = service or MailAPI(world)
    router = respx.mock(assert_all_called=False, assert_all_mocked=True)
    router.route(host=MAIL_HOST).mock(side_effect=service.handle)
    return router, service


@pytest.fixture
def api(world: World) -> Iterator[tuple[MailAPI, httpx.Client]]:
    router, service = _mocked(world)
    with router, httpx.Client(verify=CONTEXT) as client:
        yield service, client


def _outbox(world: World) -> list[tuple[object, ...]]:
    rows = world.read().execute(
        "SELECT to_addr, subject, body, idempotency_key, tool_call_id, seq FROM outbox ORDER BY id"
    )
    return [tuple(row) for row in rows]


def test_an_email_is_one_outbox_row_and_one_event_committed_together(
    world: World, api: tuple[MailAPI, httpx.Client]
) -> None:
    _, client = api
    response = _post(client, "k1")
    assert response.status_code == 201
    assert response.json() == {
        "id": "msg_000001",
        "to": EMAIL["to"],
        "subject": EMAIL["subject"],
        "status": "sent",
        "idempotency_key": "k1",
    }
    [event] = world.events()
    assert (event.kind, event.tool, event.tool_call_id, event.execution_id, event.idempotency_key) == (
        "email",
        "send_email",
        "call_1",
        "exec_1",
        "k1",
    )
    assert event.detail == {"to": EMAIL["to"], "subject": EMAIL["subject"]}
    # The session file's size at the moment of the effect (the conftest writes one line).
    assert event.session_bytes == world.session_bytes() > 0
    assert _outbox(world) == [(EMAIL["to"], EMAIL["subject"], EMAIL["body"], "k1", "call_1", event.seq)]


def test_the_tool_name_header_names_the_events_tool(world: World, api: tuple[MailAPI, httpx.Client]) -> None:
    _, client = api
    client.post(URL, json=EMAIL, headers={"X-Tool-Name": "notify_customer"})
    assert [(e.tool, e.tool_call_id) for e in world.events("email")] == [("notify_customer", None)]


def test_replay_returns_the_stored_bytes_and_sends_nothing_more(
    world: World, api: tuple[MailAPI, httpx.Client]
) -> None:
    _, client = api
    first = _post(client, "k1")
    again = _post(client, "k1")
    assert (again.status_code, again.headers["Idempotent-Replayed"]) == (200, "true")
    assert again.content == first.content
    assert "Idempotent-Replayed" not in first.headers
    assert world.snapshot().counts["emails"] == 1
    assert len(world.events("email")) == 1


def test_without_a_key_every_post_is_one_more_email(world: World, api: tuple[MailAPI, httpx.Client]) -> None:
    _, client = api
    ids = [_post(client, None).json()["id"] for _ in range(3)]
    assert ids == ["msg_000001", "msg_000002", "msg_000003"]
    assert world.snapshot().counts["emails"] == 3


def test_the_same_key_with_another_email_is_422_and_sends_nothing(
    world: World, api: tuple[MailAPI, httpx.Client]
) -> None:
    _, client = api
    _post(client, "k1")
    response = _post(client, "k1", {**EMAIL, "subject": "Reminder"})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "idempotency_key_reused"
    assert world.snapshot().counts["emails"] == 1


@pytest.mark.parametrize(
    "body",
    [
        {"to": "a@b.test", "subject": "s"},
        {"to": "a@b.test", "subject": "s", "body": 3},
        ["to", "subject", "body"],
        None,
    ],
    ids=["missing_field", "non_string", "not_an_object", "null"],
)
def test_a_body_that_is_not_three_strings_is_400_invalid_body(
    world: World, api: tuple[MailAPI, httpx.Client], body: object
) -> None:
    _, client = api
    response = _post(client, "k1", body)
    assert (response.status_code, response.json()["error"]["code"]) == (400, "invalid_body")
    assert world.snapshot().counts["emails"] == 0
    # Nothing was claimed: the key is still free for a valid email.
    assert _post(client, "k1").status_code == 201


def test_lookup_by_key_finds_the_email_or_404(api: tuple[MailAPI, httpx.Client]) -> None:
    _, client = api
    sent = _post(client, "k1").json()
    _post(client, None)  # an unkeyed email is not found by any key
    found = client.get(URL, params={"idempotency_key": "k1"})
    assert (found.status_code, found.json()) == (200, sent)
    missing = client.get(URL, params={"idempotency_key": "k2"})
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")
    assert client.get(URL).status_code == 400


def test_the_same_key_while_the_first_is_in_flight_is_409(
    world: World, api: tuple[MailAPI, httpx.Client]
) -> None:
    service, client = api
    claimed, release = threading.Event(), threading.Event()

    def hold(_key: str) -> None:
        claimed.set()
        release.wait()

    service.on_in_flight = hold
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(_post, client, "k1")
        assert claimed.wait(10)
        second = _post(client, "k1")
        release.set()
        assert (second.status_code, second.json()["error"]["code"]) == (409, "request_in_progress")
        assert first.result().status_code == 201
    assert world.snapshot().counts["emails"] == 1


def test_an_ordinary_error_in_flight_releases_the_key(
    world: World, api: tuple[MailAPI, httpx.Client]
) -> None:
    service, client = api

    def boom(_key: str) -> None:
        raise RuntimeError("service bug")

    service.on_in_flight = boom
    with pytest.raises(RuntimeError):
        _post(client, "k1")
    service.on_in_flight = None
    assert _post(client, "k1").status_code == 201
    assert world.snapshot().counts["emails"] == 1


def test_timeout_before_raises_connect_timeout_and_sends_nothing(tmp_path: Path) -> None:
    world = World.create(tmp_path / "w", faults=[FaultSpec("send_email", "timeout_before")])
    router, _ = _mocked(world)
    with router, httpx.Client(verify=CONTEXT) as client:
        with pytest.raises(httpx.ConnectTimeout):
            _post(client, "k1")
        assert world.snapshot().counts["emails"] == 0
        assert _post(client, "k1").status_code == 201  # the retry is a first request
    assert [e.kind for e in world.events()] == ["fault", "email"]


def test_response_lost_sends_the_email_then_raises_read_timeout(tmp_path: Path) -> None:
    world = World.create(tmp_path / "w", faults=[FaultSpec("send_email", "response_lost")])
    router, _ = _mocked(world)
    with router, httpx.Client(verify=CONTEXT) as client:
        with pytest.raises(httpx.ReadTimeout):
            _post(client, "k1")
        assert world.snapshot().counts["emails"] == 1
        again = _post(client, "k1")
    assert (again.status_code, again.headers["Idempotent-Replayed"]) == (200, "true")
    assert world.snapshot().counts["emails"] == 1


def test_permission_denied_is_403_and_sends_nothing(tmp_path: Path) -> None:
    world = World.create(tmp_path / "w", faults=[FaultSpec("send_email", "permission_denied")])
    router, _ = _mocked(world)
    with router, httpx.Client(verify=CONTEXT) as client:
        response = _post(client, "k1")
    assert (response.status_code, response.json()["error"]["code"]) == (403, "permission_denied")
    assert world.snapshot().counts["emails"] == 0


def test_a_lookup_does_not_consume_a_fault_armed_for_sending(tmp_path: Path) -> None:
    world = World.create(tmp_path / "w", faults=[FaultSpec("send_email", "permission_denied")])
    router, _ = _mocked(world)
    with router, httpx.Client(verify=CONTEXT) as client:
        assert client.get(URL, params={"idempotency_key": "k1"}).status_code == 404
        assert _post(client, "k1").status_code == 403


def test_the_same_key_at_the_order_api_and_the_mail_api_names_two_requests(world: World) -> None:
    mail, orders = MailAPI(world), OrderAPI(world)
    with respx.mock(assert_all_mocked=True) as router, httpx.Client(verify=CONTEXT) as client:
        router.route(host=MAIL_HOST).mock(side_effect=mail.handle)
        router.route(host="orders.crashmatrix.test").mock(side_effect=orders.handle)
        order = client.post(f"{BASE_URL}/orders", json={"item": "pen"}, headers={"Idempotency-Key": "k1"})
        email = _post(client, "k1")
        email_again = _post(client, "k1")
    # Had the keys shared one namespace, the email would be a 422 (another payload).
    assert (order.status_code, email.status_code, email_again.status_code) == (201, 201, 200)
    assert email_again.json()["id"].startswith("msg_")
    counts = world.snapshot().counts
    assert (counts["orders"], counts["emails"]) == (1, 1)


def test_other_paths_and_methods_are_refused(api: tuple[MailAPI, httpx.Client]) -> None:
    _, client = api
    assert client.post(f"{MAIL_BASE_URL}/outbox", json=EMAIL).status_code == 404
    assert client.delete(URL).status_code == 405
