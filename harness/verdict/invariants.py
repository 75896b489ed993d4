"""Invariants checked on EVERY crash case, whatever the scenario says.

A scenario states what its case should end with ("one order", "the file says hello"); these
are the properties no crash at any boundary may break, for any tool and any agent. Each
check is a pure function of the evidence a finished case leaves behind:

* the final session, read back (``entries`` and the end byte ``offsets`` of their lines),
* the world's events (every side effect, with the session size when it happened),
* every request body the model received, and the scenario's user turns,
* the tool contracts, which say whether running a call twice is harmless,
* the workspace's files at the end, and those the scenario seeded before the first life.

Nothing here reads a file or starts a process. A check returns one ``Violation`` per broken
fact, each a single line naming the tool_call_id / execution_id / line / seq involved, so a
report can print it as it is.

Two conventions hold throughout:

* **Scope of a tool call.** Providers reuse ids (``call_0`` in every turn), so a tool call
  owns only what follows its assistant message up to the next user message, or up to the
  next assistant message that reuses the same id, whichever comes first.
* **Ledger invariants** (``LEDGER_INVARIANTS``) are about the ledger lines of seed 000; an
  agent that keeps no ledger is judged on the others only (``Evidence.has_ledger``).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

from crashmatrix.harness.core.categories import CRASHMATRIX, ResultMapping
from crashmatrix.harness.core.contracts import ToolContract, default_contract
from crashmatrix.harness.core.double_resume import ConcurrentLife
from crashmatrix.harness.core.globs import matches
from crashmatrix.harness.core.ledger import (
    ALIASES,
    STATUSES,
    TERMINAL,
    CallSite,
    arguments_sha256,
    check_transitions,
    normalise_status,
    tool_call_sites,
)
from crashmatrix.harness.core.records import Entry, ExecutionRecord, Message, MessageEntry, ToolCall
from crashmatrix.harness.core.session_log import prompt_view
from crashmatrix.harness.core.tool_side import ToolFaultActed
from crashmatrix.harness.core.torn_fragments import FragmentFate
from crashmatrix.harness.core.world_events import HARNESS_EFFECT_KIND, NON_SIDE_EFFECT_KINDS
from crashmatrix.harness.errors import InputError

__all__ = [
    "INVARIANTS",
    "LEDGER_INVARIANTS",
    "NON_SIDE_EFFECT_KINDS",
    "WITHOUT_LEDGER",
    "Evidence",
    "Violation",
    "WorldEventLike",
    "check_all",
    "not_applicable",
    "undecided_effects",
]


_CHAT_ROLES = frozenset({"system", "user", "assistant", "tool"})
_LEDGER_KEYS = ("execution_id", "status", "arguments_sha256", "idempotency_key")


class WorldEventLike(Protocol):
    """One world event, as ``mock_tools.world.WorldEvent`` records it.

    Members are read-only properties so that frozen dataclasses satisfy the protocol.
    """

    @property
    def seq(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def tool_call_id(self) -> str | None: ...
    @property
    def execution_id(self) -> str | None: ...
    @property
    def idempotency_key(self) -> str | None: ...
    @property
    def session_bytes(self) -> int: ...  # session file size when it happened; -1 unknown
    @property
    def detail(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class Evidence:
    """Everything a finished crash case leaves behind."""

    entries: Sequence[Entry]  # the final session, as read back
    offsets: Sequence[int]  # end byte offset of each entry (SessionLog.offsets)
    events: Sequence[WorldEventLike]  # the world's events in seq order
    requests: Sequence[Mapping[str, Any]]  # every chat-completion request body, in order
    turns: Sequence[str]  # the user messages the scenario sends, in order
    contracts: Mapping[str, ToolContract]  # by tool name; missing => default_contract
    has_ledger: bool = True  # False: the agent keeps no ledger, ledger invariants do not apply
    # Why it has none, in the adapter's words (declared so, or none in this case's session):
    # part of every not-applicable reason of a ledger invariant. "": no more to say.
    no_ledger: str = ""
    # False: the adapter cannot read the agent's session; ``entries`` are the conversation as
    # the model saw it (its last request and its answer), with no byte offsets (-1).
    has_session: bool = True
    # How to read what a Tool Result told the model (the agent's ``results:``).
    results: ResultMapping = CRASHMATRIX
    # The agent's tool name -> the suite's, where they differ (its ``catalogue:``): contracts
    # and world events speak the suite's names, the session the agent's.
    tool_names: Mapping[str, str] = field(default_factory=dict)
    # Agent tool name -> {its argument -> the suite's}, where its ``catalogue:`` renames them:
    # a check that reads a call's arguments by the suite's contract reads them through this.
    argument_names: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # World events up to this seq happened before a power loss took session lines: their
    # ``session_bytes`` measure a session that is gone, so a running record missing for one
    # is said to be lost with the cut (never made durable), not misplaced. 0: no such loss.
    lost_before_seq: int = 0
    # The suite's tools whose side effects are among ``events`` (WorldView.watched); None:
    # every tool's. For any other tool, no event is no evidence.
    watched: frozenset[str] | None = None
    # Of those, the tools seen only through file probes (``effects:`` of kind ``files``) ->
    # the globs the probes watch: a call whose paths lie outside them acts unseen there.
    watched_files: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Invariants ``crashmatrix doctor`` found blind on this agent (check -> why): its planted
    # fault did not make them fire, so their silence proves nothing. Not applicable, not run.
    blind: Mapping[str, str] = field(default_factory=dict)
    # The processes the agent left running when one of its lives ended, one line each
    # ("life 1, crashed at P: pid 42 `sh -c ...` (session 42)"); None: not trackable here.
    survivors: Sequence[str] | None = ()
    # The workspace's files after the last life (path -> text; None: not a regular file) and
    # the scenario's files before the first (``files:``). ``files`` None: not observed.
    files: Mapping[str, str | None] | None = None
    seed_files: Mapping[str, str] = field(default_factory=dict)
    # The tool-side faults that acted in the case (the trace's ``fault`` events of a tool-side
    # column, ``harness.core.tool_side``), each with the agent's later tool-side requests.
    tool_faults: Sequence[ToolFaultActed] = ()
    # The lives that resumed the session at the same time (a ``double@P`` case,
    # ``harness.core.double_resume``), each with what it did; () in any other case.
    concurrent: Sequence[ConcurrentLife] = ()
    # Where the bytes of each torn write of the case went in the final session file
    # (``harness.core.torn_fragments``); () when no write was torn.
    torn: Sequence[FragmentFate] = ()

    def sees(self, name: str) -> bool:
        """Whether the side effects of the agent's tool ``name`` are recorded as events."""
        return self.watched is None or self.suite(name) in self.watched

    def __post_init__(self) -> None:
        if len(self.offsets) != len(self.entries):
            raise InputError(
                f"Evidence has {len(self.entries)} entries but {len(self.offsets)} offsets; "
                "pass SessionLog.offsets from the same read_session() as the entries"
            )

    def suite(self, name: str) -> str:
        """The suite's name of a tool the agent called."""
        return self.tool_names.get(name, name)

    def contract(self, name: str) -> ToolContract:
        return self.contracts.get(self.suite(name)) or default_contract(name)


@dataclass(frozen=True, slots=True)
class Violation:
    invariant: str  # the invariant's name, e.g. "one_tool_result_per_call"
    message: str  # one line naming the tool_call_id / execution_id / line / seq involved
    tool_call_id: str | None = None


# ---------------------------------------------------------------------------- shared views


@dataclass(frozen=True, slots=True)
class _Scope:
    """One tool call and the part of the session it owns: (site.message_index, end)."""

    site: CallSite
    end: int  # exclusive index into entries

    def owns(self, index: int) -> bool:
        return self.site.message_index < index < self.end


def _line(entries: Sequence[Entry], index: int) -> int:
    """1-based line of an entry; entries built in memory (line 0) count by position."""
    return entries[index].line or index + 1


