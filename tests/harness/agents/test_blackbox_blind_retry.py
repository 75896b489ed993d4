"""Issue 15: "a black-box agent with a blind retry of an uncertain send passed all its cells".

The kind-3 example (order-desk) closes a step it finds ``started`` as uncertain and retries it
with the SAME Idempotency-Key, which the order service deduplicates. Planted
(``BLACKBOX_AGENT_BUG=blind_retry_after_unknown``), the retry takes a new key: the uncertain
order is read as "it did not happen". A black box is crashed at its service edges, so the
harness does reach the state that exposes it: killed after the service committed the order
and before the response (``after_side_effect``), the restarted agent places a second order,
which the world counts and ``non_idempotent_at_most_once`` names. Killed before the request
reached the service (``after_running``) nothing was committed, so the same retry is harmless
there and both agents pass -- the cell that can tell them apart is the one that must.

Where a black box has no service edge at all (its tools are its own, no ``services:``), the
harness cannot reach an uncertain execution: those columns are "not reachable", with why
(``tests/harness/front/test_not_run.py``, ``tests/reports/test_not_reachable.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.front.cases import run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.verdict.explain import explain

from ...planted import plant

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "blackbox_agent"
SCENARIO = load_scenario(EXAMPLE / "scenario.yaml")
CORRECT = str(EXAMPLE / "adapter.yaml")


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher("fork", preload=["crashmatrix.harness.agents.reference"])


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> str:
    where = tmp_path_factory.mktemp("adapters")
    return str(plant(EXAMPLE, "adapter.yaml", "BLACKBOX_AGENT_BUG", "blind_retry_after_unknown", where))


def test_the_planted_blind_retry_fails_non_idempotent_at_most_once_after_the_side_effect(
    launcher: LifeLauncher, planted: str, tmp_path: Path
) -> None:
    point = parse_point("after_side_effect[call_order]")
    bad = run_point(SCENARIO, point, launcher, tmp_path / "planted", agent=planted)
    assert not bad.passed, explain(bad, planted)
    violations = {v.invariant for v in bad.verdict.violations}
    assert "non_idempotent_at_most_once" in violations, explain(bad, planted)
    assert any(m.field == "world.orders" and m.observed == 2 for m in bad.verdict.mismatches)
    good = run_point(SCENARIO, point, launcher, tmp_path / "correct", agent=CORRECT)
    assert good.passed, explain(good, CORRECT)
    assert good.verdict.observed is not None and good.verdict.observed.world["orders"] == 1


def test_before_the_service_committed_the_blind_retry_is_harmless_and_both_pass(
    launcher: LifeLauncher, planted: str, tmp_path: Path
) -> None:
    point = parse_point("after_running[call_order]")
    for name, agent in (("planted", planted), ("correct", CORRECT)):
        result = run_point(SCENARIO, point, launcher, tmp_path / name, agent=agent)
        assert result.passed, explain(result, agent)
        assert result.verdict.observed is not None and result.verdict.observed.world["orders"] == 1
