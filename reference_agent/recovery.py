"""Recovery decisions, as a pure function of the ledger and the tool's contract.

Seed 000 section 5 gives the table by last ledger state; seed 004 says the state alone cannot
decide whether a retry is safe: the tool's contract does. ``decide`` combines both:

==========================  =============================================================
last state of the call      decision
==========================  =============================================================
arguments hash differs      ``conflict``: do not execute, do not reuse any stored result
no ledger                   ``execute``: back through the router (approval asked again)
approved                    ``reask``: ask approval again, then continue the same execution
rejected                    ``rebuild_rejection``: the rejection result is deterministic
succeeded / failed          ``replay_result``: publish the stored result, run nothing
unknown (tool said so)      ``reconcile`` if the contract has a lookup, else ``replay_result``
running / interrupted       close the execution as ``unknown`` first, then by contract:
                              replay (auto) -> ``retry``; replay (ask) -> ``ask_then_retry``
                              precondition  -> ``precondition`` (base/after hash check)
                              reconcile     -> ``reconcile`` (lookup by idempotency key)
                              surface_uncertain -> ``surface_uncertain``
                              manual        -> ``manual``
==========================  =============================================================

Every decision is re-entrant: if the process dies while carrying it out, the next start
sees a later ledger state and decides again from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from crashmatrix.harness.core.contracts import RECOVERY_OUTCOMES, ToolContract
from crashmatrix.harness.core.ledger import PendingCall

__all__ = ["OUTCOMES", "Action", "Decision", "decide"]

Action = Literal[
    "execute",
    "reask",
    "rebuild_rejection",
    "replay_result",
    "conflict",
    "retry",
    "ask_then_retry",
    "precondition",
    "reconcile",
    "surface_uncertain",
    "manual",
]

# The recovery outcomes a Tool Result can report (``"recovery"`` field); the Outcomes table
# of scenarios/README.md explains each, in this order (tests/test_docs.py checks that it
# does). ``completed`` means no recovery decision was needed. One tuple, in harness.core,
# because scenario files are checked against it there.
OUTCOMES = RECOVERY_OUTCOMES


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    # The latest execution is still ``running``: append ``unknown`` for it before anything
    # else, because whatever happens next is a different attempt.
    close_running: bool = False
    reason: str = ""


def _by_contract(contract: ToolContract, *, close_running: bool) -> Decision:
    strategy = contract.recovery
    if strategy == "replay":
        if contract.replay_policy == "auto":
            return Decision("retry", close_running, "idempotent tool: replay with a new execution")
        if contract.replay_policy == "ask":
            return Decision("ask_then_retry", close_running, "replay needs the user's consent")
        return Decision("surface_uncertain", close_running, "replay policy is never")
    if strategy == "precondition":
        return Decision("precondition", close_running, "conditional tool: check base/after hash")
    if strategy == "reconcile":
        return Decision("reconcile", close_running, "look the first attempt up by its key")
    if strategy == "manual":
        return Decision("manual", close_running, "contract asks for a person to check")
    return Decision("surface_uncertain", close_running, "non-idempotent: never replay blindly")


def decide(pending: PendingCall, contract: ToolContract, arguments_sha256: str) -> Decision:
    """What recovery must do for one tool call that has no Tool Result yet."""
    latest = pending.latest
    running = latest is not None and latest.status == "running"
    for _, history in pending.executions:
        recorded = history[0].arguments_sha256
        if recorded and recorded != arguments_sha256:
            return Decision(
                "conflict",
                close_running=running,
                reason="the saved arguments no longer match the ledger's arguments_sha256",
            )
    if latest is None:
        return Decision("execute", reason="no ledger: the call never reached approval")
    status = latest.status
    if status in ("approved", "planned"):
        if latest.extra.get("purpose") in ("reconcile", "retry_with_key"):
            # Approved by recovery itself (a lookup, or a retry under the same key), not by
            # the user: carry the reconcile on; asking the user again would be wrong.
            return Decision("reconcile", reason="an interrupted reconcile: carry it on")
        return Decision("reask", reason="approved but never started: ask again")
    if status == "rejected":
        return Decision("rebuild_rejection", reason="rejected: rebuild the rejection")
    if status == "running":
        if contract.lookup_tool and latest.tool_name == contract.lookup_tool:
            return Decision("reconcile", True, "a reconcile lookup was interrupted: look up again")
        return _by_contract(contract, close_running=True)
    if status == "unknown":
        interrupted = bool((latest.result or {}).get("interrupted"))
        if interrupted:
            # We wrote this ``unknown`` ourselves while recovering and died before acting on
            # it: act on it now, exactly as if we had just written it.
            return _by_contract(contract, close_running=False)
        if contract.recovery == "reconcile" and contract.lookup_tool:
            return Decision("reconcile", reason="the tool reported an uncertain side effect")
        return Decision("replay_result", reason="uncertain result already recorded: publish it")
    if (
        status == "succeeded"
        and contract.lookup_tool
        and latest.tool_name == contract.lookup_tool
        and not (latest.result or {}).get("found", True)
    ):
        # The lookup found nothing: the first attempt never reached the service, so retrying
        # with the SAME key is safe (the service deduplicates by it).
        return Decision("reconcile", reason="lookup found nothing: retry with the same key")
    return Decision("replay_result", reason=f"{status}: the stored result is the answer")
