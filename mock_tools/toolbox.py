"""``MockToolbox``: the mock tools behind ``harness.core.tools.Toolbox``.

Dispatch order for a call: the contract must exist (else UNKNOWN_TOOL); the arguments must
fit its ``parameters`` schema (else INVALID_ARGUMENTS, before anything else: a request that
fails validation never reaches a service, so it must not consume a fault); then an armed
fault may fire; then the tool runs. A contract with ``mock:`` runs generically
(``generic.py``), whatever its name; otherwise the tool name picks a built-in.

``execute`` never raises for a tool-level failure; a failure after a side-effecting tool
may have committed (an OS or SQLite error mid-way) is reported as SIDE_EFFECT_UNCERTAIN,
because that is what the caller knows (``calls.answer_lost``).

With a ``ToolSide`` (``calls.ToolSide``: a tool-side column's case, issue 32) every call that
passed validation reaches the tool side: the toolbox tells the harness (the trace's
``mcp_call`` event) and takes the fault armed for that call, once. A tool over HTTP gets it on
the wire (``calls.FaultyHttp``: its client sees httpx's exceptions); any other meets it at its
in-process backend: an error answer before it runs (``tool_result_error``), or, after the
effect committed, the exception its connection would raise (``calls.backend_failure``),
which the toolbox, the tool's client, words like any answer lost.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

import httpx
import jsonschema

import crashmatrix.mock_tools.calls as calls
from crashmatrix.harness.core.contracts import ToolContract
from crashmatrix.harness.core.tools import PreconditionVerdict, ToolContext, ToolObservation
from crashmatrix.mock_tools.calls import (
    FAULT_DETAILS,
    Call,
    FaultyHttp,
    Handler,
    ToolSide,
    backend_error,
    backend_failure,
    invalid,
)
from crashmatrix.mock_tools.command_tools import READ_ONLY_KINDS, command_kind, run_command
from crashmatrix.mock_tools.faults import fault_observation, lost_response_observation
from crashmatrix.mock_tools.file_tools import check_write, list_files, plan_write, read_file, write_file
from crashmatrix.mock_tools.generic import run_generic
from crashmatrix.mock_tools.order_tools import (
    create_order,
    create_order_unkeyed,
    get_order_by_idempotency_key,
)
from crashmatrix.mock_tools.outbox import list_sent_emails, send_email
from crashmatrix.mock_tools.world import World

__all__ = ["BUILTIN_TOOLS", "MockToolbox", "validator_for"]

# A tool added here is added to harness.core.contracts.BUILTIN_BEHAVIOURS too: scenario
# loading reads that list (it may not import this module) to refuse tools nothing can run.
BUILTIN_TOOLS: Mapping[str, Handler] = {
    "read_file": read_file,
    "list_files": list_files,
    "write_file": write_file,
    "create_order": create_order,
    "create_order_unkeyed": create_order_unkeyed,
    "get_order_by_idempotency_key": get_order_by_idempotency_key,
    "send_email": send_email,
    "list_sent_emails": list_sent_emails,
    "run_command": run_command,
}
_READ_ONLY_BUILTINS = frozenset(
    {"read_file", "list_files", "get_order_by_idempotency_key", "list_sent_emails"}
)
# These talk to the order API, which consumes faults on the service side (order_api.py).
_SERVICE_FAULTS = frozenset({"create_order", "create_order_unkeyed", "get_order_by_idempotency_key"})
# The tool-side faults that act after the effect: the call ran, its answer did not come back.
_AFTER_EFFECT = frozenset({"tool_server_died", "tool_response_lost", "tool_result_malformed"})
# String arguments each built-in reads, whatever its contract's schema says.
_REQUIRED_STRINGS: Mapping[str, tuple[str, ...]] = {
    "read_file": ("path",),
    "get_order_by_idempotency_key": ("idempotency_key",),
    "send_email": ("to", "subject", "body"),
    "run_command": ("command",),
}


# Validators by schema (canonical JSON), shared by every toolbox in the process: building one
# walks the schema and its metaschema, and the fork server builds the built-in contracts'
# ones once (``harness.lives.warmup``) instead of every life building them again. A validator
# keeps no state between validations.
_VALIDATORS: dict[str, jsonschema.protocols.Validator] = {}


def validator_for(parameters: Mapping[str, Any]) -> jsonschema.protocols.Validator:
    """The (cached) JSON Schema validator of a contract's ``parameters``."""
    key = json.dumps(parameters, sort_keys=True, default=str)
    validator = _VALIDATORS.get(key)
    if validator is None:
        validator = _VALIDATORS[key] = jsonschema.Draft202012Validator(dict(parameters))
    return validator


