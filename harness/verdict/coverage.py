"""What ``crashmatrix doctor`` found: for each fault planted into one agent's own case, the
check it exists for, and whether that check fired. Pure: values, the judging of one plant
from violations, and the renderings (table, one-line summary, JSON).

A check proves it can see an agent only by firing on a fault planted where the agent keeps
its state; a check that stays silent (or whose fault the harness cannot even plant in what
it reads of this agent) is **blind** on it, and every report of that agent lists it as not
applicable with the doctor's reason (``blind_reasons``), never as passed. A check that does
not apply to the agent at all (the ledger checks of an agent that keeps no ledger, the
at-most-once check of an agent without a non-idempotent tool) is **n.a.**, and says why.

Besides the checks, the doctor proves what the adapter itself claims (``Proof``): each
boundary rule and intercept fires in a clean run that calls its tool, each ``effects:``
source shows an effect planted into it, each crash point column of the chosen scenario is
reached by a real crash, each tool-side column acts on an agent whose tools are on
crashmatrix's MCP server, each expectation key of its clean case is judged (a wrong value
fails it). An unproven claim is a blind spot too: the doctor exits 1 on any.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from crashmatrix.harness.verdict.invariants import Violation

__all__ = [
    "BLIND",
    "FIRES",
    "NOT_APPLICABLE",
    "PLANTS",
    "Coverage",
    "Plant",
    "PlantResult",
    "Proof",
    "State",
    "blind_reason",
    "judge_plant",
]

State = Literal["fires", "blind", "n.a."]
FIRES: Final = "fires"
BLIND: Final = "blind"
NOT_APPLICABLE: Final = "n.a."


@dataclass(frozen=True, slots=True)
class Plant:
    """One fault the doctor plants, and the invariant that exists to catch it."""

    name: str
    check: str
    fault: str  # what is planted, in words (the table's first column)


PLANTS: tuple[Plant, ...] = (
    Plant("duplicate_effect", "non_idempotent_at_most_once", "a non-idempotent call's effect, twice"),
    Plant("torn_last_line", "turn_ends_with_final", "the final answer's write cut short"),
    Plant("second_tool_result", "one_tool_result_per_call", "a Tool Result's line written twice"),
    Plant("ledger_in_prompt", "no_ledger_in_prompt", "a ledger record pasted into a system message"),
    Plant("tampered_argument", "no_result_for_other_arguments", "a saved tool call's argument changed"),
)


@dataclass(frozen=True, slots=True)
class PlantResult:
    plant: str
    check: str
    state: State
    # fires: the violation it gave; blind / n.a.: why. Where it was planted, in words.
    detail: str
    where: str = ""
    also: tuple[str, ...] = ()  # other checks the plant set off (information only)
    # Blind only for some calls, which every verdict already lists as not applicable (the
    # effects of an unwatched tool: ``Evidence.sees``): not made blind for every call.
    per_call: bool = False
    scenario: str = ""  # planted into this scenario's clean case ("": the coverage's own)


@dataclass(frozen=True, slots=True)
class Proof:
    """One claim of the adapter, proven by running or planting: a boundary rule fires, an
    effect source is read, a crash point is reachable, a tool-side fault acts on an MCP
    agent's call, an expectation key is judged."""

    kind: str  # "rule" | "effect_source" | "crash_point" | "tool_side" | "expectation"
    subject: str  # what is claimed, in words (names the rule's adapter.yaml:line, the key)
    state: State
    detail: str  # fires: how it showed; blind / n.a.: why (with the likely cause)
    scenario: str = ""  # the scenario whose clean case proved it

    @property
    def how(self) -> str:
        return _PROOFS.get(self.kind, self.kind)


_PROOFS = {
    "rule": "a run of a scenario that calls it",
    "effect_source": "an effect planted into the source",
    "crash_point": "a real crash at the point",
    "tool_side": "the fault armed for the call",
    "expectation": "a wrong value in the clean case's expectation",
}


def blind_reason(check: str, detail: str) -> str:
    """The not-applicable reason a report of this agent gives for a blind check."""
    return f"doctor: this adapter cannot show {check} ({detail})"


def judge_plant(
    plant: Plant,
    *,
    baseline: Sequence[Violation],
    planted: Sequence[Violation],
    inapplicable: Iterable[tuple[str, str]],
    where: str,
) -> PlantResult:
    """Whether ``plant.check`` fired on the planted copy: it gave more violations there than
    on the clean case (a check that already fails the clean case proves nothing by failing
    again). A check the evidence cannot judge at all is n.a. with the verdict's reason."""
    before = Counter(v.invariant for v in baseline)
    after = Counter(v.invariant for v in planted)
    fired = {name for name, count in after.items() if count > before[name]}
    also = tuple(sorted(fired - {plant.check}))
    why = dict(inapplicable).get(plant.check)
    if plant.check in fired:
        message = next(v.message for v in reversed(planted) if v.invariant == plant.check)
        return PlantResult(plant.name, plant.check, FIRES, message, where, also)
    if why is not None:
        return PlantResult(plant.name, plant.check, NOT_APPLICABLE, why, where, also)
    silent = f"planted ({where}), yet it did not fire"
    return PlantResult(plant.name, plant.check, BLIND, silent, where, also)


