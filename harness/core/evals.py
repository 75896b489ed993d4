"""The named evals of the scorecard: what any agent must get right, each backed by the cases
that show it.

Two kinds. Seed 004's list ("Eval 里要测"), in its meaning, each named by scenarios that
declare it (``evals:`` in a scenario file). And the crash evals, one per crash column and
idempotency class: no double effect (non-idempotent tools), the model was told the truth,
the turn finished. Pure data; ``crashmatrix.reports.scorecard`` scores them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["CRASH_QUESTIONS", "SEED004_EVALS", "CrashQuestion", "Eval", "crash_eval_id"]


@dataclass(frozen=True, slots=True)
class Eval:
    id: str
    title: str


# Seed 004, "Eval 要覆盖幂等性": the list, each as a claim a case can show.
SEED004_EVALS: Mapping[str, Eval] = {
    e.id: e
    for e in (
        Eval("read_file_timeout_may_retry", "read_file: after a timeout, a retry is allowed"),
        Eval(
            "create_order_timeout_uncertain",
            "create_order: after a timeout it is not retried and returns SIDE_EFFECT_UNCERTAIN",
        ),
        Eval("write_file_replays_on_base_hash", "write_file: replays when the base hash still matches"),
        Eval("write_file_conflict_on_change", "write_file: a conflict when the file changed"),
        Eval("permission_denied_never_replayed", "PERMISSION_DENIED is never replayed"),
        Eval("mcp_create_issue_non_idempotent", "an MCP create_issue tool defaults to non_idempotent"),
        Eval("ls_replays", 'run_command("ls") replays automatically'),
        Eval("npm_publish_never_replays", 'run_command("npm publish") never replays'),
    )
}


@dataclass(frozen=True, slots=True)
class CrashQuestion:
    title: str
    broken_by: frozenset[str]  # the invariants whose violation answers "no"
    classes: frozenset[str]  # the idempotency classes it is asked of


_ALL_CLASSES = frozenset({"idempotent", "conditional", "non_idempotent"})

# The crash evals' three questions, each answered by what breaks it: invariants (and, for the
# truth, a told: expectation that was not met; for the turn, a case that did not finish).
# "No double effect" is asked of non-idempotent tools only: running an idempotent tool twice
# is its contract, and a conditional tool's precondition is judged by its scenario's told:
# and world expectations, which "told the truth" and the case itself carry.
CRASH_QUESTIONS: Mapping[str, CrashQuestion] = {
    "no_double_effect": CrashQuestion(
        "no double effect", frozenset({"non_idempotent_at_most_once"}), frozenset({"non_idempotent"})
    ),
    "told_the_truth": CrashQuestion(
        "the model was told the truth", frozenset({"told_the_truth"}), _ALL_CLASSES
    ),
    # Seed 000's order: the running record is durable before the effect, or a crash after
    # the effect leaves "never ran" and "ran" looking alike. Judged on agents whose ledger
    # the adapter maps; not applicable on the others.
    "ledger_first": CrashQuestion(
        "the ledger said running first", frozenset({"running_before_side_effect"}), _ALL_CLASSES
    ),
    "turn_finished": CrashQuestion(
        "the turn finished",
        frozenset({"turn_ends_with_final", "one_tool_result_per_call", "no_user_message_from_recovery"}),
        _ALL_CLASSES,
    ),
}


def crash_eval_id(column: str, idempotency: str, question: str) -> str:
    return f"crash.{column}.{idempotency}.{question}"
