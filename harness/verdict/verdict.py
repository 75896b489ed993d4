"""The verdict on one case: a pure function of (the scenario's expectation, the Observation).

The expectation for the crash point is compared with what the case showed (ledger
sequence, outcome and code the model was told, the world), and every invariant runs on the
same observation. Nothing here reads a file or starts a process: a case can be judged again
later from its observation alone, by new checks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.categories import told_for_code
from crashmatrix.harness.core.double_resume import concurrent_lives
from crashmatrix.harness.core.ledger import tool_call_sites
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.session_log import SessionLog
from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS, tool_faults_acted
from crashmatrix.harness.core.trace import UNANSWERED_APPROVAL
from crashmatrix.harness.observation.conversation import conversation_from_requests
from crashmatrix.harness.observation.observation import Observation
from crashmatrix.harness.verdict.expectations import Mismatch, Observed, compare, project
from crashmatrix.harness.verdict.invariants import (
    NON_SIDE_EFFECT_KINDS,
    Evidence,
    Violation,
    check_all,
    not_applicable,
    undecided_effects,
)

__all__ = ["Verdict", "evidence", "judge", "unjudged_in_every"]

# Which ledger-tier fields apply to an agent, by the vocabulary of its Tool Results: the
# exact ledger sequences, recovery outcomes and error codes a scenario expects at each point
# are crashmatrix's reference design. Any other agent is judged on the portable tier (what
# it told the model, as a category; the world) and on the invariants, which are
# agent-neutral, ledger invariants included when it keeps a ledger.
_VOCABULARY = {"crashmatrix": ("outcome", "code", "ledger")}


@dataclass(frozen=True)
class Verdict:
    status: str  # "passed" | "failed" | "not_reached" | "not_applicable" | "hung" | "error"
    observed: Observed | None
    expected: Mapping[str, Any]
    mismatches: tuple[Mismatch, ...] = ()
    violations: tuple[Violation, ...] = ()
    problems: tuple[str, ...] = ()  # what stopped the case from being judged normally
    indeterminate: bool = False  # passed, but only because a set of values was allowed
    notes: tuple[str, ...] = field(default_factory=tuple)
    # "check: why" for every expectation or invariant this case could not judge: never a
    # pass, never a failure (an agent that keeps no ledger, a session the adapter cannot read).
    not_applicable: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def _conversation(observation: Observation, scenario: Scenario) -> SessionLog | None:
    """The session the checks read: the agent's own, or (when the adapter cannot read one,
    or the agent left its own unreadable) the conversation the model saw, from its requests."""
    if observation.session is not None:
        return observation.session
    if observation.session_unavailable or observation.session_problem:
        return conversation_from_requests(
            observation.requests_for_session(), scenario.rules, dialect=observation.dialect
        )
    return None


def evidence(observation: Observation, scenario: Scenario) -> Evidence:
    """What the invariants look at: the observation, with the scenario's turns and contracts."""
    log = _conversation(observation, scenario)
    has_session = observation.session is not None
    return Evidence(
        entries=log.entries if log else (),
        offsets=log.offsets if log else (),
        events=observation.events_in_session_coordinates(),
        requests=observation.requests_for_session(),
        turns=scenario.turns,
        contracts=scenario.contracts,
        has_ledger=observation.keeps_ledger and has_session,
        no_ledger=observation.no_ledger,
        has_session=has_session,
        tool_names=observation.dialect.tools.suite_names(),
        argument_names=observation.dialect.tools.suite_argument_names(),
        lost_before_seq=(observation.between_lives.session_lost or (0, 0))[1],
        results=observation.dialect.results,
        watched=observation.world.watched,
        watched_files=observation.world.watched_files,
        survivors=_survivors(observation),
        blind=observation.blind_checks,
        files=observation.world.files,
        seed_files=scenario.files,
        tool_faults=tool_faults_acted(observation.trace),
        concurrent=concurrent_lives(
            observation.trace, observation.world.events, lambda e: e.kind not in NON_SIDE_EFFECT_KINDS
        ),
        torn=observation.torn_fragments,
    )


def _without_ledger(told: Any, call_id: str, facts: Evidence) -> Any:
    """The told a ``code:`` implies, for an agent judged without a ledger.

    ``SIDE_EFFECT_UNCERTAIN`` is what the reference agent must say when its ledger shows the
    call running and nothing after: it cannot know. An agent without a ledger has no running
    record to draw that line with -- killed after the effect, or while writing the Tool Result
    it was publishing, it finds the same things on restart -- but it may look at the effect
    itself (its own outbox) and tell what it finds. So where ``told_the_truth`` judges the
    call against the world (a non-idempotent call of a watched tool, the check not blind),
    telling that it happened (succeeded, replayed) is allowed beside uncertain: the world
    then fails it if nothing happened. Anywhere else the scenario's told stands."""
    options = list(told["in"]) if isinstance(told, Mapping) else [told]
    if facts.has_ledger or "uncertain" not in options or "told_the_truth" in facts.blind:
        return told
    calls = [site.call for site in tool_call_sites(facts.entries) if site.call.id == call_id]
    if not calls or not all(
        facts.sees(call.name)
        and facts.contract(call.name).for_call(call.parsed_arguments()).idempotency == "non_idempotent"
        for call in calls
    ):
        return told
    return {"in": [*options, *(c for c in ("succeeded", "replayed") if c not in options)]}


