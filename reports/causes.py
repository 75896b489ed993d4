"""Failures grouped by cause, Jepsen-checker style (pure).

A failing case can break several things at once: a blind retry that sends a second email
breaks ``non_idempotent_at_most_once`` *and* mismatches ``outcome``, ``told``, ``ledger``,
``code`` and ``world.emails``. Listed case by case, 222 such failures say one thing 222
times; grouped, they are a handful of causes, each with its count of cases and scenarios
and one case to rerun.

A *finding* is one thing a case broke, and its *cause key* is what it is about:

* ``hung`` / ``error``: the case did not finish (a life hung past its deadline, raised or
  died where nothing planned it) -- first, because whatever else it broke may follow from it;
* an invariant's name (``non_idempotent_at_most_once``): a rule every agent must keep,
  whatever the scenario expected -- it ranks before any expectation;
* an expectation key (``outcome``, ``told``, ``ledger``, ``code``, ``world.emails``,
  ``world.files``, ``world.rows``): the scenario's ``expect:`` field, without its call id
  or path, so every call's ``outcome`` mismatch is one cause;
* ``problem``: anything else that stopped the case from being judged (an unreadable
  session, a case that did not finish for another reason).

A case's findings are ranked in that order (the record's own order within a kind), so its
first line names what matters most. A case counts under every cause it shows; the causes
are listed in the same kind order, then by how many cases show them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from crashmatrix.harness.verdict.expectations import show_value
from crashmatrix.reports.results import CaseRecord

__all__ = [
    "KINDS",
    "Cause",
    "Causes",
    "Finding",
    "after_status",
    "cause_code",
    "codes",
    "expectation_key",
    "findings",
    "first_reason",
    "group_causes",
    "reasons",
]

# Rank order of a finding's kind: lower is more important.
KINDS = ("hung", "error", "invariant", "expectation", "problem")
_CALL = re.compile(r"\[.*\]$")


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing a case broke."""

    key: str  # the cause key: "non_idempotent_at_most_once", "outcome", "world.emails", "hung"
    kind: str  # one of KINDS
    text: str  # the reason line a reader sees

    @property
    def rank(self) -> int:
        return KINDS.index(self.kind)


def expectation_key(field: str) -> str:
    """``outcome[call_mail]`` -> ``outcome``; ``world.files[a.txt]`` -> ``world.files``."""
    return _CALL.sub("", field)


def findings(case: CaseRecord) -> tuple[Finding, ...]:
    """What ``case`` broke, most important first (see the module's ranking)."""
    out: list[Finding] = []
    if case.status in ("hung", "error"):
        detail = "; ".join(case.problems) or case.status
        out.append(Finding(case.status, case.status, f"{case.status}: {detail}"))
    for v in case.violations:
        out.append(Finding(str(v["invariant"]), "invariant", f"invariant {v['invariant']}: {v['message']}"))
    for m in case.mismatches:
        field = str(m["field"])
        out.append(
            Finding(
                expectation_key(field),
                "expectation",
                f"{field}: expected {show_value(m['expected'])}, observed {show_value(m['observed'])}",
            )
        )
    if case.status not in ("hung", "error"):
        out += [Finding("problem", "problem", f"problem: {p}") for p in case.problems]
    if not out and case.failing:
        # A failure the record does not explain (an older file): still one cause, by status.
        out.append(Finding("problem", "problem", f"problem: {case.status}, no reason recorded"))
    return tuple(sorted(out, key=lambda f: f.rank))  # stable: the record's order within a kind


def reasons(case: CaseRecord) -> list[str]:
    """Why the case did not pass, one line each, most important first (an invariant before
    an expectation), and which of its depth-2 crashes failed."""
    lines = [f.text for f in findings(case)]
    failed = [str(p["point"]) for p in case.recovery_points if p.get("status") != "passed"]
    if failed:
        lines.append(
            f"{len(failed)} of {len(case.recovery_points)} recovery crash points failed: " + ", ".join(failed)
        )
    return lines or [case.status]


def first_reason(case: CaseRecord) -> str:
    """The one line a list of failures shows for ``case``: its most important finding."""
    return reasons(case)[0]