def _scopes(entries: Sequence[Entry]) -> list[_Scope]:
    scopes: list[_Scope] = []
    for site in tool_call_sites(entries):
        end = len(entries)
        for index in range(site.message_index + 1, len(entries)):
            entry = entries[index]
            if not isinstance(entry, MessageEntry):
                continue
            message = entry.message
            if message.role == "user" or (
                message.role == "assistant" and any(c.id == site.call.id for c in message.tool_calls)
            ):
                end = index
                break
        scopes.append(_Scope(site, end))
    return scopes


def _owner(scopes: Sequence[_Scope], call_id: str, index: int) -> _Scope | None:
    """The call a line with ``call_id`` at ``index`` belongs to (the latest whose scope has it)."""
    owner = None
    for scope in scopes:
        if scope.site.call.id == call_id and scope.owns(index):
            owner = scope
    return owner


@dataclass(frozen=True, slots=True)
class _Ledger:
    """The ledger grouped per call site, as ``harness.core.ledger.executions_by_call`` groups it
    (bounded by the call's scope), plus the lines no call owns."""

    by_scope: tuple[tuple[_Scope, tuple[tuple[str, tuple[int, ...]], ...]], ...]
    orphans: tuple[int, ...]  # indices of ledger lines no tool call owns

    def executions(self) -> Iterable[tuple[_Scope, str, tuple[int, ...]]]:
        for scope, groups in self.by_scope:
            for execution_id, indices in groups:
                yield scope, execution_id, indices


def _ledger(entries: Sequence[Entry], scopes: Sequence[_Scope]) -> _Ledger:
    grouped: dict[int, dict[str, list[int]]] = {}
    orphans: list[int] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, ExecutionRecord):
            continue
        owner = _owner(scopes, entry.tool_call_id, index)
        if owner is None:
            orphans.append(index)
            continue
        key = scopes.index(owner)
        grouped.setdefault(key, {}).setdefault(entry.execution_id, []).append(index)
    by_scope = tuple(
        (scopes[key], tuple((eid, tuple(ix)) for eid, ix in groups.items()))
        for key, groups in sorted(grouped.items())
    )
    return _Ledger(by_scope, tuple(orphans))


def _status(entry: Entry) -> str:
    assert isinstance(entry, ExecutionRecord)
    return normalise_status(entry.status)


def _record(entries: Sequence[Entry], index: int) -> ExecutionRecord:
    entry = entries[index]
    assert isinstance(entry, ExecutionRecord)
    return entry


def _tool_results(entries: Sequence[Entry]) -> list[tuple[int, str]]:
    """(index, tool_call_id) of every Tool Result message."""
    out: list[tuple[int, str]] = []
    for index, entry in enumerate(entries):
        if isinstance(entry, MessageEntry) and entry.message.role == "tool":
            out.append((index, entry.message.tool_call_id or ""))
    return out


def _content_json(entry: Entry) -> Mapping[str, Any]:
    """A Tool Result's content as a JSON object, or {} when it is not one."""
    assert isinstance(entry, MessageEntry)
    try:
        value = json.loads(entry.message.content or "")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _named_execution(content: Mapping[str, Any]) -> str | None:
    execution_id = content.get("execution_id")
    return execution_id if isinstance(execution_id, str) and execution_id else None


def _is_side_effect(event: WorldEventLike) -> bool:
    return event.kind not in NON_SIDE_EFFECT_KINDS


def _erased(events: Sequence[WorldEventLike]) -> frozenset[int]:
    """The seqs of the agent's effects a power loss took back (``detail.erases`` of the
    harness's event, ``harness.agents.effects``): never made durable, not in the world."""
    return frozenset(
        int(event.detail["erases"])
        for event in events
        if event.kind == HARNESS_EFFECT_KIND
        and isinstance(event.detail, Mapping)
        and isinstance(event.detail.get("erases"), int)
    )


# ---------------------------------------------------------------------------- the checks


def one_tool_result_per_call(evidence: Evidence) -> list[Violation]:
    """Every tool call gets exactly one Tool Result; every Tool Result answers a call.

    Why: zero results is the crash window of seed 000 left open (recovery forgot a call, and
    the next request is rejected by the provider or the model never sees the outcome); two
    results is a recovery that published a replay on top of the original (or twice), which
    makes the model read two different outcomes for one call.
    """
    entries = evidence.entries
    name = "one_tool_result_per_call"
    scopes = _scopes(entries)
    results = _tool_results(entries)
    out: list[Violation] = []
    claimed: set[int] = set()
    for scope in scopes:
        call = scope.site.call
        message = entries[scope.site.message_index]
        assert isinstance(message, MessageEntry)
        if sum(1 for c in message.message.tool_calls if c.id == call.id) > 1:
            out.append(
                Violation(
                    name,
                    f"tool_call_id {call.id!r} appears twice in the assistant message at line "
                    f"{_line(entries, scope.site.message_index)}: its results cannot be told apart",
                    call.id,
                )
            )
            continue
        mine = [index for index, call_id in results if call_id == call.id and scope.owns(index)]
        claimed.update(mine)
        if len(mine) != 1:
            where = ", ".join(f"line {_line(entries, i)}" for i in mine) or "none"
            out.append(
                Violation(
                    name,
                    f"tool call {call.id!r} ({call.name}, line {_line(entries, scope.site.message_index)}) "
                    f"has {len(mine)} Tool Results ({where}); exactly one is required",
                    call.id,
                )
            )
    for index, call_id in results:
        if index not in claimed and _owner(scopes, call_id, index) is None:
            out.append(
                Violation(
                    name,
                    f"Tool Result at line {_line(entries, index)} answers tool_call_id {call_id!r}, "
                    "which no assistant message of this turn made",
                    call_id,
                )
            )
    return out


def legal_transitions(evidence: Evidence) -> list[Violation]:
    """Each execution's statuses follow the ledger state machine of ``harness.core.ledger``.

    Why: an illegal history is how write-order bugs look on disk: ``succeeded`` without
    ``running`` (the side effect was not announced first), ``running`` again after
    ``succeeded`` (a blind re-execution under the old id), anything after ``unknown``
    (uncertainty silently upgraded). A ledger line for a call nobody made is a ledger that
    cannot be trusted for recovery at all.
    """
    entries = evidence.entries
    name = "legal_transitions"
    ledger = _ledger(entries, _scopes(entries))
    out: list[Violation] = []
    for scope, execution_id, indices in ledger.executions():
        problem = check_transitions([_status(entries[i]) for i in indices])
        if problem is not None:
            lines = ", ".join(str(_line(entries, i)) for i in indices)
            out.append(
                Violation(
                    name,
                    f"execution {execution_id!r} of tool call {scope.site.call.id!r} "
                    f"(lines {lines}): {problem}",
                    scope.site.call.id,
                )
            )
    for index in ledger.orphans:
        record = _record(entries, index)
        out.append(
            Violation(
                name,
                f"ledger line {_line(entries, index)} (execution {record.execution_id!r}, "
                f"{record.status!r}) is for tool_call_id {record.tool_call_id!r}, which no assistant "
                "message of this turn made before it",
                record.tool_call_id,
            )
        )
    return out


def executions_closed(evidence: Evidence) -> list[Violation]:
    """Every execution ends in rejected / succeeded / failed / unknown -- or never started
    and was superseded.

    Why: an execution left ``running`` is a side effect nobody accounted for (recovery must
    close it as ``unknown`` before anything else); one left ``approved`` that nothing
    replaced is an approval that a later restart could still act on, long after the user
    gave it. An ``approved`` (or ``planned``) execution that never reached ``running`` and
    that a later execution of the same call superseded is seed 000's own recovery: "没有
    Ledger / approved: 重新进入 Router" routes the call again under a new execution_id, and
    nothing of the old one ever ran -- whatever the new one then became (the user may say
    no on reapproval: ``rejected``). "The same call" is its call site (``_scopes``): a later
    turn that reuses the tool_call_id made another call, which supersedes nothing here.
    """
    entries = evidence.entries
    ledger = _ledger(entries, _scopes(entries))
    out: list[Violation] = []
    executions = list(ledger.executions())
    for scope, execution_id, indices in executions:
        statuses = [_status(entries[i]) for i in indices]
        last = statuses[-1]
        if last in TERMINAL:
            continue
        never_started = all(status in ("approved", "planned") for status in statuses)
        superseded = any(
            other is scope and other_id != execution_id and other_indices[0] > indices[-1]
            for other, other_id, other_indices in executions
        )
        if never_started and superseded:
            continue
        if last in ("approved", "planned"):
            why = "nothing closed it and no later execution of this call superseded it"
        else:
            why = "it must end rejected, succeeded, failed or unknown"
        out.append(
            Violation(
                "executions_closed",
                f"execution {execution_id!r} of tool call {scope.site.call.id!r} ends {last!r} "
                f"(line {_line(entries, indices[-1])}); {why}",
                scope.site.call.id,
            )
        )
    return out


