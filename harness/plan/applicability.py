"""Which scenarios apply to an agent: a scenario that needs a tool the agent does not have,
a program only the simulated shell provides (``needs:``) while the agent runs a real one, a
call its tool does not accept (the catalogue's ``only:``), a fault the harness cannot inject
into it, or an edit of a session it keeps where the harness cannot edit it, is not applicable
-- with the reason, shown as such in every report, never failed and never passed. Pure."""

from __future__ import annotations

from crashmatrix.harness.core.capabilities import Capabilities
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.core.toolmap import ToolMap

__all__ = ["not_applicable"]


def not_applicable(scenario: Scenario, capabilities: Capabilities) -> tuple[str, ...]:
    """Why ``scenario`` cannot be run against an agent with ``capabilities`` (empty: it can)."""
    reasons: list[str] = [f"the agent has no {tool}" for tool in capabilities.tools.missing(scenario.tools)]
    reasons += _commands(scenario, capabilities.tools)
    served = capabilities.served
    for fault in scenario.faults:
        tool = str(fault.get("tool"))
        if served is not None and tool not in served and capabilities.tools.has(tool):
            reasons.append(
                f"fault {fault.get('kind')} on {tool} needs the harness to run {tool} for this agent "
                "(tools: harness, services:, or intercept:)"
            )
    if (
        not capabilities.edits_native_session
        and capabilities.own_session_tamper
        and any("tamper_arguments" in step for step in scenario.between_lives)
    ):
        reasons.append(
            f"tamper_arguments cannot edit this agent's saved tool call: {capabilities.own_session_tamper}"
        )
    answers = [*scenario.approvals.values(), *scenario.approvals_again.values()]
    if not capabilities.approvals and any(str(answer).lower() in ("no", "n", "false") for answer in answers):
        reasons.append("the scenario answers an approval with no, and this agent asks for none")
    return tuple(dict.fromkeys(reasons))


def _commands(scenario: Scenario, tools: ToolMap) -> list[str]:
    """What the agent's own tools cannot run: the programs a scenario needs on a real shell
    (a real ``npm publish`` in an empty workspace fails where the simulator succeeds: a red
    that is no defect of the agent), and each scripted call outside its tool's ``only:``."""
    reasons: list[str] = []
    shells = [tool for tool in scenario.tools if tools.has(tool) and tools.real_shell(tool)]
    if scenario.needs and shells:
        reasons.append(
            f"the scenario needs {', '.join(scenario.needs)} (needs:), which crashmatrix's simulated "
            f"shell provides; this agent runs {tools.agent_name(shells[0])} in a real shell (shell: real)"
        )
    for rule in scenario.rules:
        for call_id, tool, arguments in rule.reply.tool_calls:
            if not tools.has(tool):
                continue  # already a missing tool
            for outside in tools.outside(tool, arguments):
                # The patterns as written in the adapter (a repr would double each backslash).
                patterns = " or ".join(f"'{pattern}'" for pattern in outside.patterns)
                reasons.append(
                    f"{call_id} calls {tools.agent_name(tool)} with {outside.argument} {outside.value!r}, "
                    f"which matches none of the catalogue's only: {patterns}"
                )
    return reasons