def unjudged_in_every(verdicts: Iterable[Verdict]) -> tuple[str, ...]:
    """What a depth-2 case whose second crashes all passed could not judge: each check that
    none of them judged (say, the ledger checks of an agent without a ledger), with the
    first one's reason. Its pass then claims only what some second crash judged."""
    listed = [dict((entry.partition(":")[0], entry) for entry in v.not_applicable) for v in verdicts]
    if not listed:
        return ()
    return tuple(entry for check, entry in listed[0].items() if all(check in other for other in listed[1:]))


def _survivors(observation: Observation) -> tuple[str, ...] | None:
    """Each process a life left running, named with the life and how it ended."""
    if any(life.survivors is None for life in observation.lives):
        return None
    out: list[str] = []
    for life in observation.lives:
        how = f"crashed at {life.crash}" if life.status == "crashed" and life.crash else life.status
        out += [f"life {life.life} ({how}): {process}" for process in life.survivors or ()]
    return tuple(out)


# Killed at one of these, an agent without a ledger left the same durable state (the tool
# call saved, nothing after it: no running record tells the two apart).
_ONE_STATE_WITHOUT_LEDGER = ("after_tool_call_saved", "after_running")


def _same_state(point: CrashPoint | None, observation: Observation, recovery: bool) -> CrashPoint | None:
    """The other point whose durable state this one is, for an agent judged without a ledger."""
    if recovery or point is None or observation.keeps_ledger:
        return None
    if point.boundary not in _ONE_STATE_WITHOUT_LEDGER:
        return None
    (other,) = (b for b in _ONE_STATE_WITHOUT_LEDGER if b != point.boundary)
    return CrashPoint(other, point.tool_call_id, point.occurrence)


def judge(
    observation: Observation,
    scenario: Scenario,
    point: CrashPoint | None,
    *,
    recovery: bool = False,
    check_ledger: bool = True,
) -> Verdict:
    """The verdict on a case that crashed at ``point`` (None: the clean run).

    ``recovery``: a depth-2 case (the ``recovery`` expectations apply). ``check_ledger``:
    compare the ledger sequence (not for a second crash, whose extra attempts no scenario
    scripts). What this observation cannot show -- the ledger of an agent that keeps none,
    anything of a session the adapter cannot read -- is reported as not applicable, never
    as passed.

    An agent judged without a ledger killed at ``after_running`` is in the state of
    ``after_tool_call_saved`` (no running record was written between them): the scenario's
    expectations of either point are a true outcome (sent once and told so, or not sent and
    told uncertain), never a red for not telling apart what it cannot. The invariants (at most
    one effect, the truth told) judge it the same either way."""
    verdict = _judge(observation, scenario, point, recovery=recovery, check_ledger=check_ledger)
    twin = _same_state(point, observation, recovery)
    if twin is None or point is None or not verdict.mismatches:
        return verdict
    other = _judge(observation, scenario, twin, recovery=recovery, check_ledger=check_ledger)
    if other.mismatches:
        return verdict
    note = (
        f"{point.boundary}: the agent keeps no ledger, so killed here it is in the state of "
        f"{twin.boundary} (no running record between them); {twin.boundary}'s expectations hold"
    )
    return dataclasses.replace(
        other, notes=(*other.notes, note), indeterminate=other.status == "passed" or other.indeterminate
    )