def _bounds(event: WorldEventLike) -> tuple[int, int]:
    """(at least, at most) the session's size when an effect happened. The world records the
    exact size (both the same); an effect the harness found by probing the agent's own world
    is known only to lie between two probes (``detail.seen_at_bytes`` is the later one)."""
    seen = event.detail.get("seen_at_bytes") if isinstance(event.detail, Mapping) else None
    upper = seen if isinstance(seen, int) and seen >= event.session_bytes else event.session_bytes
    return event.session_bytes, upper


def _running_records(evidence: Evidence, event: WorldEventLike) -> list[int]:
    """The ``running`` lines that could have opened the window of this effect: its execution's
    when the effect names one; else those of its tool call, of its idempotency key, or (an
    effect that names nothing) of any call to its tool."""
    entries = evidence.entries
    running = [
        index
        for index, entry in enumerate(entries)
        if isinstance(entry, ExecutionRecord) and normalise_status(entry.status) == "running"
    ]

    def record(index: int) -> ExecutionRecord:
        return _record(entries, index)

    if event.execution_id:
        return [
            i
            for i in running
            if record(i).execution_id == event.execution_id
            and (not event.tool_call_id or record(i).tool_call_id == event.tool_call_id)
        ]
    if event.tool_call_id:
        return [i for i in running if record(i).tool_call_id == event.tool_call_id]
    if event.idempotency_key:
        return [i for i in running if record(i).idempotency_key == event.idempotency_key]
    # An effect that names nothing: the running lines of calls to its tool (by the ledger's
    # tool name, or, when the ledger does not say, by the tool call the line belongs to).
    names = {site.call.id: site.call.name for site in tool_call_sites(entries)}
    return [
        i
        for i in running
        if evidence.suite(record(i).tool_name or names.get(record(i).tool_call_id) or "") == event.tool
    ]


def _running_before(evidence: Evidence) -> tuple[list[Violation], list[str]]:
    entries = evidence.entries
    offsets = evidence.offsets
    name = "running_before_side_effect"
    out: list[Violation] = []
    undecided: list[str] = []
    for event in evidence.events:
        if not _is_side_effect(event):
            continue
        running = _running_records(evidence, event)
        if event.execution_id:
            attempt = f"execution {event.execution_id!r}"
        elif event.tool_call_id:
            attempt = f"call {event.tool_call_id!r}"
        else:
            attempt = f"key {event.idempotency_key!r}" if event.idempotency_key else "no call named"
        what = f"{event.kind} event seq {event.seq} ({event.tool}, {attempt})"
        lower, upper = _bounds(event)
        first = min((offsets[i] for i in running), default=None)
        if event.seq <= evidence.lost_before_seq and (first is None or upper < first):
            # Its session_bytes are of the session before the power loss: the running record
            # it needed is not in what survived the cut.
            problem = (
                "happened before a power loss that took session lines, and its running record is "
                "not in the session that survived: it was never made durable before the effect"
            )
        elif first is None:
            problem = "has no running record for its execution in the ledger"
        elif lower < 0 and upper < 0:
            problem = "has an unknown session size (-1), so its running record cannot be shown durable"
        elif first <= lower:
            continue
        elif upper < first:
            problem = (
                f"happened at session byte {upper if upper != lower else lower}, before the running "
                f"record (line {_line(entries, running[0])}) was on disk (it ends at byte {first})"
            )
        else:
            # Seen between two probes of the agent's own world, the running line written in
            # between: whether it came first is not known, so it is reported, not judged.
            undecided.append(
                f"{what} was first seen between session bytes {lower} and {upper}, and its running "
                f"record ends at byte {first}, in between"
            )
            continue
        out.append(Violation(name, f"{what} {problem}", event.tool_call_id))
    return out, undecided


def running_before_side_effect(evidence: Evidence) -> list[Violation]:
    """Every side effect was preceded by its execution's ``running`` line ON DISK.

    Why: seed 000's one ordering rule. If the effect happens while the ledger still says
    ``approved`` (or nothing), a crash right after it makes recovery believe the tool never
    started, and it runs again: two emails, two charges. The world records the session
    file's size at the moment of the effect; the ``running`` line must end at or before it.
    An unknown size (-1) proves nothing, so it is reported rather than assumed fine.

    An effect of the agent's own world (``effects:`` of an adapter) is attributed by the
    execution, tool call or idempotency key it names, else by its tool, and is known only
    between two probes: judged where those bounds decide, listed by ``undecided_effects``
    where they do not.
    """
    return _running_before(evidence)[0]


def undecided_effects(evidence: Evidence) -> list[str]:
    """Effects whose order against their running line the probes could not decide."""
    if not evidence.has_ledger or not evidence.has_session:
        return []
    return _running_before(evidence)[1]


def _effects_by_call(evidence: Evidence) -> tuple[list[_Scope], dict[int, list[int]]]:
    """Each side effect attributed to the tool call that caused it (index into the scopes):
    by execution_id through the ledger; else by the idempotency key the ledger gave a call;
    else by tool_call_id, and when a provider reused that id, to the latest call that was on
    disk when the effect happened; an effect that names nothing, by its tool, likewise."""
    entries = evidence.entries
    scopes = _scopes(entries)
    by_execution: dict[str, int] = {}
    by_key: dict[str, int] = {}
    for scope, execution_id, indices in _ledger(entries, scopes).executions():
        by_execution.setdefault(execution_id, scopes.index(scope))
        for index in indices:
            if _record(entries, index).idempotency_key:
                by_key.setdefault(_record(entries, index).idempotency_key or "", scopes.index(scope))
    counted: dict[int, list[int]] = {}
    # What a power loss took back is not in the world: counted neither as a second effect
    # nor as what the model was told about.
    erased = _erased(evidence.events)
    for event in evidence.events:
        if not _is_side_effect(event) or event.seq in erased:
            continue
        key = by_execution.get(event.execution_id or "")
        if key is None and event.idempotency_key:
            key = by_key.get(event.idempotency_key)
        if key is None:
            _, upper = _bounds(event)
            # By its tool call id, else (an effect that names no call) by its tool: the
            # latest such call on disk when it was seen.
            calls = [
                k
                for k, scope in enumerate(scopes)
                if (
                    scope.site.call.id == event.tool_call_id
                    if event.tool_call_id
                    else (evidence.suite(scope.site.call.name) == event.tool and not event.idempotency_key)
                )
            ]
            candidates = [
                k for k in calls if upper < 0 or evidence.offsets[scopes[k].site.message_index] <= upper
            ]
            if not calls:
                continue
            # None on disk yet: the agent acted before saving its call (no ledger, nothing
            # durable first). The effect is the next such call's: the one it saved late, or,
            # when a crash lost it, the one the model made again -- dropped, it would hide the
            # second effect that crash leads to, and make "told succeeded" look like a lie.
            key = candidates[-1] if candidates else calls[0]
        counted.setdefault(key, []).append(event.seq)
    return scopes, counted


