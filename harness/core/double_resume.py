"""Double resume as values: two lives recovering one session at once, and what a case's trace
and world say each of them did (pure).

The real-world failure: a job runner with at-least-once delivery hands the same job to a
second worker while the first still runs it (a visibility timeout expired, a pod was
restarted while the old one was still alive). Both processes resume the same session and
find the same pending call; without a lease or a fencing token each decides its fate, and
the effect happens twice. ``double@P`` crashes life 1 at ``P``, then starts lives 2 and 3
together on what it left (``harness.lives.double_resume``).

The harness writes, in the trace:

* ``{"event": "double_resume", "lives": [2, 3], "lines": ...}`` before it starts the
  concurrent lives; ``lines``: ``"per_life"`` where each session line is told to the life that
  wrote it (an agent appending through ``ctx.before_append``), ``"session"`` where it cannot be
  (an agent writing its own session file: both lives' lines are judged together, as the final
  session holds them; absent: ``"per_life"``);
* for each of them, ``{"event": "gate", "life": n}`` when it reached its first step (a
  boundary, a session line about to be written, a model request) and stopped there, and
  ``{"event": "released", "lives": [...], "why": ...}`` when the harness let them go on;
* ``{"event": "wrote", "life": n, "bytes": k}`` for every session line the life appended
  (an agent that appends through ``ctx.before_append``).

An agent that writes its own session (``command:``, ``python:`` adapters) acts through the
life's own loopback server -- the model, the tools, the services, each life its own, in its own
process -- so its effects are told to a life by pid as a native agent's are; its lines are
not: each life's supervisor reads the file's new tail, which holds the other's lines too. No
rule needs them: two Tool Results for one call are ``one_tool_result_per_call``'s whoever wrote
them, two effects ``non_idempotent_at_most_once``'s, and the loser is told by what is known
of it: its effects, its requests to its own model, how it ended. The model requests matter:
two lives whose recovery makes no effect (a call closed uncertain, a refusal) both write its
Tool Result and both answer the turn, and the file need not show two Tool Results (a life that
re-reads the session before each write finds the other's); each life asking its own model is
what shows both went on.

From these and the world's events (each with the pid of the process that made it, the
trace's ``start`` event giving each life's pid), ``concurrent_lives`` says what each
concurrent life did: the evidence of the ``one_resumer`` invariant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "DOUBLE_COLUMN",
    "DOUBLE_EVENT",
    "DOUBLE_PREFIX",
    "GATE_EVENT",
    "LINES_PER_LIFE",
    "LINES_SESSION",
    "RELEASED_EVENT",
    "WROTE_EVENT",
    "ConcurrentLife",
    "concurrent_lives",
]

# The matrix column of ``double@P`` items (and the CaseResult's boundary).
DOUBLE_COLUMN = "double_resume"
DOUBLE_EVENT = "double_resume"
GATE_EVENT = "gate"
RELEASED_EVENT = "released"
WROTE_EVENT = "wrote"
# How a double resume's session lines are told apart (the ``double_resume`` event's ``lines``).
LINES_PER_LIFE = "per_life"
LINES_SESSION = "session"
# The item of point P: ``double@after_running[call_1]``.
DOUBLE_PREFIX = "double@"


class _Effect(Protocol):
    @property
    def pid(self) -> int: ...
    @property
    def kind(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ConcurrentLife:
    """One of the lives that resumed the session at the same time, and what it did."""

    life: int
    pid: int | None  # None: it never started (its start event is missing)
    status: str  # how it ended: the trace's ``exit`` -> "exited", else the harness's ``ended`` status
    # Session lines it appended; None where lines are not told to a life (judged as a session).
    lines: int | None
    effects: int  # world side effects its process made
    gated: bool  # it reached its first step and was held there until released
    requests: int = 0  # requests it made to the model (each life serves its own)

    @property
    def acted(self) -> bool:
        """It made an effect or wrote to the session; where its lines are told to no life, it
        asked the model: a life that goes on with the conversation has acted on the session (a
        loser stops before it asks anything; one that waited for the lease finds the turn done)."""
        if self.lines is None:
            return self.effects > 0 or self.requests > 0
        return self.lines > 0 or self.effects > 0


def concurrent_lives(
    trace: Sequence[Mapping[str, Any]], effects: Iterable[_Effect], side_effect: Any = None
) -> tuple[ConcurrentLife, ...]:
    """The concurrent lives of a ``double@P`` case (none in any other case). ``effects``: the
    world's events; ``side_effect(event) -> bool`` picks those that are side effects (the
    invariants' own rule), every event when None."""
    declared = [event for event in trace if event.get("event") == DOUBLE_EVENT]
    if not declared:
        return ()
    lives = [int(life) for life in declared[-1].get("lives") or ()]
    attributed = declared[-1].get("lines", LINES_PER_LIFE) == LINES_PER_LIFE
    pids: dict[int, int] = {}
    status: dict[int, str] = {}
    lines = dict.fromkeys(lives, 0)
    requests = dict.fromkeys(lives, 0)
    gated: set[int] = set()
    for event in trace:
        life = event.get("life")
        if life not in lines:
            continue
        kind = event.get("event")
        if kind == "start" and isinstance(event.get("pid"), int):
            pids[life] = int(event["pid"])
        elif kind == "exit":
            status.setdefault(life, "exited")
        elif kind == "crash":
            status[life] = "crashed"
        elif kind == "ended":
            status[life] = str(event.get("status"))
        elif kind == "error":
            status.setdefault(life, "error")
        elif kind == WROTE_EVENT:
            lines[life] += 1
        elif kind == GATE_EVENT:
            gated.add(life)
        elif kind == "model_request":
            requests[life] += 1
    by_pid = {pid: life for life, pid in pids.items()}
    made = dict.fromkeys(lives, 0)
    for effect in effects:
        owner = by_pid.get(effect.pid)
        if owner is not None and (side_effect is None or side_effect(effect)):
            made[owner] += 1
    return tuple(
        ConcurrentLife(
            life,
            pids.get(life),
            status.get(life, "unknown"),
            lines[life] if attributed else None,
            made[life],
            life in gated,
            requests[life],
        )
        for life in lives
    )
