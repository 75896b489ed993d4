"""A failed case, explained for a person: no traceback, just what differed and how to rerun it."""

from __future__ import annotations

import re
from collections.abc import Sequence

from crashmatrix.harness.core.torn_fragments import NOTE as TORN_NOTE
from crashmatrix.harness.core.trace import LifeRecord, TraceEvent, stderr_name
from crashmatrix.harness.plan.schedule import DEFAULT_KEEP, RECOVERY, repro_command
from crashmatrix.harness.verdict.expectations import show_value
from crashmatrix.harness.verdict.result import CaseResult, failures_first
from crashmatrix.harness.verdict.verdict import Verdict

__all__ = ["SECOND", "explain", "failing_second", "rerun_command"]

# The key of ``CaseResult.extra`` naming the second crash of a single depth-2 case
# (``crashmatrix run FILE --crash P --second Q``): its point_id is P's, so without it the
# rerun line would lose the crash the case is about.
SECOND = "second"


def failing_second(result: CaseResult) -> str | None:
    """The crash while recovering that this case's rerun must repeat: the one it was run
    with, or for a ``recovery@P`` case the first of its second crashes that failed (the
    one whose verdict is the case's). None when there is none to name."""
    given = result.extra.get(SECOND)
    if isinstance(given, str):
        return given
    if result.point_id.startswith(RECOVERY):
        failing = failures_first(result.sub_results)  # as front/cases.run_recovery chose
        return failing[0][0] if failing else None
    return None


def rerun_command(result: CaseResult, keep: str | None = DEFAULT_KEEP, *, second: str | None = None) -> str:
    """The command that runs this case again, and only it: the same scenario, crash (power
    loss, second crash) and agent. A failed ``recovery@P`` reruns as its failing depth-2
    case (``--crash P --second Q``); one that passed or was not reached as ``recovery@P``.
    ``second``: one given second crash of a ``recovery@P`` case (each has its own line)."""
    return repro_command(
        result.scenario.path,
        result.point_id,
        keep,
        agent=result.agent,
        second=second if second is not None else failing_second(result),
    )


def _verdict_lines(verdict: Verdict, indent: str = "  ") -> list[str]:
    lines: list[str] = []
    for problem in verdict.problems:
        lines.append(f"{indent}problem: {problem}")
    expected_ledger = verdict.expected.get("ledger") or {}
    observed = verdict.observed
    if observed is not None:
        for call, seq in observed.ledger.items():
            want = expected_ledger.get(call)
            marker = "" if want is None else f"   (expected {show_value(want)})"
            lines.append(f"{indent}ledger[{call}]: {show_value(list(seq))}{marker}")
        for call, outcome in observed.outcome.items():
            code = show_value(observed.code.get(call))
            lines.append(f"{indent}outcome[{call}]: {show_value(outcome)}; code seen by the model: {code}")
    for mismatch in verdict.mismatches:
        lines.append(f"{indent}MISMATCH {mismatch.describe()}")
    for violation in verdict.violations:
        lines.append(f"{indent}INVARIANT {violation.invariant}: {violation.message}")
    # Where each torn write's bytes went (harness.core.torn_fragments), glued or not.
    lines += [f"{indent}{note}" for note in verdict.notes if note.startswith(TORN_NOTE)]
    lines += _not_applicable_lines(verdict.not_applicable, indent)
    return lines


_NAMED = re.compile(r"([A-Za-z_][\w.\[\]@-]*): (.+)", re.DOTALL)


def _head(why: str) -> tuple[str, str]:
    """``why`` split at its first ``": "`` outside parentheses: (the reason it shares with
    others, what is particular to it); ("", why) when it has no such part."""
    depth = 0
    for index, char in enumerate(why):
        depth += char == "("
        depth -= char == ")"
        if depth == 0 and why.startswith(": ", index):
            return why[:index], why[index + 2 :]
    return "", why


