"""A failed case, explained for a person: no traceback, just what differed and how to rerun it."""

from __future__ import annotations

from crashmatrix.harness.plan.schedule import repro_command
from crashmatrix.harness.verdict.result import CaseResult
from crashmatrix.harness.verdict.verdict import Verdict

__all__ = ["explain"]


def _verdict_lines(verdict: Verdict, indent: str = "  ") -> list[str]:
    lines: list[str] = []
    for problem in verdict.problems:
        lines.append(f"{indent}problem: {problem}")
    expected_ledger = verdict.expected.get("ledger") or {}
    observed = verdict.observed
    if observed is not None:
        for call, seq in observed.ledger.items():
            want = expected_ledger.get(call)
            marker = "" if want is None else f"   (expected {want})"
            lines.append(f"{indent}ledger[{call}]: {' > '.join(seq) or '(none)'}{marker}")
        for call, outcome in observed.outcome.items():
            lines.append(
                f"{indent}outcome[{call}]: {outcome}; code seen by the model: {observed.code.get(call)}"
            )
    for mismatch in verdict.mismatches:
        lines.append(f"{indent}MISMATCH {mismatch.describe()}")
    for violation in verdict.violations:
        lines.append(f"{indent}INVARIANT {violation.invariant}: {violation.message}")
    for item in verdict.not_applicable:
        lines.append(f"{indent}not applicable: {item}")
    return lines


def explain(result: CaseResult, agent: str = "reference") -> str:
    scenario = result.scenario
    status = result.verdict.status.upper()
    head = f"{scenario.path.name}::{result.point_id} {status} (agent {agent}, {result.lives} lives)"
    lines = [head]
    if result.sub_results:
        failed = [(sid, v) for sid, v in result.sub_results if not v.passed]
        lines.append(f"  {len(failed)} of {len(result.sub_results)} recovery crash points failed:")
        for sid, verdict in failed:
            lines.append(f"  second crash at {sid}:")
            lines.extend(_verdict_lines(verdict, "    "))
    else:
        lines.extend(_verdict_lines(result.verdict))
    lines.append(f"  case directory: {result.case_dir}")
    point = result.point_id.removeprefix("recovery@")
    lines.append(f"  rerun: {repro_command(scenario.path, point, agent=agent)}")
    return "\n".join(lines)