def after_status(case: CaseRecord) -> str:
    """``first_reason`` as it reads after the case's status (``error: ...``): a reason that
    already starts with the status word does not say it twice ("error: error: ...")."""
    reason = first_reason(case)
    lead = f"{case.status}:"
    return reason[len(lead) :].lstrip() if reason.startswith(lead) else reason


def cause_code(index: int) -> str:
    """A short code for the ``index``-th cause: A .. Z, AA, AB, ... (a cell's footnote)."""
    code = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        code = chr(ord("A") + rest) + code
    return code


_MAX_CODES = 3  # a cell names at most this many causes, then "+N" (its hover has them all)


def codes(causes: Iterable[Cause]) -> str:
    """``A,C``: causes by code for a cell, at most three then ``+N``."""
    shown = [c.code for c in causes]
    if len(shown) > _MAX_CODES:
        shown = [*shown[:_MAX_CODES], f"+{len(shown) - _MAX_CODES}"]
    return ",".join(shown)


@dataclass(frozen=True, slots=True)
class Cause:
    """Every failing case that shows one cause key."""

    key: str
    kind: str
    code: str  # "A", "B", ...: what a cell shows
    cases: tuple[CaseRecord, ...]  # in the order given (the matrix's: row, then column)
    first: int  # how many of them name it on their first line
    representative: CaseRecord  # the one to rerun: it shows this cause first, and little else
    example: str  # the representative's line for this cause

    @property
    def scenarios(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(case.scenario_path for case in self.cases))

    @property
    def counts(self) -> str:
        """``6 cases in 2 scenarios``."""
        cases, scenarios = len(self.cases), len(self.scenarios)
        return (
            f"{cases} case{'s' if cases != 1 else ''} in {scenarios} scenario{'s' if scenarios != 1 else ''}"
        )

    @property
    def detail(self) -> str:
        """The example without the cause's own name in front (a list already shows it)."""
        for prefix in (f"{self.kind} {self.key}: ", f"{self.key}: "):
            if self.example.startswith(prefix):
                return self.example[len(prefix) :]
        return self.example

    @property
    def label(self) -> str:
        """The key with its kind where the key alone would not say it: ``invariant
        non_idempotent_at_most_once``, ``expectation world.emails``, ``hung``."""
        return self.key if self.kind in ("hung", "error", "problem") else f"{self.kind} {self.key}"


@dataclass(frozen=True, slots=True)
class Causes:
    """The causes of a run's failures, most important first."""

    causes: tuple[Cause, ...] = ()

    def __iter__(self) -> Iterator[Cause]:
        return iter(self.causes)

    def __len__(self) -> int:
        return len(self.causes)

    def of(self, cases: Iterable[CaseRecord]) -> tuple[Cause, ...]:
        """The causes shown by any of ``cases`` (a cell's), in list order."""
        ids = {case.node_id for case in cases if case.failing}
        return tuple(c for c in self.causes if any(case.node_id in ids for case in c.cases))

    def by_key(self, key: str) -> Cause | None:
        return next((c for c in self.causes if c.key == key), None)


def group_causes(cases: Iterable[CaseRecord]) -> Causes:
    """Group the failing ones of ``cases`` by cause key."""
    members: dict[str, list[tuple[CaseRecord, tuple[Finding, ...]]]] = {}
    kinds: dict[str, Finding] = {}
    for case in cases:
        if not case.failing:
            continue
        found = findings(case)
        for finding in dict((f.key, f) for f in reversed(found)).values():  # first of each key
            members.setdefault(finding.key, []).append((case, found))
            kinds.setdefault(finding.key, finding)
    order = sorted(members, key=lambda key: (kinds[key].rank, -len(members[key]), key))
    out = []
    for index, key in enumerate(order):
        shown = members[key]

        def purity(item: tuple[CaseRecord, tuple[Finding, ...]], key: str = key) -> tuple[int, int]:
            case_findings = item[1]
            return (0 if case_findings[0].key == key else 1, len(case_findings))

        best, best_findings = min(shown, key=purity)  # min is stable: matrix order breaks ties
        out.append(
            Cause(
                key=key,
                kind=kinds[key].kind,
                code=cause_code(index),
                cases=tuple(case for case, _ in shown),
                first=sum(found[0].key == key for _, found in shown),
                representative=best,
                example=next(f.text for f in best_findings if f.key == key),
            )
        )
    return Causes(tuple(out))
