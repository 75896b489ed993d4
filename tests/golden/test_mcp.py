"""Golden: an agent whose tools are on an MCP server, tested unchanged but for its server
configuration (issue 28).

``mcp/agent.py`` is a team's MCP agent (the official ``mcp`` client, the openai client for the
model, a conversation JSONL and no ledger). Its adapter says ``tools: mcp`` and hands it
crashmatrix's server, ``{mcp_command}`` (stdio) or ``{mcp_url}`` (``adapter_http.yaml``). It runs
built-in scenarios as a team would, and:

* a crash at each MCP edge leaves the world it stands for (the request arrived: no email; the
  effect done, unanswered: one), and the agent is green there: it tells the model "uncertain"
  for a send it cannot know about, and retries a keyed order with its key;
* each tool-side fault acts and the agent is green (``tool_response_lost`` over HTTP only; over
  stdio it is not applicable, saying why);
* its twin (``adapter_bug.yaml``: every unanswered call sent again after a restart) is red where
  the send happened before the crash, with a second email.

Before issue 28 none of this could be asked: crashmatrix served tools only over its own HTTP
shape, and a relay dying with its killed agent was named the agent's survivor.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crashmatrix.harness.input.suite import BUILTIN_SUITE
from crashmatrix.reports.results import CaseRecord, Results, load_results

from ..pytest_runs import run_inprocess

pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]
pytest.importorskip("mcp")

HERE = Path(__file__).resolve().parent / "mcp"
SEND_ONCE = BUILTIN_SUITE / "send_email" / "send_once.yaml"
KEYED_ONCE = BUILTIN_SUITE / "create_order" / "keyed_once.yaml"
# The MCP edges and the tool-side columns (each case starts an MCP server per life: the model's
# reply, torn lines and second crashes are other golden agents' to pin).
MAIL = (
    "after_running",
    "after_side_effect",
    "tool_server_died",
    "tool_result_error",
    "tool_result_malformed",
)


def _run(
    pytester: pytest.Pytester,
    adapter: Path,
    scenario: Path,
    points: tuple[str, ...],
    *,
    doctor: bool = True,
) -> dict[str, CaseRecord]:
    """The cases ``points`` (and the clean case) of ``scenario`` against ``adapter``, by point.

    ``doctor=False`` for a claim that the agent is green. The doctor's findings reach a verdict
    only as the checks it finds blind on the agent (``Observation.blind_checks``), and on
    desk-mcp it finds none (``blind: {}``, every adapter here): its verdicts are the same
    without it, every check applied. Its run was half of such a run (~10-18 s an adapter: its
    lives each start the agent's interpreter), and the doctor on an MCP agent is
    ``tests/harness/front/test_doctor_tool_side.py``'s claim. The red twin keeps it, as a team
    runs it: a check found blind would leave the twin green there."""
    shutil.copy(scenario, pytester.path / scenario.name)
    ids = [f"{scenario.name}::clean", *(f"{scenario.name}::{point}" for point in points)]
    options = () if doctor else ("--no-doctor",)
    result = run_inprocess(pytester, *ids, f"--agent={adapter}", "-p", "no:cacheprovider", *options)
    results: Results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    assert results.cases, result.stdout.str()
    return {case.point: case for case in results.cases}


def _emails(case: CaseRecord) -> int:
    assert case.observed is not None, case.point
    return int(case.observed["world"]["emails"])


def test_an_mcp_agent_over_stdio_is_green_at_the_mcp_edges_and_tool_side_faults(
    pytester: pytest.Pytester,
) -> None:
    cases = _run(
        pytester, HERE / "adapter.yaml", SEND_ONCE, tuple(f"{p}[call_mail]" for p in MAIL), doctor=False
    )
    statuses = {point: case.status for point, case in cases.items()}
    assert statuses == {"clean": "passed", **{f"{p}[call_mail]": "passed" for p in MAIL}}, [
        (c.point, c.status, c.mismatches, c.violations) for c in cases.values()
    ]
    # The state each edge stands for: nothing sent when the request had just arrived; sent once
    # when the effect was done and its answer lost (and never a second time).
    assert _emails(cases["after_running[call_mail]"]) == 0
    assert _emails(cases["after_side_effect[call_mail]"]) == 1
    assert (
        _emails(cases["tool_server_died[call_mail]"])
        == _emails(cases["tool_result_malformed[call_mail]"])
        == 1
    )
    assert _emails(cases["tool_result_error[call_mail]"]) == 0  # nothing ran, and it was not resent


def test_an_mcp_agent_over_http_retries_a_keyed_order_with_its_key(pytester: pytest.Pytester) -> None:
    points = (
        "after_side_effect",
        "tool_server_died",
        "tool_response_lost",
        "tool_result_error",
    )
    cases = _run(
        pytester,
        HERE / "adapter_http.yaml",
        KEYED_ONCE,
        tuple(f"{p}[call_order]" for p in points),
        doctor=False,
    )
    statuses = {point: case.status for point, case in cases.items()}
    assert statuses == {"clean": "passed", **{f"{p}[call_order]": "passed" for p in points}}, [
        (c.point, c.status, c.mismatches, c.violations) for c in cases.values()
    ]
    orders = {point: case.observed["world"]["orders"] for point, case in cases.items() if case.observed}
    # One order wherever it had been placed (the retry's key deduplicated); none where the
    # server refused the call before anything ran (the agent told the model, sent nothing).
    assert orders == {**dict.fromkeys(statuses, 1), "tool_result_error[call_order]": 0}


def test_its_blind_resend_twin_sends_twice_after_the_effect(pytester: pytest.Pytester) -> None:
    cases = _run(pytester, HERE / "adapter_bug.yaml", SEND_ONCE, ("after_side_effect[call_mail]",))
    assert cases["clean"].status == "passed"
    case = cases["after_side_effect[call_mail]"]
    assert case.status == "failed"
    assert "non_idempotent_at_most_once" in {v["invariant"] for v in case.violations}, case.violations
    assert _emails(case) == 2