class MockToolbox:
    """The tools of ``contracts`` acting on ``world``; HTTP tools use ``http`` (respx-mocked);
    ``tool_side``: where a tool-side fault reaches the calls (None: nowhere)."""

    def __init__(
        self,
        world: World,
        contracts: Mapping[str, ToolContract],
        http: httpx.Client,
        tool_side: ToolSide | None = None,
    ) -> None:
        self.world = world
        self.contracts = dict(contracts)
        self.http = http
        self.tool_side = tool_side

    # -- Toolbox protocol -------------------------------------------------------------------

    def execute(self, name: str, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolObservation:
        contract = self.contracts.get(name)
        if contract is None:
            return ToolObservation(
                ok=False,
                code="UNKNOWN_TOOL",
                content=f"there is no tool named {name!r}; available: {', '.join(sorted(self.contracts))}",
            )
        handler = self._handler(contract)
        if handler is None:
            return ToolObservation(
                ok=False, code="UNKNOWN_TOOL", content=f"tool {name!r} has a contract but no mock behaviour"
            )
        problem = self._check_arguments(contract, arguments)
        if problem:
            return invalid(f"{name}: {problem}")
        over_http = name in _SERVICE_FAULTS and contract.mock is None
        tool_side = self.tool_side.reach(ctx.tool_call_id, name) if self.tool_side else None
        http: httpx.Client | FaultyHttp = self.http
        if tool_side is not None:
            assert self.tool_side is not None
            self.tool_side.acted(tool_side, ctx.tool_call_id, FAULT_DETAILS[tool_side])
            if over_http:
                http = FaultyHttp(self.http, tool_side)
            elif tool_side == "tool_result_error":
                return backend_error(name)
        call = Call(self.world, http, name, dict(arguments), ctx, contract)
        side_effecting = self._side_effecting(contract, arguments)
        fault: str | None = None
        if not over_http:
            fault = self.world.take_fault(name, ctx.tool_call_id, execution_id=ctx.execution_id)
        if fault in ("timeout_before", "permission_denied"):
            return fault_observation(fault, name)
        try:
            observation = handler(call)
            if tool_side in _AFTER_EFFECT and not over_http:
                raise backend_failure(str(tool_side), name)
        except (OSError, sqlite3.Error, json.JSONDecodeError) as error:
            # By module: a mutant swaps answer_lost for a broken one.
            return calls.answer_lost(call, error, side_effecting=side_effecting)
        if fault == "response_lost":
            return lost_response_observation(name, contract, side_effecting=side_effecting)
        return observation

    def plan(self, name: str, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        contract = self.contracts.get(name)
        if contract is None or self._handler(contract) is not write_file:
            return {}
        path = arguments.get(contract.path_argument)
        content = arguments.get(contract.content_argument)
        if not isinstance(path, str) or not isinstance(content, str):
            return {}
        return plan_write(self.world, path, content)

    def check_precondition(
        self, name: str, arguments: Mapping[str, Any], plan: Mapping[str, Any]
    ) -> PreconditionVerdict:
        contract = self.contracts.get(name)
        if contract is None or self._handler(contract) is not write_file:
            # No check exists, so nothing proves a replay safe: the cautious verdict.
            return PreconditionVerdict("conflict", None, reason=f"tool {name!r} has no precondition check")
        path = arguments.get(contract.path_argument)
        content = arguments.get(contract.content_argument)
        return check_write(
            self.world,
            plan,
            path=path if isinstance(path, str) else None,
            content=content if isinstance(content, str) else None,
        )

    # -- helpers ----------------------------------------------------------------------------

    def _handler(self, contract: ToolContract) -> Handler | None:
        spec = contract.mock
        if spec is not None:
            return lambda call: run_generic(call, spec)
        return BUILTIN_TOOLS.get(contract.name)

    def _side_effecting(self, contract: ToolContract, arguments: Mapping[str, Any]) -> bool:
        if contract.mock is not None:
            return contract.mock.kind == "record_row"
        if contract.name == "run_command":
            return command_kind(str(arguments.get("command", ""))) not in READ_ONLY_KINDS
        return contract.name not in _READ_ONLY_BUILTINS

    def _check_arguments(self, contract: ToolContract, arguments: object) -> str | None:
        # ``object``: a model may send anything, whatever the Protocol promises.
        if not isinstance(arguments, Mapping):
            return f"arguments must be a JSON object, not {type(arguments).__name__}"
        if contract.parameters:
            validator = validator_for(contract.parameters)
            error = jsonschema.exceptions.best_match(validator.iter_errors(dict(arguments)))
            if error is not None:
                where = "/".join(str(p) for p in error.absolute_path) or "arguments"
                return f"{where}: {error.message}"
        required = _REQUIRED_STRINGS.get(contract.name, ())
        if contract.mock is None and contract.name == "write_file":
            required = (contract.path_argument, contract.content_argument)
        for key in required:
            if not isinstance(arguments.get(key), str):
                return f"argument {key!r} (a string) is required"
        return None
