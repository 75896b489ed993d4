"""Cases are independent of each other, and secrets in the environment never reach evidence."""

from __future__ import annotations

import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from harness.boundaries import CrashPoint
from harness.cases import CaseResult, run_point
from harness.injector import LifeLauncher, points_from_trace, run_case
from harness.scenario import Scenario, load_scenario

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2] / "scenarios"
SAMPLE = ["write_file/write_file_recovery.yaml", "create_order/keyed_once.yaml", "send_email/send_once.yaml"]


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher("fork", preload=["reference_agent.adapter", "mock_tools.toolbox"])


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
