"""Each planted bug of each foreign example fails a NAMED EVAL of the built-in suite.

The examples' correct agents pass the built-in suite unchanged (README, "The built-in suite
against your agent"); this is the other half: the suite has teeth against agents we did not
write. Every planted bug is run at one built-in case that catches it -- picked from full
``crashmatrix eval`` runs of every variant, whose failing evals examples/README.md lists --
and the case's scorecard must fail the eval that names the harm.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.core.evals import crash_eval_id
from crashmatrix.harness.front.cases import run_point, run_recovery
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.verdict.explain import explain
from crashmatrix.reports.results import record_from_result
from crashmatrix.reports.scorecard import build_scorecard

from ...launchers import warm_launcher
from ...planted import plant

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
VARIABLE = {
    "desk_agent": "DESK_AGENT_BUG",
    "http_agent": "HTTP_AGENT_BUG",
    "state_agent": "STATE_AGENT_BUG",
    "memo_agent": "MEMO_AGENT_BUG",
}
NONE = "non_idempotent"
KEYED = "create_order/keyed_once.yaml"
TWO_TURNS = "multi_call/order_then_email_two_turns.yaml"
TWO_ORDERS = "create_order/two_orders_two_turns.yaml"

# (agent, bug) -> (built-in scenario, case, the eval it must fail)
CATCHES: dict[tuple[str, str], tuple[str, str, str]] = {
    ("desk_agent", "new_key_per_attempt"): (KEYED, "after_side_effect[call_order]", "no_double_effect"),
    ("desk_agent", "blind_retry_after_unknown"): (
        TWO_TURNS,
        "recovery@after_side_effect[call_erin]",
        "no_double_effect",
    ),
    ("desk_agent", "running_after_effect"): (KEYED, "after_approved[call_order]", "ledger_first"),
    ("desk_agent", "retry_non_idempotent"): (TWO_TURNS, "after_side_effect[call_erin]", "no_double_effect"),
    ("desk_agent", "duplicate_tool_result"): (TWO_ORDERS, "after_side_effect[call_chairs]", "turn_finished"),
    ("http_agent", "new_key_per_attempt"): (KEYED, "after_side_effect[call_order]", "no_double_effect"),
    ("http_agent", "blind_retry_after_unknown"): (
        "send_email/send_response_lost.yaml",
        "after_side_effect[call_invoice#2]",
        "no_double_effect",
    ),
    ("http_agent", "running_after_effect"): (KEYED, "after_running[call_order]", "ledger_first"),
    ("http_agent", "retry_non_idempotent"): (TWO_TURNS, "after_side_effect[call_erin]", "no_double_effect"),
    ("http_agent", "duplicate_tool_result"): (TWO_ORDERS, "after_side_effect[call_chairs]", "turn_finished"),
    ("state_agent", "new_key_per_attempt"): (KEYED, "after_side_effect[call_order]", "no_double_effect"),
    ("state_agent", "blind_retry_after_unknown"): (
        "send_email/send_response_lost.yaml",
        "after_side_effect[call_invoice]",
        "no_double_effect",
    ),
    ("state_agent", "running_after_effect"): (KEYED, "after_approved[call_order]", "ledger_first"),
    ("state_agent", "retry_non_idempotent"): (TWO_TURNS, "after_side_effect[call_erin]", "no_double_effect"),
    ("state_agent", "duplicate_tool_result"): (TWO_ORDERS, "after_side_effect[call_chairs]", "turn_finished"),
    ("memo_agent", "resend_after_crash"): (
        "send_email/send_once.yaml",
        "after_side_effect[call_mail]",
        "no_double_effect",
    ),
}


def _variant(agent: str, bug: str, where: Path) -> Path:
    """The example's adapter file with ``bug`` planted, written under ``where``."""
    return plant(ROOT / "examples" / agent, "adapter.yaml", VARIABLE[agent], bug, where)


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    # The examples' imports (openai) preloaded: each planted variant is an adapter of its own.
    yield warm_launcher(*sorted({ROOT / "examples" / agent / "adapter.yaml" for agent, _ in CATCHES}))


@pytest.mark.parametrize(("agent", "bug"), list(CATCHES), ids=[f"{a}-{b}" for a, b in CATCHES])
def test_a_planted_bug_fails_the_named_eval_that_says_what_it_broke(
    agent: str, bug: str, launcher: LifeLauncher, tmp_path: Path
) -> None:
    name, item, question = CATCHES[(agent, bug)]
    adapter = str(_variant(agent, bug, tmp_path / "adapters"))
    scenario = load_scenario(ROOT / "scenarios" / name)
    point = parse_point(item.removeprefix("recovery@"))
    if item.startswith("recovery@"):
        result = run_recovery(scenario, point, launcher, tmp_path / "case", agent=adapter)
        column = "recovery"
    else:
        result = run_point(scenario, point, launcher, tmp_path / "case", agent=adapter)
        column = point.boundary
    assert not result.passed, f"{agent} with {bug} passed {name}::{item}"
    card = build_scorecard([record_from_result(result, f"scenarios/{name}::{item}")], adapter)
    row = card.row(crash_eval_id(column, NONE, question))
    assert row is not None and row.state == "fail", (card.summary, explain(result, adapter))
