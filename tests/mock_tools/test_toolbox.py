"""MockToolbox: dispatch, argument checks, fault kinds, and the order/email tools end to end."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from crashmatrix.harness.core.tools import Toolbox, ToolContext
from crashmatrix.mock_tools import FaultSpec, MockToolbox, World
from crashmatrix.mock_tools.order_api import payload_sha256

MakeCtx = Callable[..., ToolContext]  # the make_ctx fixture (conftest.py)

ORDER = {"item": "pen", "quantity": 2}
EMAIL = {"to": "a@b.test", "subject": "hi", "body": "hello"}


def test_mock_toolbox_implements_the_toolbox_protocol(toolbox: MockToolbox) -> None:
    implementation: Toolbox = toolbox
    assert implementation is toolbox


def test_an_unknown_tool_is_an_observation_not_an_exception(toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    observation = toolbox.execute("launch_rockets", {}, make_ctx())
    assert (observation.ok, observation.code) == (False, "UNKNOWN_TOOL")


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("read_file", {}),
        ("read_file", {"path": 3}),
        ("write_file", {"path": "a"}),
        ("create_order", {"item": "pen", "quantity": 0}),
        ("send_email", {"to": "x"}),
        ("run_command", {"command": ""}),
        ("refund_payment", {"payment_id": "p"}),
        ("read_file", ["not", "a", "mapping"]),
    ],
)
def test_bad_arguments_are_invalid_arguments_with_no_effect(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx, name: str, arguments: object
) -> None:
    observation = toolbox.execute(name, arguments, make_ctx())  # type: ignore[arg-type]
    assert (observation.ok, observation.code) == (False, "INVALID_ARGUMENTS")
    assert world.events() == []


def test_invalid_arguments_do_not_consume_an_armed_fault(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    world.add_fault(FaultSpec("send_email", "timeout_before"))
    toolbox.execute("send_email", {"to": "x"}, make_ctx())
    assert toolbox.execute("send_email", EMAIL, make_ctx()).code == "TIMEOUT"


# -- create_order -------------------------------------------------------------------------


def test_create_order_sends_the_runtime_key_and_a_retry_is_replayed(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    first = toolbox.execute("create_order", ORDER, make_ctx(execution_id="exec_1"))
    second = toolbox.execute("create_order", ORDER, make_ctx(execution_id="exec_2"))
    assert first.ok and second.ok
    assert (first.data["replayed"], second.data["replayed"]) == (False, True)
    assert first.data["order"] == second.data["order"]
    assert first.data["order"]["idempotency_key"] == "key_1"
    assert world.snapshot().counts["orders"] == 1
    [event] = world.events("order")
    assert (event.tool_call_id, event.execution_id, event.idempotency_key) == ("call_1", "exec_1", "key_1")


def test_create_order_with_the_key_of_another_payload_is_arguments_mismatch(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    toolbox.execute("create_order", ORDER, make_ctx())
    observation = toolbox.execute("create_order", {"item": "pen", "quantity": 9}, make_ctx())
    assert (observation.ok, observation.code, observation.retryable) == (False, "ARGUMENTS_MISMATCH", False)
    assert world.snapshot().counts["orders"] == 1


def test_create_order_unkeyed_cannot_be_deduplicated(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    toolbox.execute("create_order_unkeyed", ORDER, make_ctx(execution_id="exec_1"))
    toolbox.execute("create_order_unkeyed", ORDER, make_ctx(execution_id="exec_2"))
    assert world.snapshot().counts["orders"] == 2
    assert {e.tool for e in world.events("order")} == {"create_order_unkeyed"}


def test_create_order_timeout_before_is_retryable_and_created_nothing(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    world.add_fault(FaultSpec("create_order", "timeout_before"))
    observation = toolbox.execute("create_order", ORDER, make_ctx())
    assert (observation.ok, observation.code, observation.retryable, observation.uncertain) == (
        False,
        "TIMEOUT",
        True,
        False,
    )
    assert world.snapshot().counts["orders"] == 0


def test_create_order_response_lost_is_uncertain_and_names_the_lookup_tool(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    world.add_fault(FaultSpec("create_order", "response_lost"))
    observation = toolbox.execute("create_order", ORDER, make_ctx())
    assert observation.code == "SIDE_EFFECT_UNCERTAIN"
    assert observation.uncertain and not observation.retryable
    assert observation.ledger_status == "unknown"
    assert "may already have happened" in observation.content
    assert "get_order_by_idempotency_key" in observation.content
    assert world.snapshot().counts["orders"] == 1
    lookup = toolbox.execute("get_order_by_idempotency_key", {"idempotency_key": "key_1"}, make_ctx())
    assert lookup.ok and lookup.data["found"]
    assert lookup.data["order"]["idempotency_key"] == "key_1"


def test_create_order_permission_denied_creates_nothing(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    world.add_fault(FaultSpec("create_order", "permission_denied"))
    assert toolbox.execute("create_order", ORDER, make_ctx()).code == "PERMISSION_DENIED"
    assert world.snapshot().counts["orders"] == 0


def test_create_order_while_the_same_key_is_in_flight_is_a_retryable_conflict(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    # A claim held by this (live) process, as if a first attempt were still running.
    with world.transaction() as conn:
        conn.execute(
            "INSERT INTO idempotency (key, payload_sha256, state, owner_pid, owner_token)"
            " VALUES ('key_1', ?, 'in_flight', ?, 'first-attempt')",
            (payload_sha256(ORDER), os.getpid()),
        )
    observation = toolbox.execute("create_order", ORDER, make_ctx())
    assert (observation.ok, observation.code, observation.retryable) == (False, "CONFLICT", True)
    assert world.snapshot().counts["orders"] == 0


def test_lookup_of_an_unknown_key_is_found_false(toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    observation = toolbox.execute("get_order_by_idempotency_key", {"idempotency_key": "nope"}, make_ctx())
    assert observation.ok
    assert observation.data == {"found": False, "order": None}


def test_a_read_only_lookup_whose_response_was_lost_is_a_retryable_timeout(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    world.add_fault(FaultSpec("get_order_by_idempotency_key", "response_lost"))
    observation = toolbox.execute("get_order_by_idempotency_key", {"idempotency_key": "k"}, make_ctx())
    assert (observation.code, observation.retryable, observation.uncertain) == ("TIMEOUT", True, False)


# -- send_email ---------------------------------------------------------------------------


def test_every_send_email_is_one_more_email(world: World, toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    for n in range(2):
        assert toolbox.execute("send_email", EMAIL, make_ctx(execution_id=f"exec_{n}")).ok
    assert world.snapshot().counts["emails"] == 2
    listed = toolbox.execute("list_sent_emails", {}, make_ctx()).data["emails"]
    assert [e["to"] for e in listed] == ["a@b.test", "a@b.test"]
    assert [e.execution_id for e in world.events("email")] == ["exec_0", "exec_1"]


def test_send_email_response_lost_sent_it_and_says_so_without_a_lookup(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    world.add_fault(FaultSpec("send_email", "response_lost"))
    observation = toolbox.execute("send_email", EMAIL, make_ctx())
    assert (observation.code, observation.uncertain) == ("SIDE_EFFECT_UNCERTAIN", True)
    assert "must not be retried blindly" in observation.content
    assert world.snapshot().counts["emails"] == 1
    assert [e.kind for e in world.events()] == ["fault", "email"]


@pytest.mark.parametrize(
    ("kind", "code"), [("timeout_before", "TIMEOUT"), ("permission_denied", "PERMISSION_DENIED")]
)
def test_send_email_faults_before_the_effect_send_nothing(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx, kind: str, code: str
) -> None:
    world.add_fault(FaultSpec("send_email", kind))
    observation = toolbox.execute("send_email", EMAIL, make_ctx())
    assert (observation.ok, observation.code, observation.retryable) == (
        False,
        code,
        kind == "timeout_before",
    )
    assert world.snapshot().counts["emails"] == 0


def test_read_file_timeout_may_be_retried(world: World, toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    world.add_fault(FaultSpec("read_file", "timeout_before"))
    first = toolbox.execute("read_file", {"path": "README.md"}, make_ctx())
    assert (first.code, first.retryable) == ("TIMEOUT", True)
    assert toolbox.execute("read_file", {"path": "README.md"}, make_ctx()).ok


def test_write_file_response_lost_wrote_the_file_but_is_uncertain(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    world.add_fault(FaultSpec("write_file", "response_lost"))
    observation = toolbox.execute("write_file", {"path": "README.md", "content": "new"}, make_ctx())
    assert observation.uncertain
    assert (world.workspace / "README.md").read_text() == "new"


def test_argument_validators_are_shared_by_schema_content_not_by_tool_name() -> None:
    from crashmatrix.mock_tools.toolbox import validator_for

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    same = validator_for({"required": ["n"], "properties": {"n": {"type": "integer"}}, "type": "object"})
    assert validator_for(schema) is same  # built once per process (the fork server warms them)
    changed = validator_for({**schema, "properties": {"n": {"type": "string"}}})
    assert changed is not same
    assert same.is_valid({"n": 1}) and not changed.is_valid({"n": 1})
