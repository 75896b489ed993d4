"""The tool side fails, the agent lives (issue 32): the reference agent through every tool-side
column of send_email (no key: the email may be out, told uncertain) and create_order (keyed:
uncertain, then looked up by its key and reconciled), and the two mutants only these columns
kill, red exactly where their bug shows and green where it does not.

One fork server for the module; each case is one life (no crash, no restart)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS
from crashmatrix.harness.front.cases import run_tool_fault
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.verdict.result import CaseResult

ROOT = Path(__file__).resolve().parents[2] / "scenarios"
MUTANTS = "crashmatrix.reference_agent.mutants"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher(
        "fork", preload=["crashmatrix.harness.agents.reference", MUTANTS, "crashmatrix.mock_tools.toolbox"]
    )


@pytest.fixture(scope="module")
def email() -> Scenario:
    return load_scenario(ROOT / "send_email" / "send_once.yaml")


@pytest.fixture(scope="module")
def order() -> Scenario:
    return load_scenario(ROOT / "create_order" / "keyed_once.yaml")


def _case(
    launcher: LifeLauncher, scenario: Scenario, kind: str, call: str, where: Path, agent: str = "reference"
) -> CaseResult:
    return run_tool_fault(
        scenario, CrashPoint(kind, call), launcher, where / f"{agent.rpartition(':')[2]}-{kind}", agent=agent
    )


def _counts(result: CaseResult) -> dict[str, int]:
    observed = result.verdict.observed
    assert observed is not None
    return {k: v for k, v in observed.world.items() if k in ("emails", "orders")}


def _told(result: CaseResult) -> str:
    observed = result.verdict.observed
    assert observed is not None
    return str(observed.code.get(next(iter(observed.code))) if observed.code else None)


@pytest.mark.parametrize("kind", TOOL_SIDE_KINDS)
def test_the_reference_agent_is_green_in_every_tool_side_column(
    launcher: LifeLauncher, email: Scenario, order: Scenario, tmp_path: Path, kind: str
) -> None:
    sent = _case(launcher, email, kind, "call_mail", tmp_path / "email")
    placed = _case(launcher, order, kind, "call_order", tmp_path / "order")
    for result in (sent, placed):
        assert result.verdict.status == "passed", result.verdict.problems or result.verdict.violations
        assert any(note.startswith(f"{kind}: ") for note in result.verdict.notes)  # the fault acted
    after = kind != "tool_result_error"
    # The effect is in the world once (after the effect) or not at all (an error before it).
    assert _counts(sent)["emails"] == int(after)
    assert _counts(placed)["orders"] == int(after)
    # An email without an answer is uncertain (no key to ask by); an order is looked up by its
    # key and reconciled: told what the service has, never a second order.
    assert _told(sent) == ("SIDE_EFFECT_UNCERTAIN" if after else "TOOL_ERROR")


@pytest.mark.parametrize(
    ("mutant", "kind", "invariant"),
    [
        ("connection_error_resent", "tool_server_died", "non_idempotent_at_most_once"),
        ("malformed_answer_succeeded", "tool_result_malformed", "no_success_without_answer"),
    ],
)
def test_each_tool_side_mutant_is_red_in_its_column_only(
    launcher: LifeLauncher,
    email: Scenario,
    order: Scenario,
    tmp_path: Path,
    mutant: str,
    kind: str,
    invariant: str,
) -> None:
    agent = f"{MUTANTS}:{mutant}"
    for scenario, call in ((email, "call_mail"), (order, "call_order")):
        red = _case(launcher, scenario, kind, call, tmp_path / call, agent)
        assert red.verdict.status == "failed"
        assert [v.invariant for v in red.verdict.violations] == [invariant]
    # A lost response times out (no connection error) and an error comes before the effect:
    # both mutants read those right, as the old columns and the scenarios' faults show too.
    for other in ("tool_response_lost", "tool_result_error"):
        assert (
            _case(launcher, email, other, "call_mail", tmp_path / "other", agent).verdict.status == "passed"
        )