def non_idempotent_at_most_once(evidence: Evidence) -> list[Violation]:
    """A non-idempotent tool call causes at most one side effect, over all its executions.

    Why: this is the harm itself, counted in the world rather than inferred from the
    ledger: a blind retry of send_email after a crash is a second email, whatever the
    ledger says. The contract is taken per call (``for_call``), so ``run_command("ls")``
    may run twice but ``run_command("echo x >> audit.log")`` may not.

    Events are attributed to a call by execution_id through the ledger; without one (or
    without a ledger) by tool_call_id, and when a provider reused that id, to the latest
    call that was on disk when the event happened.

    One run of a compound command records one event per effect (``echo a >> log && echo b
    >> log``: two appends): what is counted is runs. The harness's command simulator names,
    in each later effect's ``detail.part_of``, the seq of its run's first effect; an event
    joins that run only when it also has the same execution. Any other event is a run of
    its own (an agent's own effects cannot show that two events were one attempt).
    """
    scopes, counted = _effects_by_call(evidence)
    by_seq = {event.seq: event for event in evidence.events}
    out: list[Violation] = []
    for key, seqs in sorted(counted.items()):
        call = scopes[key].site.call
        contract = evidence.contract(call.name).for_call(call.parsed_arguments())
        runs: dict[int, list[int]] = {}
        for seq in seqs:
            first = by_seq[seq].detail.get("part_of")
            same_run = (
                isinstance(first, int)
                and first in runs
                and by_seq[first].execution_id == by_seq[seq].execution_id
            )
            runs.setdefault(first if same_run and isinstance(first, int) else seq, []).append(seq)
        if contract.idempotency != "non_idempotent" or len(runs) < 2:
            continue
        listed = ", ".join(map(str, seqs))
        if len(runs) == len(seqs):
            what = f"caused {len(seqs)} side effects (world seq {listed}); at most one is allowed"
        else:
            grouped = " | ".join(", ".join(map(str, group)) for group in runs.values())
            what = (
                f"caused side effects in {len(runs)} runs (world seq {grouped}; each group one run "
                "of the command); at most one run is allowed"
            )
        out.append(
            Violation(
                "non_idempotent_at_most_once",
                f"non-idempotent tool call {call.id!r} ({call.name}) {what}",
                call.id,
            )
        )
    return out


def _call_paths(evidence: Evidence, call: ToolCall) -> list[str] | None:
    """The workspace paths a call acts on: for a command, each argument of each program in
    it and each redirection's target (``rm -rf dist`` names ``dist``; an argument that is no
    path matches nothing); else its contract's path argument. None: the call is addressed by
    no path (``send_email``): its effects show wherever its probe looks."""
    renamed = evidence.argument_names.get(call.name, {})
    arguments = {renamed.get(name, name): value for name, value in call.parsed_arguments().items()}
    contract = evidence.contract(call.name)
    command = arguments.get("command")
    if (contract.classify == "run_command" or evidence.suite(call.name) == "run_command") and isinstance(
        command, str
    ):
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError:
            tokens = command.split()
        paths: list[str] = []
        program = True  # the next word names a program, not a path
        for token in tokens:
            if token and all(c in "();<>|&" for c in token):
                program = token not in (">", ">>", "<")  # a redirection's target is a path
            elif program:
                program = False
            elif not token.startswith("-"):
                paths.append(posixpath.normpath(token))
        return paths
    path = arguments.get(contract.path_argument)
    return [posixpath.normpath(path)] if isinstance(path, str) else None


def _unseen_paths(evidence: Evidence, call: ToolCall) -> str | None:
    """Why a probe of the agent's own files cannot see what ``call`` did (None: it can, or
    its tool is watched otherwise). A path is seen when it, or a file under it the world
    knew (seeded or there at the end), matches a glob the probes of its tool watch."""
    globs = evidence.watched_files.get(evidence.suite(call.name))
    if not globs:
        return None
    known = set(evidence.seed_files) | set(evidence.files or {})
    paths = _call_paths(evidence, call)
    if paths is None:
        return None
    for path in paths:
        candidates = {path} | {f for f in known if f.startswith(path.rstrip("/") + "/")}
        if any(matches(c, g) for c in candidates for g in globs):
            return None
    named = ", ".join(paths) if paths else "no path"
    return (
        f"{call.id} ({call.name}) names {named}, outside the files its effects: probes watch "
        f"({', '.join(globs)}): a write or a deletion there is not seen"
    )


def told_the_truth(evidence: Evidence) -> list[Violation]:
    """What the model was told about a non-idempotent call agrees with the world.

    Why: seed 004 "给模型看的错误要明确": the model acts on what its Tool Result says. Told
    the call succeeded (or its stored result was replayed) when nothing of it happened, the
    model goes on as if the email went out; told it failed or was refused when it did
    happen, the model may ask for it again -- the second charge. Told uncertain is always the
    truth, and so is conflict (recovery refused to act on a call whose world or arguments
    changed: an earlier attempt may well have acted). Read through the agent's result
    mapping, so any agent's wording is judged; the effects are the world's (or the agent's
    own, probed), attributed to calls as ``non_idempotent_at_most_once`` attributes them.
    """
    entries = evidence.entries
    scopes, counted = _effects_by_call(evidence)
    out: list[Violation] = []
    for index, scope in enumerate(scopes):
        call = scope.site.call
        contract = evidence.contract(call.name).for_call(call.parsed_arguments())
        if contract.idempotency != "non_idempotent" or not evidence.sees(call.name):
            continue  # an unwatched tool's missing effect proves nothing (see not_applicable)
        if _unseen_paths(evidence, call) is not None:
            continue  # its paths lie outside what the probes watch (see not_applicable)
        results = [i for i, call_id in _tool_results(entries) if call_id == call.id and scope.owns(i)]
        if not results:
            continue  # no Tool Result at all: one_tool_result_per_call says so
        message = entries[results[0]]
        assert isinstance(message, MessageEntry)
        told = evidence.results.category(message.message.content)
        effects = counted.get(index, [])
        if told in ("succeeded", "replayed") and not effects:
            problem = f"the model was told {told!r}, but the world holds no side effect of it"
        elif told in ("error", "rejected") and effects:
            seqs = ", ".join(map(str, effects))
            problem = f"the model was told {told!r}, but it happened (world seq {seqs})"
        else:
            continue
        out.append(
            Violation(
                "told_the_truth",
                f"tool call {call.id!r} ({call.name}, Tool Result line {_line(entries, results[0])}): "
                + problem,
                call.id,
            )
        )
    return out


def no_success_without_answer(evidence: Evidence) -> list[Violation]:
    """A call a tool-side fault left without a readable answer is not told ``succeeded`` (or
    ``replayed``), unless the agent got an answer afterwards.

    Why: the tool server died after the effect, the response was lost or came back in a shape
    the client rejects, or an error result came back (MCP ``isError``): the agent cannot know
    what happened, and after the error nothing ran at all. A Tool Result saying the call
    succeeded is then a guess the model takes for a fact (it goes on as if the order exists).
    The agent may get a real answer: send the call again (a keyed or idempotent retry answers
    with the outcome; the world counts a second effect, ``non_idempotent_at_most_once``) or
    call the lookup tool of its contract (``reconcile.lookup_tool``); then it may say what it
    found. Told uncertain is always the truth; told that nothing happened after an effect is
    ``told_the_truth``'s. Judged for every tool, not only non-idempotent ones: a read whose
    answer never arrived has no content to have succeeded with.

    The fault acts on the call's first request, so its Tool Result is the first one of the
    first call with that id in the session; "afterwards" is any later request to the tool side.
    """
    entries = evidence.entries
    scopes = _scopes(entries)
    results = _tool_results(entries)
    out: list[Violation] = []
    for fault in evidence.tool_faults:
        scope = next((s for s in scopes if s.site.call.id == fault.call), None)
        if scope is None or fault.retried():
            continue
        call = scope.site.call
        lookup = evidence.contract(call.name).lookup_tool
        if lookup and fault.asked(lookup):
            continue
        mine = [index for index, call_id in results if call_id == call.id and scope.owns(index)]
        if not mine:
            continue  # no Tool Result at all: one_tool_result_per_call says so
        message = entries[mine[0]]
        assert isinstance(message, MessageEntry)
        told = evidence.results.category(message.message.content)
        if told not in ("succeeded", "replayed"):
            continue
        after = (
            "an error result came back and nothing ran"
            if fault.kind == "tool_result_error"
            else "its effect may have happened, but no readable answer came back"
        )
        how = f" or looked it up ({lookup})" if lookup else ""
        fix = (
            "tell the model the tool failed, or send it again"
            if fault.kind == "tool_result_error"
            else "tell the model the outcome is uncertain, or find out first"
        )
        out.append(
            Violation(
                "no_success_without_answer",
                f"tool call {call.id!r} ({call.name}, Tool Result line {_line(entries, mine[0])}): the model "
                f"was told {told!r} after {fault.kind} ({after}); the agent never sent the call again{how}, "
                f"so it could not know: {fix}",
                call.id,
            )
        )
    return out