def _not_applicable_lines(items: Sequence[str], indent: str) -> list[str]:
    """What was not judged, each reason said once: checks with the same reason on one line
    (``outcome, code, ledger: ...``), checks whose reasons share a head under it (an agent
    without a ledger: the five ledger checks, each with what it would have read). A failure
    text is read by a person: nine lines repeating one cause hide the line that matters."""
    names: dict[str, list[str]] = {}  # why -> the checks it stands for, in order
    plain: list[str] = []
    for item in items:
        named = _NAMED.fullmatch(item)
        if named is None:
            plain.append(item)
            continue
        names.setdefault(named.group(2), []).append(named.group(1))
    by_head: dict[str, list[tuple[str, str]]] = {}
    for why, checks in names.items():
        head, rest = _head(why)
        by_head.setdefault(head if head else why, []).append((", ".join(checks), rest if head else ""))
    lines = [f"{indent}not applicable: {item}" for item in plain]
    for head, members in by_head.items():
        if len(members) == 1 or any(not rest for _, rest in members):
            for named_checks, rest in members:
                lines.append(f"{indent}not applicable: {named_checks}: {head}{': ' + rest if rest else ''}")
            continue
        lines.append(f"{indent}not applicable, {head}:")
        lines.extend(f"{indent}  {named_checks}: {rest}" for named_checks, rest in members)
    return lines


# Lines of a life's stderr tail shown in a failure text (the file keeps all of it).
STDERR_LINES = 8


def _exit_status(life: LifeRecord, trace: Sequence[TraceEvent]) -> str:
    """How the life's process ended, as the harness recorded it (the ``ended`` event)."""
    ended = next((e for e in trace if e.get("event") == "ended" and e.get("life") == life.life), {})
    if life.status == "hung":
        return f"killed by {ended.get('signal', 'the harness')} at its deadline"
    if ended.get("signal"):
        return f"killed by {ended['signal']}"
    return "exit status unknown" if life.exitcode is None else f"exit status {life.exitcode}"


def _life_lines(result: CaseResult, indent: str = "  ") -> list[str]:
    """For each life that ended abnormally (the problems above say how it was judged): how
    its process ended and the last lines it wrote to stderr, which often say why."""
    observation = result.observation
    if observation is None:
        return []
    lines: list[str] = []
    for life in observation.lives:
        if life.status not in ("died", "error", "hung"):
            continue
        file = observation.case_dir / stderr_name(life.life)
        shown = file.relative_to(result.case_dir) if file.is_relative_to(result.case_dir) else file
        head = f"{indent}life {life.life} ended: {_exit_status(life, observation.trace)}"
        tail = life.stderr.rstrip().splitlines()[-STDERR_LINES:]
        if not tail:
            lines.append(f"{head}; nothing on stderr ({shown})")
            continue
        lines.append(f"{head}; last lines of its stderr ({shown}):")
        lines.extend(f"{indent}  | {line}" for line in tail)
    return lines


def explain(result: CaseResult, agent: str | None = None, *, kept: bool = True) -> str:
    """``agent``: how the header names the agent (default: the spec the case ran with).
    ``kept`` False: the case directories are removed when the run ends (``crashmatrix run``
    without ``--keep``), so the text does not send the reader to them."""
    scenario = result.scenario
    status = result.verdict.status.upper()
    name = result.point_id
    second = result.extra.get(SECOND)
    if isinstance(second, str):  # named as the CLI's progress line names it
        name += f" then {second}"
    shown = result.agent if agent is None else agent
    head = f"{scenario.path.name}::{name} {status} (agent {shown}, {result.lives} lives)"
    lines = [head]
    if result.sub_results:
        failed = [(sid, v) for sid, v in result.sub_results if not v.passed]
        where = {sub.point: sub.case_dir for sub in result.sub_cases}
        lines.append(f"  {len(failed)} of {len(result.sub_results)} recovery crash points failed:")
        for sid, verdict in failed:
            lines.append(f"  second crash at {sid}: {verdict.status.upper()}")
            lines.extend(_verdict_lines(verdict, "    "))
            if sid in where and kept:
                lines.append(f"    case directory: {where[sid]}")
            # Each its own line: the case's rerun line below repeats only the first of them.
            lines.append(f"    rerun: {rerun_command(result, second=sid)}")
    else:
        lines.extend(_verdict_lines(result.verdict))
    lines.extend(_life_lines(result))
    if kept:
        lines.append(f"  case directory: {result.case_dir}")
    else:
        lines.append("  case directory: removed when the run ended; the rerun line keeps it in a new one")
    lines.append(f"  rerun: {rerun_command(result)}")
    return "\n".join(lines)
