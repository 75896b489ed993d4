"""Cases are independent of each other, and secrets in the environment never reach evidence."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
import respx

from crashmatrix.harness.agents.protocol import LifeContext
from crashmatrix.harness.agents.reference import ReferenceAdapter
from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.front.cases import run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher, run_case
from crashmatrix.harness.plan.enumeration import points_from_trace
from crashmatrix.harness.verdict.result import CaseResult

ROOT = Path(__file__).resolve().parents[3] / "scenarios"
SAMPLE = ["write_file/write_file_recovery.yaml", "create_order/keyed_once.yaml", "send_email/send_once.yaml"]


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher(
        "fork", preload=["crashmatrix.harness.agents.reference", "crashmatrix.mock_tools.toolbox"]
    )


def _fingerprint(result: CaseResult) -> tuple[Any, ...]:
    observed = result.verdict.observed
    assert observed is not None
    counts = {k: v for k, v in observed.world.items() if k != "files"}
    return (result.verdict.status, observed.ledger, observed.outcome, observed.code, counts)


def _sample(launcher: LifeLauncher, tmp_path: Path) -> list[tuple[Scenario, CrashPoint]]:
    cases: list[tuple[Scenario, CrashPoint]] = []
    for name in SAMPLE:
        scenario = load_scenario(ROOT / name)
        run = run_case(tmp_path / "enumerate" / name.replace("/", "_"), scenario, launcher)
        cases += [(scenario, point) for point in points_from_trace(run.trace)[:6]]
    return cases


@pytest.mark.slow
def test_cases_give_the_same_outcomes_shuffled_and_in_parallel_as_in_file_order(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    cases = _sample(launcher, tmp_path)
    in_order = {
        (s.name, p.id): _fingerprint(run_point(s, p, launcher, tmp_path / "a" / f"{i}"))
        for i, (s, p) in enumerate(cases)
    }
    shuffled = list(enumerate(cases))
    random.Random(20261129).shuffle(shuffled)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = pool.map(
            lambda item: (
                item[1],
                run_point(item[1][0], item[1][1], launcher, tmp_path / "b" / f"{item[0]}"),
            ),
            shuffled,
        )
        in_parallel = {(s.name, p.id): _fingerprint(result) for (s, p), result in results}
    assert len(in_order) == len(cases) >= 15
    assert in_parallel == in_order


@pytest.mark.slow
def test_an_api_key_in_the_environment_never_reaches_a_case_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    secret = "sk-crashmatrix-test-4f1d9c0a7b"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    # Spawned lives start from this environment, so the key is really there for the agent.
    scenario = load_scenario(ROOT / "create_order" / "keyed_once.yaml")
    point = CrashPoint("after_side_effect", "call_order")
    result = run_point(scenario, point, LifeLauncher("spawn"), tmp_path / "case")
    assert result.passed and result.lives == 2  # it really crashed, recovered and was judged
    leaked = [p for p in result.case_dir.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert leaked == []


class Escaping(ReferenceAdapter):
    """Tries to reach a host that is not mocked, through the life's client and through one
    it builds itself, and writes down what happened; then runs the reference agent."""

    name = "escaping"

    def run_life(self, ctx: LifeContext) -> None:
        outcomes = []
        for client in (ctx.http, httpx.Client(timeout=2.0)):
            try:
                client.get("http://elsewhere.crashmatrix.test/secret")
                outcomes.append("escaped")
            except respx.models.AllMockedAssertionError:
                outcomes.append("stopped by respx")
            except httpx.HTTPError as error:
                outcomes.append(f"left the process: {type(error).__name__}")
        with (ctx.case_dir / f"escape-{ctx.life}.json").open("w") as out:
            json.dump({"outcomes": outcomes, "http": id(ctx.http)}, out)
        Escaping.clients.append(ctx.http)
        super().run_life(ctx)

    clients: ClassVar[list[httpx.Client]] = []


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["fork", "spawn"])
def test_no_request_of_a_life_escapes_the_mocks_however_it_was_started(
    isolation: str, tmp_path: Path
) -> None:
    # Forked lives inherit the fork server's router, started once before any fork; spawned
    # lives start their own. Either way a life's requests reach the mocks or fail, from the
    # first life to the last.
    scenario = load_scenario(ROOT / "create_order" / "keyed_once.yaml")
    launcher = LifeLauncher(
        isolation, preload=["crashmatrix.harness.agents.reference", "crashmatrix.mock_tools.toolbox"]
    )
    run = run_case(
        tmp_path / "case",
        scenario,
        launcher,
        agent=f"{__name__}:Escaping",
        point=CrashPoint("after_side_effect", "call_order"),
    )
    assert [life.status for life in run.lives] == ["crashed", "exited"]
    seen = [json.loads((run.case_dir / f"escape-{life}.json").read_text()) for life in (1, 2)]
    for life in seen:
        assert life["outcomes"] == ["stopped by respx", "stopped by respx"]
    if isolation == "fork":  # both lives got the server's pristine client, built before the fork
        assert seen[0]["http"] == seen[1]["http"]
    assert (run.case_dir / "model_requests.jsonl").read_text().count("\n") >= 2  # the model was mocked


def test_a_life_run_in_this_process_leaves_httpx_unpatched(tmp_path: Path) -> None:
    # In-process lives (the benchmark, the fork server's warm-up) start and stop the router
    # around each life: nothing outside a life is intercepted, and its call log is empty.
    from crashmatrix.harness.lives.casedir import prepare_case
    from crashmatrix.harness.lives.life import LifeSpec, mocks, run_life
    from crashmatrix.harness.lives.tracer import Tracer

    scenario = load_scenario(ROOT / "create_order" / "keyed_once.yaml")
    Escaping.clients.clear()
    for index in range(2):
        case = tmp_path / f"case{index}"
        prepare_case(case, scenario)
        run_life(
            LifeSpec(str(case), scenario, f"{__name__}:Escaping", 1), Tracer(case / "trace.jsonl", 1, None)
        )
        assert (case / "model_requests.jsonl").read_text().count("\n") == 2
    first, second = Escaping.clients
    assert first is not second and first.is_closed and second.is_closed  # one per life, closed
    assert not mocks().router.calls
    transport = httpx.MockTransport(lambda request: httpx.Response(204))
    with httpx.Client(transport=transport) as client:  # would raise if respx still intercepted
        assert client.get("http://model.crashmatrix.test/v1/models").status_code == 204
    assert not mocks().router.calls