def no_result_for_other_arguments(evidence: Evidence) -> list[Violation]:
    """A Tool Result only reports an execution of the call's CURRENT arguments.

    Why: seed 000 "所有分支都先核对参数 Hash": if the saved call now says something else
    (edited, or a reused id in a later turn), replaying the stored result tells the model
    that ``pay 5`` happened when it asked for ``pay 500``. An execution_id the ledger does
    not know, or one owned by another call, is a result borrowed from elsewhere.

    A Tool Result that says ``conflict`` (``ARGUMENTS_MISMATCH``) naming the execution whose
    hash no longer matches is the refusal this rule asks for, not a result of that execution:
    it claims nothing ran for the current arguments, so it is not judged here.
    """
    entries = evidence.entries
    name = "no_result_for_other_arguments"
    scopes = _scopes(entries)
    ledger = _ledger(entries, scopes)
    owned = {(scopes.index(s), eid): ix for s, eid, ix in ledger.executions()}
    out: list[Violation] = []
    for index, call_id in _tool_results(entries):
        scope = _owner(scopes, call_id, index)
        execution_id = _named_execution(_content_json(entries[index]))
        if scope is None or execution_id is None:
            continue  # an unanswered id is one_tool_result_per_call's to report
        call = scope.site.call
        result = entries[index]
        if isinstance(result, MessageEntry) and evidence.results.category(result.message.content) == (
            "conflict"
        ):
            continue  # refused for the changed arguments: nothing of that execution is claimed
        where = f"Tool Result at line {_line(entries, index)} for {call.id!r}"
        indices = owned.get((scopes.index(scope), execution_id))
        if indices is None:
            elsewhere = [
                i
                for i, e in enumerate(entries)
                if isinstance(e, ExecutionRecord) and e.execution_id == execution_id
            ]
            if elsewhere:
                other = _record(entries, elsewhere[0]).tool_call_id
                problem = f"belongs to tool call {other!r} (ledger line {_line(entries, elsewhere[0])})"
            else:
                problem = "has no ledger record"
            out.append(Violation(name, f"{where} names execution {execution_id!r}, which {problem}", call.id))
            continue
        expected = arguments_sha256(call.parsed_arguments())
        for i in indices:
            recorded = _record(entries, i).arguments_sha256
            if recorded != expected:
                out.append(
                    Violation(
                        name,
                        f"{where} names execution {execution_id!r}, whose ledger line {_line(entries, i)} "
                        f"has arguments_sha256 {recorded[:12] or '(none)'}... but the call's current "
                        f"arguments hash to {expected[:12]}...",
                        call.id,
                    )
                )
                break
    return out


def no_user_message_from_recovery(evidence: Evidence) -> list[Violation]:
    """The session's user messages are exactly the scenario's turns, in order, each once.

    Why: seed 000 5.2: recovery must continue the interrupted turn, never call the path
    that appends a user message; a "please continue" or a replayed turn is the model
    being told the user said something they did not (and a turn counted twice).
    """
    entries = evidence.entries
    name = "no_user_message_from_recovery"
    users = [
        (index, entry.message.content or "")
        for index, entry in enumerate(entries)
        if isinstance(entry, MessageEntry) and entry.message.role == "user"
    ]
    turns = list(evidence.turns)
    out: list[Violation] = []
    for number, ((index, text), turn) in enumerate(zip(users, turns, strict=False), start=1):
        if text != turn:
            out.append(
                Violation(
                    name,
                    f"user message {number} (line {_line(entries, index)}) is {_clip(text)}, but "
                    f"turn {number} is {_clip(turn)}",
                )
            )
    for number, (index, text) in enumerate(users[len(turns) :], start=len(turns) + 1):
        out.append(
            Violation(
                name,
                f"user message {number} (line {_line(entries, index)}) {_clip(text)} is not one of "
                f"the scenario's {len(turns)} turns",
            )
        )
    for number, turn in enumerate(turns[len(users) :], start=len(users) + 1):
        out.append(Violation(name, f"turn {number} {_clip(turn)} never reached the session"))
    return out


def turn_ends_with_final(evidence: Evidence) -> list[Violation]:
    """Every turn, and so the session, ends with an assistant message without tool calls.

    Why: seed 000 5.2: publishing the missing Tool Result is not the end of the turn; only
    the model's final answer is. A session ending on a Tool Result (or a tool call) is a
    recovery that stopped halfway, and a turn followed by the next user message without
    its final was abandoned.
    """
    entries = evidence.entries
    name = "turn_ends_with_final"
    messages = [(i, e.message) for i, e in enumerate(entries) if isinstance(e, MessageEntry)]
    out: list[Violation] = []
    if not messages:
        if evidence.turns:
            out.append(Violation(name, "the session has no message at all; the last turn never ended"))
        return out

    def ended(position: int) -> bool:
        message = messages[position][1]
        return message.role == "assistant" and not message.tool_calls

    def describe(position: int) -> str:
        index, message = messages[position]
        if message.tool_calls:
            ids = ", ".join(repr(c.id) for c in message.tool_calls)
            return f"an assistant tool call ({ids}) at line {_line(entries, index)}"
        detail = f" for {message.tool_call_id!r}" if message.role == "tool" else ""
        return f"a {message.role} message{detail} at line {_line(entries, index)}"

    turn = 0
    for position, (_, message) in enumerate(messages):
        if message.role != "user":
            continue
        if turn and position and not ended(position - 1):
            out.append(Violation(name, f"turn {turn} ends with {describe(position - 1)}, not a final answer"))
        turn += 1
    if not ended(len(messages) - 1):
        last = messages[-1][1]
        call_id = last.tool_call_id if last.role == "tool" else None
        ending = describe(len(messages) - 1)
        out.append(Violation(name, f"the session ends with {ending}, not a final answer", call_id))
    return out


def no_ledger_in_prompt(evidence: Evidence) -> list[Violation]:
    """Every model request is chat messages only, no message's text carries the ledger, and
    the request is a prefix of the session's messages.

    Why: seed 000 section 2: the ledger is for the executor, never the model ("Ledger 不应进入
    模型上下文"). A ledger line in the prompt leaks execution ids and statuses the model then
    repeats or acts on, whether it arrives as a message of its own, as fields on a message, or
    pasted as text into one (a system preamble "recovered: {"type": "tool_execution", ...}").
    Text is judged by a record's shape -- a ``"type": "tool_execution"`` with a ledger status
    in the same object -- never by words ("check the ledger") nor by a lone execution_id,
    which crashmatrix's own Tool Results carry; a system message, which the agent writes and
    the session does not record, must not name one of the session's execution ids either.
    A user message that is one of the scenario's turns is the user's own words. A request
    that is not a prefix of the saved session means the model saw something the session
    does not record (an unsaved reply, a message recovery made up and dropped). Leading
    system messages are the agent's own preamble and are not in the session.
    """
    name = "no_ledger_in_prompt"
    view = prompt_view(evidence.entries)
    leak = _ledger_text_finder(evidence)
    out: list[Violation] = []
    for number, request in enumerate(evidence.requests, start=1):
        messages = request.get("messages") if isinstance(request, Mapping) else None
        if not isinstance(messages, list):
            out.append(Violation(name, f"request {number} has no 'messages' list"))
            continue
        bad = _not_chat_message(messages)
        if bad is not None:
            position, reason = bad
            out.append(Violation(name, f"request {number}, message {position + 1}: {reason}"))
            continue
        leaks = [
            Violation(name, f"request {number}, message {position + 1} ({message.get('role')!r}) {found}")
            for position, message in enumerate(messages)
            if (found := leak(message)) is not None
        ]
        if leaks:
            out += leaks
            continue
        start = 0
        while start < len(messages) and messages[start].get("role") == "system":
            start += 1
        shown = messages[start:]
        if len(shown) > len(view):
            out.append(
                Violation(
                    name,
                    f"request {number} has {len(shown)} messages, more than the session's {len(view)}",
                )
            )
            continue
        for position, (sent, saved) in enumerate(zip(shown, view, strict=False)):
            if _canonical(sent) != saved:
                out.append(
                    Violation(
                        name,
                        f"request {number}, message {start + position + 1} ({sent.get('role')!r}) differs "
                        f"from session message {position + 1}: the request is not a prefix of the session",
                        sent.get("tool_call_id") if isinstance(sent.get("tool_call_id"), str) else None,
                    )
                )
                break
    return out


