"""The scorecard: the named evals, each a row with its verdict and the cases behind it (pure).

A run's results answer named questions any agent can be asked, so that two agents' runs are
comparable row by row:

* seed 004's list (``harness.core.evals.SEED004_EVALS``): each eval is shown by the
  scenarios that declare it (``evals:``), and holds when every case of them that ran passed;
* the crash evals: for each crash column and idempotency class, the questions of
  ``CRASH_QUESTIONS`` -- no double effect (non-idempotent tools), the model was told the
  truth, the turn finished -- each failed only by a case that breaks that question (its
  invariant, an unmet ``told:``, a case that never finished), so a case that fails on
  something else does not make "no double effect" fail.

A row is ``fail`` (a case broke it), ``pass`` (a judged case asked it -- its invariant
applied, or a ``told:`` was stated -- and none broke it), ``not_applicable`` (its cases were
not applicable to this agent, or what answers it cannot be judged on it: the reasons), or
``not_reached`` (no case of it ran, or none asked it). Nothing is a pass that no case showed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from crashmatrix.harness.core.boundaries import BOUNDARIES, TORN_WRITE
from crashmatrix.harness.core.evals import CRASH_QUESTIONS, SEED004_EVALS, crash_eval_id
from crashmatrix.harness.plan.enumeration import POWER_COLUMN
from crashmatrix.reports.causes import reasons
from crashmatrix.reports.results import CaseRecord, Results

__all__ = ["CLASSES", "CRASH_COLUMNS", "EvalRow", "Scorecard", "build_scorecard"]

CLASSES = ("idempotent", "conditional", "non_idempotent")
CRASH_COLUMNS = (*BOUNDARIES, TORN_WRITE, POWER_COLUMN, "recovery")
_JUDGED = ("passed", "failed")  # a verdict was reached on the agent (hung/error break "finished")


@dataclass(frozen=True, slots=True)
class EvalRow:
    id: str
    title: str
    kind: str  # "seed004" | "crash"
    state: str  # "pass" | "fail" | "not_applicable" | "not_reached"
    cases: tuple[str, ...]  # node ids of every case behind the row
    failing: tuple[str, ...] = ()  # node ids of the cases that broke it
    why: str = ""  # for fail: the first reason; for not_applicable: the reasons
    repro: str = ""  # for fail: the command that reruns the first failing case

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "title": self.title,
            "kind": self.kind,
            "state": self.state,
            "cases": list(self.cases),
            "failing": list(self.failing),
            "why": self.why,
            "repro": self.repro,
        }


@dataclass(frozen=True, slots=True)
class Scorecard:
    agent: str
    rows: tuple[EvalRow, ...]

    def count(self, state: str) -> int:
        return sum(row.state == state for row in self.rows)

    @property
    def summary(self) -> str:
        return (
            f"{self.count('pass')} pass, {self.count('fail')} fail, "
            f"{self.count('not_applicable')} not applicable, {self.count('not_reached')} not reached"
        )

    @property
    def headline(self) -> str:
        return f"scorecard, agent {self.agent}: {self.summary}"

    def row(self, eval_id: str) -> EvalRow | None:
        return next((row for row in self.rows if row.id == eval_id), None)

    def of_kind(self, kind: str) -> tuple[EvalRow, ...]:
        return tuple(row for row in self.rows if row.kind == kind)

    def crash_grid(self) -> list[tuple[str, str, tuple[EvalRow | None, ...]]]:
        """The crash evals as (column, class, a row per question in CRASH_QUESTIONS order,
        None where the question is not asked of that class)."""
        return [
            (column, cls, tuple(self.row(crash_eval_id(column, cls, q)) for q in CRASH_QUESTIONS))
            for column in CRASH_COLUMNS
            for cls in CLASSES
        ]


def _state(
    cases: Sequence[CaseRecord],
    failing: Sequence[CaseRecord],
    asking: Sequence[CaseRecord],
    unjudged: Sequence[str],
) -> str:
    if failing:
        return "fail"
    if any(case.status in _JUDGED for case in asking):
        return "pass"
    if cases and all(case.status == "not_applicable" for case in cases):
        return "not_applicable"
    if unjudged:
        return "not_applicable"  # cases ran, but what answers this cannot be judged on this agent
    return "not_reached"


def _unjudged(cases: Sequence[CaseRecord], checks: frozenset[str] = frozenset()) -> list[str]:
    return list(
        dict.fromkeys(
            entry for case in cases for entry in case.not_applicable if entry.partition(":")[0] in checks
        )
    )


def _why(
    state: str,
    cases: Sequence[CaseRecord],
    failing: Sequence[CaseRecord],
    unjudged: Sequence[str],
) -> str:
    if state == "fail":
        first = failing[0]
        return f"{first.title}: {reasons(first)[0]}"
    if state == "not_applicable":
        return "; ".join(unjudged or dict.fromkeys(p for case in cases for p in case.problems))
    if state == "not_reached":
        if not cases:
            return "no case of it ran"
        if any(case.status in _JUDGED for case in cases):
            return "no case of it states what answers this question"
        return "none of its crash points was reached"
    return ""


def _row(
    eval_id: str,
    title: str,
    kind: str,
    cases: Sequence[CaseRecord],
    failing: Sequence[CaseRecord],
    asking: Sequence[CaseRecord],
    checks: frozenset[str] = frozenset(),
) -> EvalRow:
    unjudged = _unjudged(cases, checks)
    state = _state(cases, failing, asking, unjudged)
    return EvalRow(
        eval_id,
        title,
        kind,
        state,
        tuple(c.node_id for c in cases),
        tuple(c.node_id for c in failing),
        _why(state, cases, failing, unjudged),
        failing[0].repro if failing else "",
    )


def _breaks(case: CaseRecord, question: str) -> bool:
    if any(v.get("invariant") in CRASH_QUESTIONS[question].broken_by for v in case.violations):
        return True
    if question == "told_the_truth":
        return any(str(m.get("field", "")).startswith("told[") for m in case.mismatches)
    if question == "turn_finished":
        return case.status in ("hung", "error")
    return False


def _asks(case: CaseRecord, question: str, cls: str) -> bool:
    """Whether the case put the question to the agent at all: a pass needs one that did."""
    unjudged = {entry.partition(":")[0] for entry in case.not_applicable}
    judged = CRASH_QUESTIONS[question].broken_by - unjudged
    if question == "told_the_truth":
        # told: expectations (stated, or implied by a code:) ask it of every class; the
        # told_the_truth invariant asks it of non-idempotent calls.
        return bool(case.expected.get("told")) or (cls == "non_idempotent" and bool(judged))
    return bool(judged)


def build_scorecard(results: Results | Sequence[CaseRecord], agent: str = "") -> Scorecard:
    if isinstance(results, Results):
        agent, cases = agent or results.agent, results.cases
    else:
        cases = tuple(results)
    rows: list[EvalRow] = []
    for eval_id, spec in SEED004_EVALS.items():
        mine = [case for case in cases if eval_id in case.evals]
        rows.append(_row(eval_id, spec.title, "seed004", mine, [c for c in mine if c.failing], mine))
    for column in CRASH_COLUMNS:
        for cls in CLASSES:
            mine = [case for case in cases if case.boundary == column and cls in case.idempotency]
            if not mine and not any(c.status != "not_applicable" and cls in c.idempotency for c in cases):
                # No scenario of this class applies to the agent (each has one case, clean,
                # saying why): its crash evals inherit those reasons.
                mine = [c for c in cases if cls in c.idempotency]
            for question, asked in CRASH_QUESTIONS.items():
                if cls not in asked.classes:
                    continue
                rows.append(
                    _row(
                        crash_eval_id(column, cls, question),
                        f"{column}, {cls}: {asked.title}",
                        "crash",
                        mine,
                        [case for case in mine if _breaks(case, question)],
                        [case for case in mine if _asks(case, question, cls)],
                        asked.broken_by,
                    )
                )
    return Scorecard(agent, tuple(rows))
