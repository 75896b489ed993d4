"""The MCP examples (issue 28): each planted bug caught in its cell, each fixed twin green there.

``examples/mcp_plain/`` is a plain ``mcp``-SDK agent run as a black box (kind 3) that spawns
crashmatrix's MCP server over stdio; ``examples/mcp_agents_sdk/`` is an Agents SDK agent
(``framework: openai-agents``) whose ``MCPServerStdio`` spawns it. Their bugs are the ones such
agents are written with, and each shows where the matrix puts it:

* the plain agent, on restart, runs the calls of a reply that have no result again: killed
  after the send (``after_side_effect``, the MCP server's edge: the effect done, the response
  not sent) it sends the email twice, and re-places an order under no key;
* it retries a call whose server went away on a fresh server: ``tool_server_died`` after the
  send sends it twice;
* the SDK agent's ``max_retry_attempts`` (the docs' reliability setting) retries a call whose
  answer its client refused (``tool_result_malformed``): a second email; and when the server
  dies past the send the SDK tells the model "An error occurred while running the tool"
  (``told_the_truth``: it happened).

The fixed twins keep a ledger of their own and send each call's site as its idempotency key:
the same cells are green (one email, the model told it may have gone out; one order, found
again by its key).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS
from crashmatrix.harness.front.cases import run_point, run_tool_fault
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.verdict.explain import explain
from crashmatrix.harness.verdict.result import CaseResult

from ...launchers import warm_launcher

pytest.importorskip("mcp")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
SEND = load_scenario(ROOT / "scenarios" / "send_email" / "send_once.yaml")
ORDER = load_scenario(ROOT / "scenarios" / "create_order" / "keyed_once.yaml")
PLAIN = str(EXAMPLES / "mcp_plain" / "adapter.yaml")
PLAIN_FIXED = str(EXAMPLES / "mcp_plain" / "adapter_fixed.yaml")
SDK = str(EXAMPLES / "mcp_agents_sdk" / "adapter.yaml")
SDK_FIXED = str(EXAMPLES / "mcp_agents_sdk" / "adapter_fixed.yaml")
# Under load a life of the SDK agent (its imports, a relay spawned per life) takes seconds.
DEADLINE = 120.0


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield warm_launcher(PLAIN, PLAIN_FIXED, SDK, SDK_FIXED)  # mcp and the SDK imported once


def _case(launcher: LifeLauncher, scenario: Scenario, text: str, agent: str, where: Path) -> CaseResult:
    point = parse_point(text)
    if point.boundary in TOOL_SIDE_KINDS:
        return run_tool_fault(scenario, point, launcher, where, agent=agent, deadline=DEADLINE)
    return run_point(scenario, point, launcher, where, agent=agent, deadline=DEADLINE)


def _violated(result: CaseResult) -> set[str]:
    return {v.invariant for v in result.verdict.violations}


def _red_then_green(
    launcher: LifeLauncher, tmp_path: Path, scenario: Scenario, point: str, bad: str, good: str
) -> tuple[CaseResult, CaseResult]:
    planted = _case(launcher, scenario, point, bad, tmp_path / "planted")
    assert not planted.passed, explain(planted, bad)
    fixed = _case(launcher, scenario, point, good, tmp_path / "fixed")
    assert fixed.passed, explain(fixed, good)
    return planted, fixed


def test_the_plain_agent_runs_a_pending_send_again_on_restart(launcher: LifeLauncher, tmp_path: Path) -> None:
    planted, fixed = _red_then_green(
        launcher, tmp_path, SEND, "after_side_effect[call_mail]", PLAIN, PLAIN_FIXED
    )
    assert "non_idempotent_at_most_once" in _violated(planted), explain(planted, PLAIN)
    assert planted.verdict.observed.world["emails"] == 2
    assert fixed.verdict.observed.world["emails"] == 1
    assert fixed.verdict.observed.told["call_mail"] == "uncertain"


def test_the_plain_agent_retries_a_send_whose_server_died(launcher: LifeLauncher, tmp_path: Path) -> None:
    planted, fixed = _red_then_green(
        launcher, tmp_path, SEND, "tool_server_died[call_mail]", PLAIN, PLAIN_FIXED
    )
    assert "non_idempotent_at_most_once" in _violated(planted), explain(planted, PLAIN)
    assert planted.verdict.observed.world["emails"] == 2
    assert fixed.verdict.observed.world["emails"] == 1


def test_the_fixed_plain_agent_finds_its_order_again_by_its_key(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    planted, fixed = _red_then_green(
        launcher, tmp_path, ORDER, "after_side_effect[call_order]", PLAIN, PLAIN_FIXED
    )
    assert planted.verdict.observed.world["orders"] == 2
    assert fixed.verdict.observed.world["orders"] == 1
    assert fixed.verdict.observed.told["call_order"] in ("succeeded", "replayed")


def test_the_sdk_agent_retries_a_send_its_client_refused(launcher: LifeLauncher, tmp_path: Path) -> None:
    pytest.importorskip("agents")
    planted, fixed = _red_then_green(
        launcher, tmp_path, SEND, "tool_result_malformed[call_mail]", SDK, SDK_FIXED
    )
    assert "non_idempotent_at_most_once" in _violated(planted), explain(planted, SDK)
    assert planted.verdict.observed.world["emails"] == 2
    assert fixed.verdict.observed.world["emails"] == 1


def test_the_sdk_agent_tells_an_error_when_the_server_died_past_the_send(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    pytest.importorskip("agents")
    planted, fixed = _red_then_green(launcher, tmp_path, SEND, "tool_server_died[call_mail]", SDK, SDK_FIXED)
    assert _violated(planted) == {"told_the_truth"}, explain(planted, SDK)
    assert planted.verdict.observed.told["call_mail"] == "error"
    assert fixed.verdict.observed.told["call_mail"] == "uncertain"
