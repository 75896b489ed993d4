"""The order API honours Idempotency-Key: one order per key, whoever sends it, however often."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import respx
from respx.models import AllMockedAssertionError

from crashmatrix.mock_tools import BASE_URL, FaultSpec, OrderAPI, World
from tests.tls import CONTEXT

FORK = multiprocessing.get_context("fork")
ORDER = {"item": "pen", "quantity": 2}
HOLD = 0.2  # the deliberate in-flight hold that makes concurrent requests overlap


def _post(client: httpx.Client, key: str | None, body: dict[str, object] = ORDER) -> httpx.Response:
    headers = {"X-Tool-Call-Id": "call_1", "X-Execution-Id": "exec_1"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post(f"{BASE_URL}/orders", json=body, headers=headers)


@pytest.fixture
def api(world: World) -> Iterator[tuple[OrderAPI, httpx.Client]]:
    service = OrderAPI(world)
    with respx.mock(assert_all_called=False) as router, httpx.Client(verify=CONTEXT) as client:
        router.route(host="orders.crashmatrix.test").mock(side_effect=service.handle)
        yield service, client


def test_a_new_key_creates_one_order_with_201(world: World, api: tuple[OrderAPI, httpx.Client]) -> None:
    _, client = api
    response = _post(client, "k1")
    assert response.status_code == 201
    assert response.json()["idempotency_key"] == "k1"
    assert world.snapshot().counts["orders"] == 1
    [event] = world.events()
    assert (event.kind, event.idempotency_key, event.tool_call_id) == ("order", "k1", "call_1")


def test_replay_returns_the_identical_stored_body_and_creates_nothing(
    world: World, api: tuple[OrderAPI, httpx.Client]
) -> None:
    _, client = api
    first = _post(client, "k1")
    again = _post(client, "k1")
    assert again.status_code == 200
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.content == first.content
    assert world.snapshot().counts["orders"] == 1


def test_same_key_different_payload_is_422_and_creates_nothing(
    world: World, api: tuple[OrderAPI, httpx.Client]
) -> None:
    _, client = api
    _post(client, "k1")
    response = _post(client, "k1", {"item": "pen", "quantity": 3})
    assert response.status_code == 422
    assert world.snapshot().counts["orders"] == 1


def test_without_a_key_every_request_is_a_new_order(world: World, api: tuple[OrderAPI, httpx.Client]) -> None:
    _, client = api
    assert [_post(client, None).status_code for _ in range(3)] == [201, 201, 201]
    assert world.snapshot().counts["orders"] == 3


def test_lookup_by_key_finds_the_order_or_404(api: tuple[OrderAPI, httpx.Client]) -> None:
    _, client = api
    created = _post(client, "k1").json()
    found = client.get(f"{BASE_URL}/orders", params={"idempotency_key": "k1"})
    assert (found.status_code, found.json()) == (200, created)
    assert client.get(f"{BASE_URL}/orders", params={"idempotency_key": "k2"}).status_code == 404


def test_same_key_while_the_first_is_in_flight_is_409(
    world: World, api: tuple[OrderAPI, httpx.Client]
) -> None:
    service, client = api
    claimed, release = threading.Event(), threading.Event()

    def hold(_key: str) -> None:
        claimed.set()
        release.wait()

    service.on_in_flight = hold
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(_post, client, "k1")
        claimed.wait()
        second = _post(client, "k1")
        release.set()
        assert second.status_code == 409
        assert first.result().status_code == 201
    assert world.snapshot().counts["orders"] == 1


def test_many_threads_with_one_key_create_exactly_one_order(
    world: World, api: tuple[OrderAPI, httpx.Client]
) -> None:
    service, client = api
    service.hold_in_flight = HOLD
    barrier = threading.Barrier(16)

    def send() -> int:
        barrier.wait()
        return _post(client, "k1").status_code

    with ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(lambda _: send(), range(16)))
    assert set(statuses) <= {200, 201, 409}
    assert statuses.count(201) == 1
    assert world.snapshot().counts["orders"] == 1


def _process_sender(root: str, barrier: threading.Barrier, results: multiprocessing.Queue[int]) -> None:
    service = OrderAPI(World(Path(root)), hold_in_flight=HOLD)
    with respx.mock() as router, httpx.Client(verify=CONTEXT) as client:
        router.route(host="orders.crashmatrix.test").mock(side_effect=service.handle)
        barrier.wait()
        results.put(_post(client, "k1").status_code)


def test_several_processes_with_one_key_create_exactly_one_order(world: World) -> None:
    n = 6
    barrier = FORK.Barrier(n)
    results: multiprocessing.Queue[int] = FORK.Queue()
    children = [
        FORK.Process(target=_process_sender, args=(str(world.root), barrier, results)) for _ in range(n)
    ]
    for child in children:
        child.start()
    statuses = [results.get(timeout=60) for _ in children]
    for child in children:
        child.join()
        assert child.exitcode == 0
    assert set(statuses) <= {200, 201, 409}
    assert statuses.count(201) == 1
    assert world.snapshot().counts["orders"] == 1
    assert len({e.pid for e in world.events("order")}) == 1


def _dies_in_flight(root: str) -> None:
    service = OrderAPI(World(Path(root)), on_in_flight=lambda _key: os.kill(os.getpid(), signal.SIGKILL))
    with respx.mock() as router, httpx.Client(verify=CONTEXT) as client:
        router.route(host="orders.crashmatrix.test").mock(side_effect=service.handle)
        _post(client, "k1")


def test_an_in_flight_key_whose_owner_died_is_taken_over(world: World) -> None:
    # Fork before this process starts its own respx mock: a child inherits an active mock.
    child = FORK.Process(target=_dies_in_flight, args=(str(world.root),))
    child.start()
    child.join()
    assert child.exitcode == -signal.SIGKILL
    assert world.snapshot().counts["orders"] == 0  # it died between claim and commit
    with respx.mock() as router, httpx.Client(verify=CONTEXT) as client:
        router.route(host="orders.crashmatrix.test").mock(side_effect=OrderAPI(world).handle)
        assert _post(client, "k1").status_code == 201
        assert _post(client, "k1").status_code == 200
    assert world.snapshot().counts["orders"] == 1


def test_an_ordinary_error_in_flight_releases_the_key(
    world: World, api: tuple[OrderAPI, httpx.Client]
) -> None:
    service, client = api

    def boom(_key: str) -> None:
        raise RuntimeError("service bug")

    service.on_in_flight = boom
    with pytest.raises(RuntimeError):
        _post(client, "k1")
    service.on_in_flight = None
    assert _post(client, "k1").status_code == 201


def test_timeout_before_raises_connect_timeout_and_commits_nothing(tmp_path: Path) -> None:
    world = World.create(tmp_path / "w", faults=[FaultSpec("create_order", "timeout_before")])
    with respx.mock() as router, httpx.Client(verify=CONTEXT) as client:
        router.route(host="orders.crashmatrix.test").mock(side_effect=OrderAPI(world).handle)
        with pytest.raises(httpx.ConnectTimeout):
            _post(client, "k1")
        assert world.snapshot().counts["orders"] == 0
        assert _post(client, "k1").status_code == 201  # the retry is a first request


def test_response_lost_commits_then_raises_read_timeout(tmp_path: Path) -> None:
    world = World.create(tmp_path / "w", faults=[FaultSpec("create_order", "response_lost")])
    with respx.mock() as router, httpx.Client(verify=CONTEXT) as client:
        router.route(host="orders.crashmatrix.test").mock(side_effect=OrderAPI(world).handle)
        with pytest.raises(httpx.ReadTimeout):
            _post(client, "k1")
        assert world.snapshot().counts["orders"] == 1
        assert _post(client, "k1").status_code == 200


def test_permission_denied_is_403_and_commits_nothing(tmp_path: Path) -> None:
    world = World.create(tmp_path / "w", faults=[FaultSpec("create_order", "permission_denied")])
    with respx.mock() as router, httpx.Client(verify=CONTEXT) as client:
        router.route(host="orders.crashmatrix.test").mock(side_effect=OrderAPI(world).handle)
        assert _post(client, "k1").status_code == 403
        assert world.snapshot().counts["orders"] == 0


def test_a_request_to_any_other_host_does_not_escape_the_mock(api: tuple[OrderAPI, httpx.Client]) -> None:
    _, client = api
    with pytest.raises(AllMockedAssertionError):
        client.get("http://example.com/")


def test_an_in_flight_key_whose_owner_is_an_unreaped_zombie_is_taken_over(world: World) -> None:
    pid = os.fork()
    if pid == 0:  # the child: claim the key, then die mid-request
        try:
            _dies_in_flight(str(world.root))
        finally:
            os._exit(1)
    # WNOWAIT: wait until it is dead but leave it unreaped, so os.kill(pid, 0) still succeeds.
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    try:
        with respx.mock() as router, httpx.Client(verify=CONTEXT) as client:
            router.route(host="orders.crashmatrix.test").mock(side_effect=OrderAPI(world).handle)
            assert _post(client, "k1").status_code == 201
    finally:
        _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status)
    assert world.snapshot().counts["orders"] == 1
