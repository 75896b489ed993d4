"""Which scenarios apply to an agent: a scenario that needs a tool the agent does not have,
a fault the harness cannot inject into it, or an edit of a session it does not keep in
crashmatrix's place, is not applicable -- with the reason, shown as such in every report,
never failed and never passed. Pure."""

from __future__ import annotations

from crashmatrix.harness.core.capabilities import Capabilities
from crashmatrix.harness.core.scenario import Scenario

__all__ = ["not_applicable"]


def not_applicable(scenario: Scenario, capabilities: Capabilities) -> tuple[str, ...]:
    """Why ``scenario`` cannot be run against an agent with ``capabilities`` (empty: it can)."""
    reasons: list[str] = [f"the agent has no {tool}" for tool in capabilities.tools.missing(scenario.tools)]
    served = capabilities.served
    for fault in scenario.faults:
        tool = str(fault.get("tool"))
        if served is not None and tool not in served and capabilities.tools.has(tool):
            reasons.append(
                f"fault {fault.get('kind')} on {tool} needs the harness to run {tool} for this agent "
                "(tools: harness, services:, or intercept:)"
            )
    if not capabilities.edits_native_session and any(
        "tamper_arguments" in step for step in scenario.between_lives
    ):
        reasons.append("tamper_arguments edits crashmatrix's session file; this agent keeps its own session")
    answers = [*scenario.approvals.values(), *scenario.approvals_again.values()]
    if not capabilities.approvals and any(str(answer).lower() in ("no", "n", "false") for answer in answers):
        reasons.append("the scenario answers an approval with no, and this agent asks for none")
    return tuple(dict.fromkeys(reasons))
