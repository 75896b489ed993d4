"""Issue 28's proof: the built-in scenarios through the MCP server give the reference agent the
same verdicts as through the mock tools in its own process, case by case.

Two runs of ``pytest SCENARIOS`` as a user runs it: ``--agent=reference`` (kind 1, the mock
tools in process) and ``--agent=examples/reference_mcp/adapter.yaml`` (kind 2, the same agent
whose every tool call goes over MCP to the relay, ``reference_agent/mcp_client.py``). Each
case id of one run must be a case of the other with the same status (passed, failed, not
applicable, ...), and each column one run cannot reach, the same in the other. The only cells
allowed to differ are the columns in ``KNOWN``, each with why; there the MCP run must pass
every case, or say in its reason that the column needs MCP's other transport.

This module runs one scenario (``SUBSET``, for time); ``benchmarks/mcp_equivalence.py`` runs
one of each folder or the whole suite the same way, with ``compare`` from here, and prints
its time (docs/adapters.md "Tools over MCP" has the figures).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from crashmatrix.harness.front.cli import main as cli
from crashmatrix.harness.input.suite import BUILTIN_SUITE
from crashmatrix.reports.results import CaseRecord, NotRun, Results, load_results

from ..pytest_runs import run_inprocess

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
ADAPTER = ROOT / "examples" / "reference_mcp" / "adapter.yaml"

# One scenario, for time: over stdio each life of the variant starts its own MCP server (a
# Python process importing the SDK), so a case costs many times the reference agent's (57
# cases of send_once and keyed_response_lost: 1,116 s over MCP against 43 s in process, on a
# machine loaded to about 20). A non-idempotent email: every crash column, power loss,
# recovery, and the tool-side faults the agent must not retry through. The lookup by key over
# MCP is tests/reference_agent/test_mcp_variant.py's, in process.
SUBSET = ("send_email/send_once.yaml",)
# One scenario of each folder, what benchmarks/mcp_equivalence.py --scenarios runs to measure
# more than SUBSET (docs/adapters.md "Tools over MCP" has its figures).
PER_FOLDER = (
    "approvals/reapproval_rejected.yaml",
    "create_order/keyed_response_lost.yaml",
    "faults/read_file_timeout_retry.yaml",
    "generic_yaml/create_issue_default_contract.yaml",
    "multi_call/two_calls_one_message.yaml",
    "read_only/read_file_plain.yaml",
    "run_command/compound_two_appends.yaml",
    "send_email/send_once.yaml",
    "write_file/write_file_recovery.yaml",
)

# The columns whose cells may differ, and why. Everywhere else a difference is a bug: the
# variant's (reference_agent/mcp_client.py), the relay's or the harness's.
KNOWN: Mapping[str, str] = {
    "tool_server_died": (
        "a tool-side fault at another seam: in process between the mock tool's client and its "
        "backend (a dropped connection after the effect), over MCP the relay SIGKILLed after the "
        "effect; either way the agent must say the call is uncertain, never retry it blindly"
    ),
    "tool_response_lost": (
        "a tool-side fault, as above; over stdio not reachable (a pipe does not lose one "
        "message), judged with mcp: {transport: http}"
    ),
    "tool_result_error": "a tool-side fault, as above: an error before anything ran (MCP: isError)",
    "tool_result_malformed": "a tool-side fault, as above: an answer that cannot be read, after the effect",
}


# Columns both runs leave out (``run``'s options): no verdict to compare. Over MCP each is still
# listed not reachable, with the reason an agent writing its own session has.
OFF = ("double_resume",)


@dataclass(frozen=True, slots=True)
class Cell:
    status: str  # a case's status, or a column's gap state (not_reachable, deselected)
    why: str = ""


def cells(results: Results) -> tuple[dict[tuple[str, str], Cell], dict[tuple[str, str], Cell]]:
    """The run's cases by (scenario file, case id), and its columns without cases by
    (scenario file, column)."""
    cases = {
        (Path(case.node_id.partition("::")[0]).name, case.point): Cell(
            case.status,
            "; ".join([*case.problems, *(str(v.get("message")) for v in case.violations)])[:300],
        )
        for case in results.cases
    }
    gaps = {(Path(gap.scenario_path).name, gap.boundary): Cell(gap.state, gap.why) for gap in results.not_run}
    return cases, gaps


def compare(native: Results, over_mcp: Results, known: Mapping[str, str] = KNOWN) -> list[str]:
    """Every difference between the two runs outside ``known``, and every cell of a known
    column the MCP run neither passed nor explained, one line each (pure)."""
    native_cases, native_gaps = cells(native)
    mcp_cases, mcp_gaps = cells(over_mcp)
    columns = {
        (Path(case.node_id.partition("::")[0]).name, case.point): case.boundary
        for case in (*native.cases, *over_mcp.cases)
    }
    out: list[str] = []
    for key in sorted(native_cases.keys() | mcp_cases.keys()):
        scenario, point = key
        if columns[key] in known or columns[key] in OFF:
            continue
        ours, theirs = native_cases.get(key), mcp_cases.get(key)
        if ours is None or theirs is None:
            where = "the reference agent's run" if ours is None else "the MCP run"
            out.append(f"{scenario}::{point}: no such case in {where}")
        elif ours.status != theirs.status:
            out.append(
                f"{scenario}::{point}: {ours.status} in process, {theirs.status} over MCP"
                + (f" ({theirs.why or ours.why})" if theirs.why or ours.why else "")
            )
    for key in sorted(native_gaps.keys() | mcp_gaps.keys()):
        scenario, column = key
        if column in known or column in OFF:
            continue
        ours, theirs = native_gaps.get(key), mcp_gaps.get(key)
        if ours is None or theirs is None or ours.status != theirs.status:
            out.append(
                f"{scenario} {column}: {ours.status if ours else 'cases'} in process, "
                f"{theirs.status if theirs else 'cases'} over MCP ({(theirs or ours or Cell('')).why})"
            )
    for (scenario, point), cell in sorted(mcp_cases.items()):
        if columns[scenario, point] in known and cell.status != "passed":
            out.append(f"{scenario}::{point}: {cell.status} over MCP ({cell.why})")
    for (scenario, column), cell in sorted(mcp_gaps.items()):
        if column in known and "mcp" not in cell.why.lower():
            out.append(
                f"{scenario} {column}: {cell.status} over MCP, and its reason names no MCP: {cell.why}"
            )
    return out


def run(pytester: pytest.Pytester, agent: str, scenarios: Sequence[Path], *args: str) -> Results:
    """``pytest SCENARIOS --agent AGENT`` in this process; its ``matrix.json``."""
    folder = pytester.path / agent.replace("/", "_")[-40:]
    folder.mkdir()
    for path in scenarios:
        (folder / path.name).write_bytes(path.read_bytes())
    result = run_inprocess(
        pytester,
        *(str(folder / p.name) for p in scenarios),
        f"--agent={agent}",
        "-p",
        "no:cacheprovider",
        "--no-doctor",
        # Two lives resuming at once: a column only the reference agent in process reaches (an
        # agent writing its own session: not reachable, by crashmatrix's limit), not MCP's.
        "--no-double-resume",
        *args,
    )
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    assert results.cases, result.stdout.str()
    return results


@pytest.mark.slow
def test_the_reference_agent_gets_the_same_verdicts_through_mcp_as_through_its_own_tools(
    pytester: pytest.Pytester,
) -> None:
    scenarios = [BUILTIN_SUITE / name for name in SUBSET]
    native = run(pytester, "reference", scenarios)
    over_mcp = run(pytester, str(ADAPTER), scenarios)
    assert compare(native, over_mcp) == []
    # It proves something: every scenario ran through MCP, with a case at each boundary.
    tool_side = [c for c in over_mcp.cases if c.boundary in KNOWN]
    in_process = [c for c in native.cases if c.boundary in KNOWN]
    assert {Path(c.node_id.partition("::")[0]).name for c in over_mcp.cases} == {Path(n).name for n in SUBSET}
    assert len(over_mcp.cases) - len(tool_side) == len(native.cases) - len(in_process)
    assert tool_side, "no tool-side case: the MCP run never reached the tool side"
    # In process the same columns act at the mock tools' seam: passed there too.
    assert in_process and all(c.status == "passed" for c in in_process), in_process


def test_a_different_verdict_is_named_case_by_case() -> None:
    """``compare`` itself: a case that passed in one run and failed in the other, a column
    reachable in one only, and an unexplained tool-side gap are each one line."""

    def case(point: str, status: str) -> CaseRecord:
        column = point.partition("[")[0]
        return CaseRecord("a.yaml::" + point, "a", "a.yaml", (), (), point, column, status, False, 0.0, 2, "")

    native = Results(agent="reference", cases=(case("clean", "passed"), case("after_running[c]", "passed")))
    over_mcp = Results(
        agent="mcp",
        cases=(
            case("clean", "passed"),
            case("after_running[c]", "failed"),
            case("tool_result_error[c]", "passed"),
        ),
        not_run=(
            NotRun("a.yaml", "after_tool_call_pending", "not_reachable", "kind 2 maps none", ("c",)),
            NotRun(
                "a.yaml", "tool_response_lost", "not_reachable", "a pipe does not lose one message", ("c",)
            ),
        ),
    )
    assert compare(native, over_mcp) == [
        "a.yaml::after_running[c]: passed in process, failed over MCP",
        "a.yaml after_tool_call_pending: cases in process, not_reachable over MCP (kind 2 maps none)",
        "a.yaml tool_response_lost: not_reachable over MCP, and its reason names no MCP: "
        "a pipe does not lose one message",
    ]


@pytest.mark.slow
def test_over_http_a_lost_response_is_told_uncertain_and_the_email_goes_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The column stdio cannot have: over streamable HTTP (``adapter_http.yaml``, the server the
    life starts) the relay drops the response after the send; the variant's client sees the
    stream end without an answer, its ledger says unknown, and the model is told uncertain."""
    case = "tool_response_lost[call_mail]"
    status = cli(
        [
            "run",
            str(BUILTIN_SUITE / "send_email" / "send_once.yaml"),
            "--agent",
            str(ADAPTER.with_name("adapter_http.yaml")),
            "--crash",
            case,
            "--keep",
            str(tmp_path / "kept"),
        ]
    )
    printed = capsys.readouterr().out
    assert status == 0 and f"{case} ... passed" in printed, printed
    session = tmp_path / "kept" / case / "world" / "workspace" / ".agent_state" / "session-reference.jsonl"
    statuses = [
        record["status"]
        for record in map(json.loads, session.read_text(encoding="utf-8").splitlines())
        if record["type"] == "tool_execution"
    ]
    assert statuses == ["approved", "running", "unknown"], statuses
