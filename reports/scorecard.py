"""The scorecard: the named evals, each a row with its verdict and the cases behind it (pure).

A run's results answer named questions any agent can be asked, so that two agents' runs are
comparable row by row:

* seed 004's list (``harness.core.evals.SEED004_EVALS``): each eval is shown by the
  scenarios that declare it (``evals:``), and holds when every case of them that ran passed;
* the crash evals: for each crash column and idempotency class, the questions of
  ``CRASH_QUESTIONS`` -- no double effect (non-idempotent tools), the model was told the
  truth, the ledger said running first, the turn finished -- each failed only by a case
  that breaks that question (its invariant, an unmet ``told:``, a case that never
  finished), so a case that fails on something else does not make "no double effect" fail;
  a case the harness could not judge (an ``error`` with nothing observed) fails them all.
  The tool-side columns are crash columns here: the tool side failed one call, and the
  truth the model was told includes ``no_success_without_answer``.
  A case answers the rows of ONE class: the class of the call its crash point names, under
  that call's contract (``CaseRecord.crash_class``, ``harness.core.evals.crashed_call``), so
  a crash on ``send_email`` never answers for ``read_file`` in the same scenario. A clean
  case, or a point naming no call, answers only seed 004's rows, which have no class.

A failing row's ``why`` is the finding that answers ITS question in its first failing case
(the ``non_idempotent_at_most_once`` violation for "no double effect", the unmet
``told[...]`` for "told the truth"), not whatever that case lists first.

Counts mean what they mean in the matrix (``matrix.COUNTS``): ``n/m`` is n of the row's m
cases that passed it -- judged, asked its question and did not break it (for seed 004's
rows: the case passed) -- so a case not reached, not applicable, hung for another row, or
silent on the question counts in m, never in n.

A row is ``fail`` (a case broke it), ``pass`` (a judged case asked it -- its invariant
applied, or a ``told:`` was stated -- and none broke it), ``not_applicable`` (its cases were
not applicable to this agent, or what answers it cannot be judged on it: the reasons), or
``not_reached`` (no case of it ran, or none asked it). Nothing is a pass that no case showed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from crashmatrix.harness.core.boundaries import BOUNDARIES, TORN_WRITE
from crashmatrix.harness.core.evals import CRASH_QUESTIONS, SEED004_EVALS, crash_eval_id
from crashmatrix.harness.plan.enumeration import POWER_COLUMN, TOOL_SIDE_COLUMNS
from crashmatrix.reports.causes import findings, first_reason
from crashmatrix.reports.results import CaseRecord, Results

__all__ = ["CLASSES", "COUNTS", "CRASH_COLUMNS", "EvalRow", "Scorecard", "build_scorecard"]

CLASSES = ("idempotent", "conditional", "non_idempotent")
# The one meaning of a row's count, in every view (the matrix's ``COUNTS``, said of a question).
COUNTS = (
    "n/m: n of the row's m cases passed its question (a case failing on another check still "
    "counts in n; one not reached, not applicable, unfinished or not asking it counts in m, "
    "never in n)"
)
# The tool-side columns too: the tool side fails one call and the agent lives on; a case
# answers for the class of the call the fault hit, as a crash case does.
CRASH_COLUMNS = (*BOUNDARIES, TORN_WRITE, POWER_COLUMN, "recovery", *TOOL_SIDE_COLUMNS)
_JUDGED = ("passed", "failed")  # a verdict was reached on the agent (hung/error break "finished")


@dataclass(frozen=True, slots=True)
class EvalRow:
    id: str
    title: str
    kind: str  # "seed004" | "crash"
    state: str  # "pass" | "fail" | "not_applicable" | "not_reached"
    cases: tuple[str, ...]  # node ids of every case behind the row
    failing: tuple[str, ...] = ()  # node ids of the cases that broke it
    why: str = ""  # for fail: what broke its question in the first failing case; n.a.: the reasons
    repro: str = ""  # for fail: the command that reruns the first failing case
    passed: tuple[str, ...] = ()  # node ids of the cases that passed it (the n of n/m)

    @property
    def ratio(self) -> str:
        """``n/m``: n of its m cases passed it (``matrix.COUNTS``)."""
        return f"{len(self.passed)}/{len(self.cases)}"

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "title": self.title,
            "kind": self.kind,
            "state": self.state,
            "cases": list(self.cases),
            "failing": list(self.failing),
            "passed": list(self.passed),
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
    answer: Callable[[CaseRecord], str],
    unclassed: int,
) -> str:
    if state == "fail":
        first = failing[0]
        return f"{first.title}: {answer(first)}"
    if state == "not_applicable":
        return "; ".join(unjudged or dict.fromkeys(p for case in cases for p in case.problems))
    if state == "not_reached":
        if not cases and unclassed:
            return (
                f"no case of it ran ({unclassed} at this crash point name no call with a class: a "
                "results file from before crashmatrix recorded the crashed call's class, run again)"
            )
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
    answer: Callable[[CaseRecord], str],
    checks: frozenset[str] = frozenset(),
    unclassed: int = 0,
) -> EvalRow:
    unjudged = _unjudged(cases, checks)
    state = _state(cases, failing, asking, unjudged)
    broke = {c.node_id for c in failing}
    return EvalRow(
        eval_id,
        title,
        kind,
        state,
        tuple(c.node_id for c in cases),
        tuple(c.node_id for c in failing),
        _why(state, cases, failing, unjudged, answer, unclassed),
        failing[0].repro if failing else "",
        # Judged, asked and not broken: the n of n/m (allowed-indeterminate passes included).
        tuple(c.node_id for c in asking if c.status in _JUDGED and c.node_id not in broke),
    )


def _answers(case: CaseRecord, question: str) -> list[str]:
    """What in ``case`` says no to ``question``, one line each, in ``causes``' words and
    order: its invariants, an unmet ``told[...]`` (the truth), a hang or error (the turn)."""
    keys = set(CRASH_QUESTIONS[question].broken_by)
    if question == "told_the_truth":
        keys.add("told")
    if question == "turn_finished" or (case.status == "error" and case.observed is None):
        # An error with nothing observed (the harness failed in the case, or pytest failed
        # it with no record) answers no question: unknown, so every row of it fails, never
        # a pass no case showed.
        keys |= {"hung", "error"}
    return [finding.text for finding in findings(case) if finding.key in keys]


def _first_answer(question: str) -> Callable[[CaseRecord], str]:
    """A failing row's why: the first thing its first failing case broke of ITS question."""

    def answer(case: CaseRecord) -> str:
        return _answers(case, question)[0]

    return answer


def _breaks(case: CaseRecord, question: str) -> bool:
    return bool(_answers(case, question))


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
        failing = [c for c in mine if c.failing]
        rows.append(_row(eval_id, spec.title, "seed004", mine, failing, mine, first_reason))
    for column in CRASH_COLUMNS:
        unclassed = sum(case.boundary == column and not case.crash_class for case in cases)
        for cls in CLASSES:
            mine = [case for case in cases if case.boundary == column and case.crash_class == cls]
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
                        _first_answer(question),
                        asked.broken_by,
                        unclassed,
                    )
                )
    return Scorecard(agent, tuple(rows))
