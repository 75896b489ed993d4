"""The named evals of the scorecard: what any agent must get right, each backed by the cases
that show it.

Two kinds. Seed 004's list ("Eval 里要测"), in its meaning, each named by scenarios that
declare it (``evals:`` in a scenario file). And the crash evals, one per crash column and
idempotency class: no double effect (non-idempotent tools), the model was told the truth,
the turn finished. Pure data; ``crashmatrix.reports.scorecard`` scores them.

A crash case answers the crash evals of ONE class: the class of the call its crash point
names (``after_running[call_x]``, and ``power@P`` / ``recovery@P`` by their P), under the
contract that governs that call with its arguments (``ToolContract.for_call``:
``run_command("ls")`` is idempotent, ``run_command("rm x")`` is not) -- never the classes
of every tool its scenario has, or a crash on ``send_email`` would answer for
``read_file``. ``after_model_reply`` and ``after_tool_call_pending`` name the reply's
first call. A clean case, or one whose point names no call of its scenario (or a call id
two of its rules use for calls of different classes), answers only the class-free rows:
seed 004's list.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.errors import InputError

__all__ = [
    "CRASH_QUESTIONS",
    "SEED004_EVALS",
    "CrashQuestion",
    "CrashedCall",
    "Eval",
    "crash_eval_id",
    "crashed_call",
]


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
    # After a tool-side fault the truth is also "no success without an answer".
    "told_the_truth": CrashQuestion(
        "the model was told the truth",
        frozenset({"told_the_truth", "no_success_without_answer"}),
        _ALL_CLASSES,
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


@dataclass(frozen=True, slots=True)
class CrashedCall:
    """The call a crash point names: its id, the suite's tool and that call's class."""

    call: str
    tool: str
    idempotency: str  # "idempotent" | "conditional" | "non_idempotent"


def crashed_call(scenario: Scenario, point_id: str) -> CrashedCall | None:
    """The call that ``point_id`` crashed (see the module docstring); None for a clean case
    or a point that names no call of the scenario's script with one class."""
    try:
        point = parse_point(point_id.rpartition("@")[2])  # power@P, recovery@P -> P
    except InputError:
        return None  # "clean"
    found = {
        (name, scenario.contracts[name].for_call(arguments).idempotency)
        for rule in scenario.rules
        for call_id, name, arguments in rule.reply.tool_calls
        if call_id == point.tool_call_id and name in scenario.contracts
    }
    if len(found) != 1:
        return None  # no such call, or one id for calls of two classes: no class to answer for
    [(tool, idempotency)] = found
    return CrashedCall(point.tool_call_id, tool, idempotency)
