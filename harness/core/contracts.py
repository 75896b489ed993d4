"""Tool contracts: what running a tool twice does, and how recovery must treat it.

A contract is a YAML file validated by ``schemas/contract.schema.json``. Defaults follow
seed 004: a tool nobody described is ``non_idempotent`` / ``never`` / ``surface_uncertain``,
because assuming the worst is the only safe guess.

``run_command`` is one tool name with many behaviours, so its contract says
``classify: run_command`` and each call is classified from its command string
(``harness.core.classifier``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "BUILTIN_BEHAVIOURS",
    "RECOVERY_OUTCOMES",
    "Idempotency",
    "MockSpec",
    "Recovery",
    "ReplayPolicy",
    "ToolContract",
    "contract_from_mapping",
    "default_contract",
]

Idempotency = Literal["idempotent", "conditional", "non_idempotent"]
ReplayPolicy = Literal["auto", "ask", "never"]
Recovery = Literal["replay", "precondition", "reconcile", "surface_uncertain", "manual"]

# The tools whose mock behaviour is written in Python (``mock_tools/toolbox.py``'s
# BUILTIN_TOOLS; a test keeps the two equal). Any other contract runs only with a ``mock:``
# section. The names live here because harness.input, which refuses a scenario whose tools
# cannot run, may not import the mock tools themselves.
BUILTIN_BEHAVIOURS = frozenset(
    {
        "read_file",
        "list_files",
        "write_file",
        "create_order",
        "create_order_unkeyed",
        "get_order_by_idempotency_key",
        "send_email",
        "list_sent_emails",
        "run_command",
    }
)

# The recovery outcomes a Tool Result can report (its ``recovery`` field), which a scenario's
# ``expect: outcome:`` is written in. The reference agent produces them and exports this
# tuple as ``reference_agent.recovery.OUTCOMES``; it lives here because harness.input, which
# checks a scenario's words, may not import an agent.
RECOVERY_OUTCOMES = (
    "completed",
    "result_replayed",
    "replayed",
    "already_applied",
    "reapplied",
    "conflict",
    "reconciled",
    "side_effect_uncertain",
    "reapproval",
    "rejected_rebuilt",
    "manual",
)

_DEFAULT_POLICY: Mapping[str, ReplayPolicy] = {
    "idempotent": "auto",
    "conditional": "ask",
    "non_idempotent": "never",
}
_DEFAULT_RECOVERY: Mapping[str, Recovery] = {
    "idempotent": "replay",
    "conditional": "precondition",
    "non_idempotent": "surface_uncertain",
}


@dataclass(frozen=True, slots=True)
class MockSpec:
    """A generic mock behaviour declared in YAML (``mock:``)."""

    kind: Literal["record_row", "lookup_row", "read_only"]
    table: str = ""
    honours_idempotency_key: bool = False
    result: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolContract:
    name: str
    idempotency: Idempotency = "non_idempotent"
    replay_policy: ReplayPolicy = "never"
    recovery: Recovery = "surface_uncertain"
    approval: Literal["required", "auto"] = "required"
    ledger: bool = True
    description: str = ""
    lookup_tool: str | None = None
    path_argument: str = "path"
    content_argument: str = "content"
    side_effects: tuple[str, ...] = ()
    classify: str | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    mock: MockSpec | None = None
    source: str = "(default)"
    reason: str = ""  # why this class applies (a classifier's verdict, an import's hint)

    @property
    def has_side_effects(self) -> bool:
        return self.idempotency != "idempotent" or bool(self.side_effects)

    @property
    def has_mock_behaviour(self) -> bool:
        """Whether the mock tools can run this tool; without behaviour every call of it
        returns UNKNOWN_TOOL, and a crash test of it shows nothing."""
        return self.mock is not None or self.name in BUILTIN_BEHAVIOURS

    def for_call(self, arguments: Mapping[str, Any]) -> ToolContract:
        """The contract that governs one call: per-call classification where declared."""
        if self.classify != "run_command":
            return self
        from crashmatrix.harness.core.classifier import classify_command

        verdict = classify_command(str(arguments.get("command", "")))
        return dataclasses.replace(
            self,
            idempotency=verdict.idempotency,
            replay_policy=verdict.replay_policy,
            # A conditional command (``npm test``) has no hash to check: it is replayed
            # after asking (policy ask), so its default ``precondition`` does not apply.
            recovery="replay"
            if verdict.idempotency == "conditional"
            else _DEFAULT_RECOVERY[verdict.idempotency],
            approval="auto" if verdict.idempotency == "idempotent" else "required",
            ledger=verdict.idempotency != "idempotent",
            # The tool's declared effects are what SOME command can do; a read-only one does none.
            side_effects=() if verdict.idempotency == "idempotent" else self.side_effects,
            reason=verdict.reason,
        )

    def tool_schema(self) -> dict[str, Any]:
        """The OpenAI ``tools=[...]`` entry for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description or self.name,
                "parameters": dict(self.parameters) or {"type": "object", "properties": {}},
            },
        }


def default_contract(name: str) -> ToolContract:
    """Seed 004: a tool without a contract is non_idempotent and never replayed."""
    return ToolContract(name=name, source="(no contract: worst case assumed)")


def contract_from_mapping(data: Mapping[str, Any], *, source: str = "(mapping)") -> ToolContract:
    """Build a contract from already-validated data, filling seed 004's defaults."""
    idempotency: Idempotency = data["idempotency"]
    recovery: Recovery = data.get("recovery", _DEFAULT_RECOVERY[idempotency])
    precondition = data.get("precondition") or {}
    mock = data.get("mock")
    return ToolContract(
        name=data["name"],
        idempotency=idempotency,
        replay_policy=data.get("replay_policy", _DEFAULT_POLICY[idempotency]),
        recovery=recovery,
        approval=data.get("approval", "auto" if idempotency == "idempotent" else "required"),
        ledger=data.get("ledger", idempotency != "idempotent" or bool(data.get("side_effects"))),
        description=data.get("description", ""),
        lookup_tool=(data.get("reconcile") or {}).get("lookup_tool"),
        path_argument=precondition.get("path_argument", "path"),
        content_argument=precondition.get("content_argument", "content"),
        side_effects=tuple(data.get("side_effects", ())),
        classify=data.get("classify"),
        parameters=data.get("parameters", {}),
        mock=MockSpec(
            kind=mock["kind"],
            table=mock.get("table", ""),
            honours_idempotency_key=mock.get("honours_idempotency_key", False),
            result=mock.get("result", {}),
        )
        if mock
        else None,
        source=source,
        reason=data.get("reason", ""),
    )
