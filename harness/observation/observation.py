"""The Observation: everything one finished case left behind, as one frozen value.

Lives produce files (a session, a world, a model log, a trace); an agent's adapter reads
them ONCE, after the last life, into an ``Observation`` (``harness.observation.reading``
for agents whose session is seed 000's JSONL, ``harness.agents`` for the others). From
there on nothing reads a file again: the verdict and every invariant are pure functions of
(expectation, observation), and the report's timeline is built from the same value. A new
kind of agent only has to produce an Observation (Jepsen's history, pytest's report).

Two coordinate systems meet here. World events carry the session file's size when they
happened (``session_bytes``); when the harness edits the session between lives (a tampered
argument), the events recorded before the edit are in the old file's offsets and the model
requests sent before it cannot match the edited file. ``events_in_session_coordinates`` and
``requests_for_session`` translate, so that no check has to know an edit happened.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.dialect import NATIVE, Dialect
from crashmatrix.harness.core.session_log import SessionLog
from crashmatrix.harness.core.torn_fragments import FragmentFate
from crashmatrix.harness.core.trace import LifeRecord, TraceEvent, case_status
from crashmatrix.harness.core.world_events import WorldEvent

__all__ = ["AppliedFault", "BetweenLives", "Observation", "WorldView", "between_lives_from_json"]


@dataclass(frozen=True, slots=True)
class WorldView:
    """The world after the last life: counts (``orders``, ``emails``, ``rows:<table>``,
    ...), the workspace files' texts (None for a file that is not text), and every event."""

    counts: Mapping[str, int] = field(default_factory=dict)
    files: Mapping[str, str | None] = field(default_factory=dict)
    events: tuple[WorldEvent, ...] = ()
    # The suite's tools whose side effects are among ``events``; None: every tool's (the
    # agent's tools are the harness's mock tools). An agent's own tool with no declared
    # effect source acts where the harness cannot see.
    watched: frozenset[str] | None = None
    # Of those, the tools seen only through probes of the agent's files -> the globs they
    # watch (``harness.agents.effects.watched_files``): elsewhere such a tool acts unseen.
    watched_files: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def sees(self, tool: str) -> bool:
        return self.watched is None or tool in self.watched

    def as_expected(self) -> dict[str, Any]:
        """The shape scenario expectations are written against (``world: {emails: 1,
        files: {...}}``): the counts, plus ``files``."""
        view: dict[str, Any] = dict(self.counts)
        view["files"] = dict(self.files)
        return view


@dataclass(frozen=True, slots=True)
class AppliedFault:
    """One fault the harness applied between lives, and whether it really did something
    (a tamper that found no saved tool call to edit did nothing)."""

    fault: str  # "external_write" | "tamper_arguments"
    acted: bool
    detail: str = ""


@dataclass(frozen=True, slots=True)
class BetweenLives:
    """What the harness did between the first crash and the restart."""

    applied: tuple[AppliedFault, ...] = ()
    requests_before: int = 0  # model requests logged before the edit
    events_before: int = 0  # last world event seq before the edit
    # (offset where an edited session line ended before the edit, bytes it grew by)
    shifts: tuple[tuple[int, int], ...] = ()
    # A power loss cut session lines (``harness.lives.power``): the model requests and the
    # last world event seq logged before it (requests then speak of a session that is gone;
    # such events' running records had to survive the cut). None: no session bytes lost.
    session_lost: tuple[int, int] | None = None


@dataclass(frozen=True)
class Observation:
    """Everything a case left, read once after its last life."""

    case_dir: Path
    lives: tuple[LifeRecord, ...]
    trace: tuple[TraceEvent, ...]
    # The agent's session as our records; None when it could not be read (``session_problem``
    # says why: corruption names file, line and byte).
    session: SessionLog | None
    world: WorldView
    requests: tuple[Mapping[str, Any], ...] = ()  # every chat-completion request body, in order
    between_lives: BetweenLives = field(default_factory=BetweenLives)
    keeps_ledger: bool = True  # False: the agent keeps no ledger the adapter can map
    # Why it is judged without one (the adapter's words: declared so, or none in this case's
    # session); every check and expectation left unjudged for it says this. "": the default.
    no_ledger: str = ""
    session_problem: str = ""
    # Why the adapter cannot read this agent's session at all ("" when it can). The verdict
    # then judges the conversation the model saw, from its request log.
    session_unavailable: str = ""
    # How the agent words tools and results: the verdict reads its session and requests so.
    dialect: Dialect = NATIVE
    # check -> why, for the invariants ``crashmatrix doctor`` found blind on this agent
    # (``Capabilities.blind``): listed not applicable, never passed.
    blind_checks: Mapping[str, str] = field(default_factory=dict)
    # Where the bytes of each torn write of the case went in the final session file
    # (``harness.core.torn_fragments``): dropped, set aside, left as the torn tail, kept as a
    # line of their own, or glued onto the next record.
    torn_fragments: tuple[FragmentFate, ...] = ()

    @property
    def status(self) -> str:
        """``ok`` when the last life ended normally; otherwise why not."""
        return case_status(self.lives)

    def events_in_session_coordinates(self) -> tuple[WorldEvent, ...]:
        """World events with ``session_bytes`` in the final session file's offsets."""
        marks = self.between_lives
        if not marks.shifts:
            return self.world.events
        out = []
        for event in self.world.events:
            if event.seq <= marks.events_before:
                grown = sum(delta for end, delta in marks.shifts if event.session_bytes >= end)
                event = dataclasses.replace(event, session_bytes=event.session_bytes + grown)
            out.append(event)
        return tuple(out)

    def requests_for_session(self) -> tuple[Mapping[str, Any], ...]:
        """The model requests that can be compared with the final session: those sent
        before the harness edited it cannot match the edited file, nor those sent before a
        power loss took session lines."""
        marks = self.between_lives
        skip = marks.requests_before if marks.shifts else 0
        if marks.session_lost is not None:
            skip = max(skip, marks.session_lost[0])
        return self.requests[skip:]


def between_lives_from_json(raw: Mapping[str, Any]) -> BetweenLives:
    """``between_lives.json`` (written by ``harness.lives.between``) as a value."""
    return BetweenLives(
        applied=tuple(
            AppliedFault(str(a["fault"]), bool(a["acted"]), str(a.get("detail", "")))
            for a in raw.get("applied") or ()
        ),
        requests_before=int(raw.get("requests_before", 0)),
        events_before=int(raw.get("events_before", 0)),
        shifts=tuple((int(end), int(delta)) for end, delta in raw.get("shifts") or ()),
    )