# A quote as a record's text spells it: JSON's, a Python repr's, or JSON-escaped any number
# of times (a record inside a JSON string inside a message).
_Q = r"""\\*["']"""
_TYPE_PAIR = re.compile(rf"{_Q}type{_Q}\s*:\s*{_Q}tool_execution{_Q}")
_STATUS_PAIR = re.compile(rf"{_Q}status{_Q}\s*:\s*{_Q}({'|'.join(sorted({*STATUSES, *ALIASES}))}){_Q}")
_EXECUTION_PAIR = re.compile(rf"{_Q}execution_id{_Q}\s*:\s*{_Q}([^\\\"']+)")
# Shorter ids ("1", "e2") are ordinary words and numbers in prose, not evidence of a leak.
_MIN_ID_LENGTH = 8


def _ledger_text_finder(evidence: Evidence) -> Callable[[Mapping[str, Any]], str | None]:
    """A function telling whether a sent message's text carries the ledger (and how), or None.

    Results are kept per (role, text): the same system preamble and history are resent in
    every request, and each is read once."""
    turns = set(evidence.turns)
    ids = sorted(
        {
            entry.execution_id
            for entry in evidence.entries
            if isinstance(entry, ExecutionRecord) and len(entry.execution_id) >= _MIN_ID_LENGTH
        },
        key=len,
        reverse=True,
    )
    named = re.compile(rf"(?<![\w-])(?:{'|'.join(map(re.escape, ids))})(?![\w-])") if ids else None
    seen: dict[tuple[str, str], str | None] = {}

    def find(message: Mapping[str, Any]) -> str | None:
        role = str(message.get("role"))
        content = message.get("content")
        if content is None:
            return None
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        if role == "user" and text in turns:
            return None
        if (role, text) not in seen:
            found = _ledger_record_in(text)
            if found is None and role == "system" and named is not None:
                match = named.search(text)
                if match is not None:
                    found = f"names execution {match.group(0)!r} of the session's ledger"
            seen[role, text] = found
        return seen[role, text]

    return find


def _ledger_record_in(text: str) -> str | None:
    """How ``text`` carries a ledger record (a ``"type": "tool_execution"`` and a ledger status
    in one object), or None."""
    if "tool_execution" not in text:
        return None
    for match in _TYPE_PAIR.finditer(text):
        record = _enclosing_object(text, match.start(), match.end())
        status = _STATUS_PAIR.search(record)
        if status is None:
            continue
        execution = _EXECUTION_PAIR.search(record)
        about = f"execution {execution.group(1)!r}, " if execution is not None else ""
        return f"carries a ledger record as text ({about}status {status.group(1)!r})"
    return None


def _enclosing_object(text: str, start: int, end: int) -> str:
    """The text of the innermost ``{...}`` around ``text[start:end]``; a side with no brace
    runs to the end of the text (a record pasted without its braces, or cut short)."""
    depth, left = 0, 0
    for index in range(start - 1, -1, -1):
        if text[index] == "}":
            depth += 1
        elif text[index] == "{":
            if depth == 0:
                left = index
                break
            depth -= 1
    depth, right = 0, len(text)
    for index in range(end, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            if depth == 0:
                right = index + 1
                break
            depth -= 1
    return text[left:right]


def _canonical(message: Mapping[str, Any]) -> Any:
    """A sent message in the session's shape: agents echo what the API returned (``content:
    null``, ``refusal``, ``annotations``) and save only what matters; the same message is the
    same whatever the spelling."""
    try:
        return Message.from_json(message).to_json()
    except (KeyError, TypeError, ValueError):
        return message


def _not_chat_message(messages: Sequence[Any]) -> tuple[int, str] | None:
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping):
            return position, f"is a {type(message).__name__}, not a chat message"
        if message.get("type") == "tool_execution":
            return position, f"is a ledger record (execution {message.get('execution_id')!r})"
        leaked = [key for key in _LEDGER_KEYS if key in message]
        if leaked:
            return position, f"carries ledger field(s) {', '.join(leaked)}"
        if message.get("role") not in _CHAT_ROLES:
            return position, f"has role {message.get('role')!r}, not system/user/assistant/tool"
    return None


def unknown_never_succeeded(evidence: Evidence) -> list[Violation]:
    """``unknown`` is final, and no Tool Result claims success for an execution that did
    not (yet) succeed.

    Why: seed 000 "不是普通的 failed": ``unknown`` means nobody can say whether the effect
    happened. Turning it into ``succeeded`` under the same execution_id rewrites history
    (a retry must be a NEW execution), and publishing ``ok: true`` for an execution whose
    ledger says ``unknown`` or ``running`` tells the model a guess is a fact. The status is
    taken from ledger lines written BEFORE the Tool Result: the terminal state and result
    must be on disk before publication. (A Tool Result without ``ok`` counts as claiming
    success when its ``status`` is ``succeeded``, seed 000's own shape.)
    """
    entries = evidence.entries
    name = "unknown_never_succeeded"
    out: list[Violation] = []
    unknown_at: dict[str, int] = {}
    reported: set[str] = set()
    for index, entry in enumerate(entries):
        if not isinstance(entry, ExecutionRecord):
            continue
        eid = entry.execution_id
        if eid in unknown_at and eid not in reported:
            reported.add(eid)
            out.append(
                Violation(
                    name,
                    f"execution {eid!r} reached 'unknown' at line {_line(entries, unknown_at[eid])} "
                    f"but line {_line(entries, index)} records {entry.status!r} for it afterwards",
                    entry.tool_call_id,
                )
            )
        if normalise_status(entry.status) == "unknown":
            unknown_at.setdefault(eid, index)
    scopes = _scopes(entries)
    ledger = _ledger(entries, scopes)
    owned = {(scopes.index(s), eid): ix for s, eid, ix in ledger.executions()}
    for index, call_id in _tool_results(entries):
        content = _content_json(entries[index])
        execution_id = _named_execution(content)
        ok = content.get("ok")
        claims_success = ok is True or ("ok" not in content and content.get("status") == "succeeded")
        scope = _owner(scopes, call_id, index)
        if not claims_success or execution_id is None or scope is None:
            continue
        before = [i for i in owned.get((scopes.index(scope), execution_id), ()) if i < index]
        if not before:
            continue  # an execution the call does not own is no_result_for_other_arguments's
        last = _status(entries[before[-1]])
        if last != "succeeded":
            out.append(
                Violation(
                    name,
                    f"Tool Result at line {_line(entries, index)} for {call_id!r} claims success for "
                    f"execution {execution_id!r}, whose ledger said {last!r} when it was published",
                    call_id,
                )
            )
    return out


def no_effect_after_death(evidence: Evidence) -> list[Violation]:
    """Nothing the agent started keeps acting after the agent died.

    Why: a SIGKILL kills one process: a shell the agent started, a worker it forked or a daemon
    that called ``setsid`` lives on and can write to the world after the agent's death --
    while the next life recovers, or after the case is judged -- and no recovery can see or
    reconcile that effect. The harness stops and kills every such process the moment the life
    ends (``harness.lives.descendants``), so the effect never lands in a later case; the case
    fails here, naming each one. An agent passes by tying its children to its own life
    (``PR_SET_PDEATHSIG``, a process group it kills, waiting for them) or by recording their
    effects in its ledger before it starts them and never starting one it cannot wait for.
    """
    return [
        Violation(
            "no_effect_after_death",
            f"{left} was still running when its life ended: what it does after the agent died "
            "is an effect no recovery can see (the harness stopped and killed it)",
        )
        for left in evidence.survivors or ()
    ]