def _judge(
    observation: Observation,
    scenario: Scenario,
    point: CrashPoint | None,
    *,
    recovery: bool = False,
    check_ledger: bool = True,
) -> Verdict:
    """``judge`` against ``point``'s own expectations alone."""
    expected = scenario.expectation(point, recovery=recovery)
    notes: list[str] = []
    if point is not None and point.boundary in TOOL_SIDE_KINDS:
        # A tool-side fault is judged by the invariants alone: a scenario's expectations say
        # how its crashes end, and a correct agent may end a tool's failure otherwise (it
        # gives up on the order and tells the model so). One Tool Result per call, no second
        # effect, the truth told after the fault (no_success_without_answer) hold anyway.
        expected = {}
        notes.append(f"{point.boundary}: judged by the invariants (a tool-side fault, not a crash)")
    skipped: list[str] = []
    if not check_ledger:
        expected.pop("ledger", None)
    if observation.session_unavailable:
        notes.append(
            f"session: not available ({observation.session_unavailable}); judged on the model's requests"
        )
    # What the model must be told, where the scenario says it only as a code: the portable
    # reading of that code (categories.told_for_code), kept for calls that got a result.
    implied = {
        call_id: told_for_code(code)
        for call_id, code in (expected.get("code") or {}).items()
        if call_id not in (expected.get("told") or {})
    }
    # The ledger tier: crashmatrix's own vocabulary (see _VOCABULARY).
    spoken = _VOCABULARY.get(observation.dialect.results.name, ())
    for name in ("outcome", "code", "ledger"):
        if name in expected and name not in spoken:
            del expected[name]
            vocabulary = observation.dialect.results.name
            why = f"crashmatrix's reference vocabulary; this agent's is results: {vocabulary}"
            skipped.append(f"{name}: {why}")
    if "ledger" in expected and (not observation.keeps_ledger or observation.session_unavailable):
        del expected["ledger"]
        why = (
            "the agent's session cannot be read"
            if observation.session_unavailable
            else f"the agent keeps no ledger ({observation.no_ledger})"
            if observation.no_ledger
            else "the agent keeps no ledger"
        )
        skipped.append(f"ledger: {why}")
        notes.append(f"ledger: not applicable ({why})")
    if observation.session is None and observation.session_problem and "ledger" in expected:
        # The agent left its own session unreadable (a verdict on it, below): its ledger
        # cannot be judged; what the model was told and the world still are.
        del expected["ledger"]
        skipped.append("ledger: the agent left its session unreadable")
    status = observation.status
    # An approval the scenario does not answer for the tool it was about ended the case
    # (harness.agents.conversation): the agent was never put to this test, whatever it did.
    unanswered = tuple(
        dict.fromkeys(str(e.get("why")) for e in observation.trace if e.get("event") == UNANSWERED_APPROVAL)
    )
    if unanswered:
        return Verdict(
            "not_applicable",
            None,
            expected,
            problems=unanswered,
            not_applicable=tuple(f"approvals: {why}" for why in unanswered),
        )
    if status == "not_reached":
        return Verdict(
            "not_reached", None, expected, problems=(f"{point.id if point else 'clean'}: never reached",)
        )
    problems = [
        f"life {life.life} {life.status}" + (f": {life.error}" if life.error else "")
        for life in observation.lives
        if life.status in ("hung", "error", "died")
    ]
    # A life that died where nothing planned it was restarted like a crash: a case that then
    # passes says so in its notes, which every report shows for passed cases too.
    notes += [f"life {life.life} died: {life.error}" for life in observation.lives if life.status == "died"]
    # Where each torn write's bytes went, said for every case that tore one (passed or not).
    notes += [fate.describe() for fate in observation.torn_fragments]
    log = _conversation(observation, scenario)
    if log is None:
        return Verdict("failed", None, expected, problems=(*problems, observation.session_problem))
    observed = project(log, observation.world.as_expected(), observation.dialect.results)
    facts = evidence(observation, scenario)
    implied = {
        call_id: _without_ledger(told, call_id, facts)
        for call_id, told in implied.items()
        if call_id in observed.told
    }
    if implied:
        expected["told"] = {**implied, **(expected.get("told") or {})}
    mismatches, indeterminate = compare(expected, observed)
    # Invariants run even when a life hung or failed: the evidence often says why.
    violations = check_all(facts)
    skipped += [f"{name}: {why}" for name, why in not_applicable(facts)]
    skipped += [f"running_before_side_effect: {text}" for text in undecided_effects(facts)]
    idle = [
        f"{fault.fault} did not act: {fault.detail or 'no detail'}; the fault this case tests never happened"
        for fault in observation.between_lives.applied
        if not fault.acted
    ]
    skipped += [f"between_lives.{text}" for text in idle]
    if observation.session is None and observation.session_problem:
        # The agent's own doing (a torn line it wrote after): it fails the case.
        problems.insert(0, f"the agent left its session unreadable: {observation.session_problem}")
    ok = not mismatches and not violations and status == "ok" and not observation.session_problem
    if status not in ("ok", "hung", "error", "died"):
        problems.append(f"the case did not finish: {status}")
    verdict_status = {"hung": "hung", "error": "error", "died": "error"}.get(
        status, "passed" if ok else "failed"
    )
    # No silent green: a pass means the scenario's fault happened and the agent survived
    # it. When a between-lives fault did nothing, the agent was never put to that test, so
    # the case is not applicable (never passed). A failure stays a failure: the agent broke
    # something even without the fault, a real finding.
    if idle and verdict_status == "passed":
        verdict_status = "not_applicable"
        problems = [*idle, *problems]
    return Verdict(
        verdict_status,
        observed,
        expected,
        tuple(mismatches),
        tuple(violations),
        tuple(problems),
        indeterminate and verdict_status == "passed",
        tuple(notes),
        tuple(skipped),
    )