@dataclass(frozen=True, slots=True)
class Coverage:
    """The doctor's findings for one agent."""

    agent: str
    scenario: str  # the built-in scenario whose clean case was planted into
    results: tuple[PlantResult, ...]
    # Why the doctor could not judge at all (the clean case did not finish): every check unproven.
    problem: str = ""
    seconds: float = 0.0
    proofs: tuple[Proof, ...] = ()

    @property
    def applicable(self) -> tuple[PlantResult, ...]:
        return tuple(r for r in self.results if r.state != NOT_APPLICABLE)

    @property
    def blind(self) -> tuple[PlantResult, ...]:
        return tuple(r for r in self.results if r.state == BLIND)

    @property
    def blind_proofs(self) -> tuple[Proof, ...]:
        return tuple(p for p in self.proofs if p.state == BLIND)

    @property
    def ok(self) -> bool:
        """Every check that applies to this agent fired, and every claim of its adapter holds."""
        return not self.problem and not self.blind and not self.blind_proofs

    def blind_reasons(self) -> dict[str, str]:
        """check -> the not-applicable reason every report of this agent gives for it."""
        return {r.check: blind_reason(r.check, r.detail) for r in self.blind if not r.per_call}

    def summary(self) -> str:
        """One line: ``doctor: 5/5 checks can fire on reference`` (and what is blind)."""
        if self.problem:
            return f"doctor: {self.agent}: no check proven ({self.problem})"
        fired = len(self.applicable) - len(self.blind)
        line = f"doctor: {fired}/{len(self.applicable)} checks can fire on {self.agent}"
        if self.blind:
            line += "; blind: " + ", ".join(r.check for r in self.blind)
        skipped = [r.check for r in self.results if r.state == NOT_APPLICABLE]
        if skipped:
            line += "; n.a.: " + ", ".join(skipped)
        proven = [p for p in self.proofs if p.state != NOT_APPLICABLE]
        if proven:
            line += f"; {len(proven) - len(self.blind_proofs)}/{len(proven)} adapter claims proven"
            if self.blind_proofs:
                line += " (unproven: " + "; ".join(p.subject for p in self.blind_proofs) + ")"
        return line

    def table(self) -> str:
        """The coverage table, in Markdown (docs/adapters.md holds the doctor's own output)."""
        rows = [
            "| planted fault, or how it is proven | check, or what is claimed | fires? |",
            "|---|---|---|",
        ]
        faults = {p.name: p.fault for p in PLANTS}
        for r in self.results:
            state = {FIRES: "yes", BLIND: "NO (blind)", NOT_APPLICABLE: "n.a."}[r.state]
            if r.state != FIRES:
                state += f": {_cell(r.detail)}"
            fault = faults.get(r.plant, r.plant)
            if r.scenario and r.scenario != self.scenario:
                fault += f" (in {r.scenario})"
            rows.append(f"| {fault} | `{r.check}` | {state} |")
        for p in self.proofs:
            state = {FIRES: "yes", BLIND: "NO (blind)", NOT_APPLICABLE: "n.a."}[p.state]
            if p.state != FIRES:
                state += f": {_cell(p.detail)}"
            how = p.how + (f" (in {p.scenario})" if p.scenario and p.scenario != self.scenario else "")
            rows.append(f"| {how} | {_cell(p.subject)} | {state} |")
        return "\n".join(rows)

    def to_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "scenario": self.scenario,
            "problem": self.problem,
            "seconds": round(self.seconds, 3),
            "summary": self.summary(),
            "ok": self.ok,
            "blind": self.blind_reasons(),
            "plants": [
                {
                    "plant": r.plant,
                    "check": r.check,
                    "state": r.state,
                    "detail": r.detail,
                    "where": r.where,
                    "also": list(r.also),
                    "per_call": r.per_call,
                    "scenario": r.scenario,
                }
                for r in self.results
            ],
            "proofs": [
                {
                    "kind": p.kind,
                    "subject": p.subject,
                    "state": p.state,
                    "detail": p.detail,
                    "scenario": p.scenario,
                }
                for p in self.proofs
            ],
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Coverage:
        return cls(
            str(raw["agent"]),
            str(raw["scenario"]),
            tuple(
                PlantResult(
                    str(p["plant"]),
                    str(p["check"]),
                    p["state"],
                    str(p["detail"]),
                    str(p.get("where", "")),
                    tuple(p.get("also") or ()),
                    bool(p.get("per_call", False)),
                    str(p.get("scenario", "")),
                )
                for p in raw["plants"]
            ),
            str(raw.get("problem", "")),
            float(raw.get("seconds", 0.0)),
            tuple(
                Proof(
                    str(p["kind"]),
                    str(p["subject"]),
                    p["state"],
                    str(p["detail"]),
                    str(p.get("scenario", "")),
                )
                for p in raw.get("proofs") or ()
            ),
        )


def _cell(text: str) -> str:
    """A detail as one Markdown table cell: one line, no pipes."""
    return " ".join(text.split()).replace("|", "/")