def loser_stops_cleanly(evidence: Evidence) -> list[Violation]:
    """Of the lives that resumed one session at the same time, one acts; the others stop
    cleanly: they append no session line, make no side effect, and end on their own.

    Why: a job runner with at-least-once delivery, or a pod restarted while the old one still
    runs, starts a second process on a session another is recovering. Both find the same
    pending call; the ledger orders one process's steps, not two processes', so each decides
    its fate and a call the ledger says never started runs twice (two emails, two Tool
    Results, two final answers in one session). An agent passes by taking a lease on the
    session before it reads it (an ``flock`` held for its life; or a fenced ledger record
    every later write checks) and, finding it held, stopping before it reads or writes: it
    exits normally, or waits for the lease and then finds the work done. A loser that hangs,
    raises or dies has not stopped cleanly (a job runner retries a failure; it must not).

    An agent that writes its own session file has lines no life can be told to (``lines``
    None): a life acted if it made an effect or asked its model (it went on with the
    conversation), and what either wrote is judged in the final session by the other
    invariants (two Tool Results for one call, whoever wrote them)."""
    lives = evidence.concurrent
    acted = [life for life in lives if life.acted]
    out: list[Violation] = []
    if len(acted) > 1:
        what = "; ".join(
            f"life {life.life} (pid {life.pid}) "
            + (
                f"asked the model {life.requests} time(s) and "
                if life.lines is None
                else f"appended {life.lines} session line(s) and "
            )
            + f"made {life.effects} side effect(s)"
            for life in acted
        )
        out.append(
            Violation(
                "loser_stops_cleanly",
                f"{len(acted)} lives resumed the session at the same time and each acted on it: {what}; "
                "a second process on a session must find it taken (a lease, a fencing token) and stop "
                "before it reads or writes",
            )
        )
    for life in lives:
        if not life.acted and life.status != "exited":
            out.append(
                Violation(
                    "loser_stops_cleanly",
                    f"life {life.life}, resuming the session beside another, left it alone but did not "
                    f"stop cleanly: it ended {life.status} (a loser ends on its own, without an error)",
                )
            )
    return out


def torn_fragments_accounted(evidence: Evidence) -> list[Violation]:
    """Every torn write's bytes end somewhere a reader cannot mistake for a record: cut from the
    session (dropped, or set aside in a file beside it), left as its unterminated last line,
    or kept as a line of their own; never glued onto the next record.

    Why: a writer killed mid-append (a SIGKILL, a power cut, a kernel panic during the
    recovery's own write; ext4's delayed allocation leaving a partial last block) leaves half
    a line. Dropping it is legitimate -- it was never acknowledged, LevelDB's log reader does
    the same -- so no rule here asks that the bytes remain; the record it began was simply
    never durable, and what the agent makes of that is judged by the other invariants (a lost
    ``running`` is a call that never started, not one whose effect may be repeated). But a
    writer that appends its next record without cutting the torn tail (or ending it) writes
    one line that is neither record: every reader now loses both, and a lenient one that
    resynchronises at the next ``{`` re-parses the rest as something the agent never wrote.
    A restarted agent recovering from one crash is as exposed as the first life: its own
    recovery record (an ``unknown`` closing an interrupted execution) can be torn too
    (``recovery_torn_writes``)."""
    return [
        Violation("torn_fragments_accounted", f"{fate.fragment.name()}: {fate.where}", fate.fragment.call)
        for fate in evidence.torn
        if not fate.acceptable
    ]


def no_partial_file(evidence: Evidence) -> list[Violation]:
    """Every file a ``write_file`` call targeted ends whole: its old content or a new one.

    Why: seed 000 relies on ``write_file`` being a full replace ("a reader or a crash sees
    the old content or the new content, never a mix") for its natural idempotency, and
    seed 004's base/after hash check only works on whole contents: a write killed halfway
    (truncated, then written in place; ``during_side_effect``) leaves a file whose hash is
    neither the base nor the after, which recovery can only call a conflict, and the user's
    file is lost. Old means the scenario's seed (or absent when it seeded none); new means a
    content some ``write_file`` call of the case asked for (its arguments in the session, or
    the ``after_sha256`` of a completed write in the world's events), or what a writer other
    than the agent put there between lives (``external_write``). A path some other effect
    touched too (a command's redirect or ``rm``, an append by someone else) is not judged:
    its contents are not limited to these.
    """
    if evidence.files is None:
        return []
    wanted: dict[str, set[str]] = {}  # path -> sha256 of every whole content allowed
    # A call whose saved arguments the harness tampered with between lives asked for its old
    # arguments before (``fault`` event): the agent may have written those already.
    tampered = [
        ToolCall(str(e.tool_call_id), e.tool, str(e.detail.get("arguments_before", "")))
        for e in evidence.events
        if e.kind == "fault" and e.detail.get("fault") == "tamper_arguments"
    ]
    for call in [scope.site.call for scope in _scopes(evidence.entries)] + tampered:
        # Whether or not its effects are recorded as events (an agent's own tools may not
        # be): what a call asked for is new content either way, and the file is observed.
        if evidence.suite(call.name) != "write_file":
            continue
        contract = evidence.contract(call.name)
        renamed = evidence.argument_names.get(call.name, {})
        arguments = {renamed.get(name, name): value for name, value in call.parsed_arguments().items()}
        path, content = arguments.get(contract.path_argument), arguments.get(contract.content_argument)
        if isinstance(path, str):
            hashes = wanted.setdefault(posixpath.normpath(path), set())
            if isinstance(content, str):
                hashes.add(_sha256(content))
    other: set[str] = set()
    for event in evidence.events:
        path = event.detail.get("path")
        if not isinstance(path, str):
            continue
        path = posixpath.normpath(path)
        after = event.detail.get("after_sha256")
        if event.kind in ("file_write", "external_write") and isinstance(after, str):
            wanted.setdefault(path, set()).add(after)
        else:
            other.add(path)
    out: list[Violation] = []
    for path, hashes in sorted(wanted.items()):
        if path in other:
            continue
        seed = evidence.seed_files.get(path)
        old = None if seed is None else _sha256(seed)
        if path not in evidence.files:
            if seed is None:
                continue  # absent before, absent now: the old state
            now = "is absent"
        else:
            text = evidence.files[path]
            if text is None:
                continue  # not a regular file: nothing to hash as content
            digest = _sha256(text)
            if digest == old or digest in hashes:
                continue
            now = f"has {len(text.encode('utf-8'))} bytes with sha256 {digest}"
        new = ", ".join(sorted(hashes)) or "none recorded"
        out.append(
            Violation(
                "no_partial_file",
                f"{path!r} is neither old nor new content: it {now}; old (before the first life) "
                f"{'absent' if old is None else 'sha256 ' + old}, new (what write_file asked for) "
                f"sha256 {new}",
            )
        )
    return out


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _clip(text: str, width: int = 40) -> str:
    return repr(text if len(text) <= width else text[: width - 1] + "…")


def _contents_by_path(evidence: Evidence) -> dict[str, set[str] | None]:
    """Path -> the sha256 of every whole content the file is known to have had in the case
    (seeded, asked of write_file, written by its completed events or another writer, there at
    the end); None for a path some other effect touched (a command's redirect, an ``rm``),
    whose contents are not limited to these."""
    known: dict[str, set[str] | None] = {}

    def add(path: str, digest: str) -> None:
        hashes = known.setdefault(posixpath.normpath(path), set())
        if hashes is not None:
            hashes.add(digest)

    for seeded, text in evidence.seed_files.items():
        add(seeded, _sha256(text))
    for scope in _scopes(evidence.entries):
        call = scope.site.call
        if evidence.suite(call.name) != "write_file":
            continue
        contract = evidence.contract(call.name)
        renamed = evidence.argument_names.get(call.name, {})
        arguments = {renamed.get(name, name): value for name, value in call.parsed_arguments().items()}
        asked, content = arguments.get(contract.path_argument), arguments.get(contract.content_argument)
        if isinstance(asked, str) and isinstance(content, str):
            add(asked, _sha256(content))
    for there, now in (evidence.files or {}).items():
        if now is not None:
            add(there, _sha256(now))
    for event in evidence.events:
        detail = event.detail if isinstance(event.detail, Mapping) else {}
        touched, after = detail.get("path"), detail.get("after_sha256")
        if not isinstance(touched, str):
            continue
        if event.kind in ("file_write", "external_write") and isinstance(after, str):
            add(touched, after)
        elif _is_side_effect(event) or event.kind == "external_write":
            known[posixpath.normpath(touched)] = None
    return known


