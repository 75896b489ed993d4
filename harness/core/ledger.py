"""The tool-execution ledger as pure functions: statuses, legal transitions, identities.

Nothing here touches a file. ``session.py`` reads and writes lines; this module says what
the lines mean.

The write order this state machine encodes (seed 000, section 4)::

    tool call saved -> approved | rejected
    approved        -> running (fsynced BEFORE the side effect) | rejected
                       | approved (asked again after a restart)
    running         -> succeeded | failed | unknown (each with its result)
    then the Tool Result message, then the model again.

``rejected``, ``succeeded``, ``failed`` and ``unknown`` are terminal: an execution that ended
``unknown`` is never turned into ``succeeded``; a later attempt gets a NEW execution_id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from crashmatrix.harness.core.records import Entry, ExecutionRecord, MessageEntry, ToolCall
from crashmatrix.harness.errors import LedgerError

__all__ = [
    "ALIASES",
    "STATUSES",
    "TERMINAL",
    "CallSite",
    "PendingCall",
    "arguments_sha256",
    "assert_transition",
    "check_transitions",
    "executions_by_call",
    "idempotency_key",
    "normalise_status",
    "pending_tool_calls",
    "tool_call_sites",
]

STATUSES = ("approved", "rejected", "running", "succeeded", "failed", "unknown")
TERMINAL = frozenset({"rejected", "succeeded", "failed", "unknown"})

# Seed 004's vocabulary, accepted when reading a foreign ledger. ``planned`` (the call is
# recorded, nobody has approved it) has no status of ours: it is the state "no ledger yet",
# so it is kept as its own initial state rather than mapped onto ``approved``.
ALIASES: Mapping[str, str] = {"started": "running", "uncertain": "unknown", "planned": "planned"}

_NEXT: Mapping[str | None, frozenset[str]] = {
    None: frozenset({"planned", "approved", "rejected"}),
    "planned": frozenset({"approved", "rejected"}),
    # approved -> approved: the process died before ``running``; after the restart the
    # approval was asked again and given again. The same execution continues, because
    # nothing of it ever started.
    "approved": frozenset({"approved", "running", "rejected"}),
    "running": frozenset({"succeeded", "failed", "unknown"}),
}


def normalise_status(status: str, mapping: Mapping[str, str] | None = None) -> str:
    """Map a foreign status name onto ours (adapter mapping first, then seed 004's aliases)."""
    if mapping and status in mapping:
        status = mapping[status]
    return ALIASES.get(status, status)


def check_transitions(statuses: Sequence[str]) -> str | None:
    """Return None when ``statuses`` (one execution, in file order) is a legal history,
    else a sentence saying which step is illegal."""
    previous: str | None = None
    for index, status in enumerate(statuses):
        if status not in STATUSES and status != "planned":
            return f"step {index + 1}: unknown status {status!r}"
        allowed = _NEXT.get(previous, frozenset())
        if status not in allowed:
            before = previous or "(start)"
            if previous in TERMINAL:
                return f"step {index + 1}: {status!r} after terminal {previous!r}"
            return f"step {index + 1}: {before!r} -> {status!r} is not a legal transition"
        previous = status
    return None


def assert_transition(previous: str | None, status: str) -> None:
    """Raise LedgerError if appending ``status`` after ``previous`` is illegal."""
    if status not in _NEXT.get(previous, frozenset()):
        raise LedgerError(f"illegal ledger transition {previous or '(start)'!r} -> {status!r}")


def arguments_sha256(arguments: Mapping[str, Any]) -> str:
    """Seed 000's hash of canonical arguments: sorted keys, ensure_ascii=False, compact."""
    canonical = json.dumps(arguments, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def idempotency_key(*, session_id: str, turn: int, tool_call: ToolCall, args_sha256: str) -> str:
    """The runtime's idempotency key for one tool call (seed 004: never the model's).

    Recipe: ``agent:{session_id}:t{turn}:{tool_call_id}:{tool_name}:{arguments_sha256[:16]}``.

    * Stable across attempts of the same call: every retry and every restart rebuilds the
      same key from what is on disk, so a keyed API deduplicates them.
    * The turn number (1-based count of user messages) separates a tool_call_id that a
      provider reuses in a later turn: a new turn is a new business action.
    * The arguments hash means one key never covers two different payloads.
    """
    return f"agent:{session_id}:t{turn}:{tool_call.id}:{tool_call.name}:{args_sha256[:16]}"


@dataclass(frozen=True, slots=True)
class CallSite:
    """Where a tool call stands in the session: the assistant message that made it."""

    call: ToolCall
    turn: int  # 1-based count of user messages up to here
    message_index: int  # index into the entry list of the assistant message


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A tool call with no Tool Result yet, and the ledger lines written for it since."""

    site: CallSite
    executions: tuple[tuple[str, tuple[ExecutionRecord, ...]], ...]  # (execution_id, history)

    @property
    def call(self) -> ToolCall:
        return self.site.call

    @property
    def latest(self) -> ExecutionRecord | None:
        return self.executions[-1][1][-1] if self.executions else None


def tool_call_sites(entries: Sequence[Entry]) -> list[CallSite]:
    sites: list[CallSite] = []
    turn = 0
    for index, entry in enumerate(entries):
        if isinstance(entry, MessageEntry):
            message = entry.message
            if message.role == "user":
                turn += 1
            elif message.role == "assistant":
                sites.extend(CallSite(call, turn, index) for call in message.tool_calls)
    return sites


def executions_by_call(
    entries: Sequence[Entry], site: CallSite
) -> tuple[tuple[str, tuple[ExecutionRecord, ...]], ...]:
    """Ledger histories for one call site, grouped by execution_id in first-seen order.

    Only lines AFTER the assistant message that made the call count: a provider that reuses
    ``call_0`` in a later turn must not inherit an older turn's executions.
    """
    grouped: dict[str, list[ExecutionRecord]] = {}
    for entry in entries[site.message_index + 1 :]:
        if isinstance(entry, MessageEntry) and entry.message.role == "user":
            break
        if isinstance(entry, ExecutionRecord) and entry.tool_call_id == site.call.id:
            grouped.setdefault(entry.execution_id, []).append(entry)
    return tuple((eid, tuple(history)) for eid, history in grouped.items())


def _has_result(entries: Sequence[Entry], site: CallSite) -> bool:
    for entry in entries[site.message_index + 1 :]:
        if isinstance(entry, MessageEntry):
            message = entry.message
            if message.role == "tool" and message.tool_call_id == site.call.id:
                return True
            if message.role == "user":
                return False
    return False


def pending_tool_calls(entries: Sequence[Entry]) -> list[PendingCall]:
    """Every tool call without a Tool Result, in the order the model made them."""
    return [
        PendingCall(site, executions_by_call(entries, site))
        for site in tool_call_sites(entries)
        if not _has_result(entries, site)
    ]