def reads_report_real_content(evidence: Evidence) -> list[Violation]:
    """A read told to have succeeded reports a content its file really had.

    Why: seed 004 "read_file timeout -> retry allowed" makes a read the one call an agent may
    retry on its own; when the retries are spent too, what the model is told must say so. A
    retry helper whose exhausted loop falls through to a default result hands the model an
    empty file (or a stale cache, a made-up body) as the file's content, and the model answers
    the user from a file it never saw, without a word of the failure. "Really had" is any
    whole content the case knows for that path: seeded, asked of write_file, written by a
    completed write or by another writer between lives, or there at the end; a path another
    effect touched (a command's redirect) is not judged, nor a result marked truncated.
    Judged in crashmatrix's result shape (``ok``, ``content``), where the content is the
    file's; an agent answering in its own words is listed as not applicable.
    """
    if evidence.results != CRASHMATRIX:
        return []
    entries = evidence.entries
    scopes = _scopes(entries)
    known = _contents_by_path(evidence)
    out: list[Violation] = []
    for index, call_id in _tool_results(entries):
        scope = _owner(scopes, call_id, index)
        if scope is None or evidence.suite(scope.site.call.name) != "read_file":
            continue
        call = scope.site.call
        result = _content_json(entries[index])
        text = result.get("content")
        if result.get("ok") is not True or result.get("truncated") is True or not isinstance(text, str):
            continue
        renamed = evidence.argument_names.get(call.name, {})
        arguments = {renamed.get(name, name): value for name, value in call.parsed_arguments().items()}
        path = arguments.get(evidence.contract(call.name).path_argument)
        if not isinstance(path, str):
            continue
        hashes = known.get(posixpath.normpath(path))
        if not hashes or _sha256(text) in hashes:
            continue  # None: another effect touched it; empty: nothing known of the file
        out.append(
            Violation(
                "reads_report_real_content",
                f"tool call {call.id!r} ({call.name} {path!r}, Tool Result line {_line(entries, index)}) "
                f"told the model it read {_clip(text)} ({len(text.encode('utf-8'))} bytes), a content "
                f"{path!r} never had in this case (known: sha256 {', '.join(sorted(hashes))}): a failed "
                "read must be told as failed",
                call.id,
            )
        )
    return out


# ---------------------------------------------------------------------------- registry

Check = Callable[[Evidence], list[Violation]]

INVARIANTS: Mapping[str, Check] = MappingProxyType(
    {
        "one_tool_result_per_call": one_tool_result_per_call,
        "legal_transitions": legal_transitions,
        "executions_closed": executions_closed,
        "running_before_side_effect": running_before_side_effect,
        "non_idempotent_at_most_once": non_idempotent_at_most_once,
        "told_the_truth": told_the_truth,
        "no_success_without_answer": no_success_without_answer,
        "no_result_for_other_arguments": no_result_for_other_arguments,
        "no_user_message_from_recovery": no_user_message_from_recovery,
        "turn_ends_with_final": turn_ends_with_final,
        "no_ledger_in_prompt": no_ledger_in_prompt,
        "unknown_never_succeeded": unknown_never_succeeded,
        "no_effect_after_death": no_effect_after_death,
        "no_partial_file": no_partial_file,
        "reads_report_real_content": reads_report_real_content,
        "loser_stops_cleanly": loser_stops_cleanly,
        "torn_fragments_accounted": torn_fragments_accounted,
    }
)

LEDGER_INVARIANTS: frozenset[str] = frozenset(
    {
        "legal_transitions",
        "executions_closed",
        "running_before_side_effect",
        "no_result_for_other_arguments",
        "unknown_never_succeeded",
    }
)

# What each ledger invariant cannot judge on an agent without a ledger, and what still is.
# The order of an effect is not judged from the saved tool call instead of a running record:
# an agent may keep its intent where the adapter maps nothing (a ledger inside its tools, a
# framework's own store), and such an agent's late-saved call is no defect; the harm a wrong
# order leads to, a second effect after a crash, is judged in the world for every agent.
WITHOUT_LEDGER: Mapping[str, str] = MappingProxyType(
    {
        "legal_transitions": "no execution statuses to follow",
        "executions_closed": "no execution to close",
        "running_before_side_effect": (
            "no running record orders its effects (its saved tool call is not taken for one: an "
            "agent may keep its intent where the adapter maps nothing); a second effect after a "
            "crash is still judged (non_idempotent_at_most_once)"
        ),
        "no_result_for_other_arguments": "no execution a Tool Result could name",
        "unknown_never_succeeded": "no execution status a Tool Result could contradict",
    }
)


def check_all(evidence: Evidence, *, only: Iterable[str] | None = None) -> list[Violation]:
    """Run every invariant (or those named in ``only``) in ``INVARIANTS`` order.

    Ledger invariants are skipped when ``evidence.has_ledger`` is False, even if named.
    """
    selected = set(INVARIANTS) if only is None else set(only)
    unknown = sorted(selected - set(INVARIANTS))
    if unknown:
        raise InputError(
            f"unknown invariant(s) {', '.join(map(repr, unknown))}; choose from: {', '.join(INVARIANTS)}"
        )
    violations: list[Violation] = []
    # A whole invariant is skipped only when none of it can be judged (the ledger ones
    # without a ledger, one the doctor found blind on this agent); the effect invariants
    # leave out the unwatched calls themselves and judge the others (not_applicable still
    # names the tools they could not judge).
    whole = LEDGER_INVARIANTS | set(evidence.blind)
    skipped = {name for name, _ in not_applicable(evidence) if name in whole}
    for name, check in INVARIANTS.items():
        if name not in selected or name in skipped:
            continue
        violations.extend(check(evidence))
    return violations


def not_applicable(evidence: Evidence) -> list[tuple[str, str]]:
    """(invariant, why) for each invariant this evidence cannot judge, wholly (the ledger
    invariants of an agent without a ledger) or for some calls (the effect invariants for a
    tool whose effects the world does not watch): never a pass, never a failure; reports
    list them with the reason."""
    out: list[tuple[str, str]] = []
    for name in INVARIANTS:
        if name in LEDGER_INVARIANTS and not evidence.has_ledger:
            if not evidence.has_session:
                why = "the agent's session cannot be read (judged on the model's requests)"
            else:
                detail = f" ({evidence.no_ledger})" if evidence.no_ledger else ""
                why = f"the agent keeps no ledger the adapter maps{detail}: {WITHOUT_LEDGER[name]}"
            out.append((name, why))
    if evidence.files is None:
        out.append(("no_partial_file", "the workspace's files were not observed"))
    if evidence.survivors is None:
        out.append(
            (
                "no_effect_after_death",
                "the processes an agent starts can be tracked on Linux only (child subreaper, /proc)",
            )
        )
    calls = [scope.site.call for scope in _scopes(evidence.entries)]
    unseen = sorted(
        {
            evidence.suite(call.name)
            for call in calls
            if not evidence.sees(call.name)
            and evidence.contract(call.name).for_call(call.parsed_arguments()).idempotency == "non_idempotent"
        }
    )
    if unseen:
        why = (
            f"the effects of {', '.join(unseen)} are not observed "
            "(declare them under effects: in the adapter, or serve them as services:)"
        )
        out += [("non_idempotent_at_most_once", why), ("told_the_truth", why)]
    for call in calls:
        hidden = _unseen_paths(evidence, call)
        contract = evidence.contract(call.name).for_call(call.parsed_arguments())
        if hidden is not None and contract.idempotency == "non_idempotent":
            out.append(("told_the_truth", hidden))
    if evidence.results != CRASHMATRIX and any(
        evidence.suite(scope.site.call.name) == "read_file" for scope in _scopes(evidence.entries)
    ):
        out.append(
            (
                "reads_report_real_content",
                "the agent's Tool Results are not crashmatrix's shape (ok, content): a read's "
                "content cannot be told from the agent's words",
            )
        )
    out += [(name, why) for name, why in evidence.blind.items() if name in INVARIANTS]
    return out
