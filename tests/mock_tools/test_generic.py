"""Tools declared only in YAML: record_row (with and without key dedupe), lookup_row, read_only."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from crashmatrix.harness.core.tools import ToolContext
from crashmatrix.mock_tools import FaultSpec, MockToolbox, World, catalogue

MakeCtx = Callable[..., ToolContext]  # the make_ctx fixture (conftest.py)

REFUND = {"payment_id": "pay_1", "amount_cents": 500}


def test_record_row_inserts_one_row_and_its_event(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    observation = toolbox.execute("refund_payment", REFUND, make_ctx())
    assert observation.ok
    assert observation.data["refund_state"] == "refunded"  # the contract's result constants
    assert observation.data["replayed"] is False
    row = observation.data["row"]
    assert (row["table"], row["idempotency_key"], row["payload"]) == ("refunds", "key_1", REFUND)
    [event] = world.events()
    assert (event.kind, event.seq, event.detail["table"]) == ("row", row["seq"], "refunds")
    assert world.snapshot().counts["rows:refunds"] == 1


def test_a_key_honouring_row_is_returned_again_instead_of_inserted(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    first = toolbox.execute("refund_payment", REFUND, make_ctx(execution_id="exec_1"))
    second = toolbox.execute("refund_payment", REFUND, make_ctx(execution_id="exec_2"))
    assert second.data["replayed"] is True
    assert second.data["row"] == first.data["row"]
    assert world.snapshot().counts["rows:refunds"] == 1
    assert len(world.events("row")) == 1


def test_a_key_honouring_tool_refuses_the_same_key_with_other_arguments(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    toolbox.execute("refund_payment", REFUND, make_ctx())
    observation = toolbox.execute("refund_payment", {**REFUND, "amount_cents": 1}, make_ctx())
    assert observation.code == "ARGUMENTS_MISMATCH"
    assert world.snapshot().counts["rows:refunds"] == 1


def test_a_different_key_is_a_different_refund(world: World, toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    toolbox.execute("refund_payment", REFUND, make_ctx(idempotency_key="k1"))
    toolbox.execute("refund_payment", REFUND, make_ctx(idempotency_key="k2"))
    assert world.snapshot().counts["rows:refunds"] == 2


def test_a_row_without_key_support_is_duplicated_by_a_retry(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    email = {"to": "a@b.test", "subject": "s", "body": "b"}
    toolbox.execute("send_email_yaml", email, make_ctx(execution_id="exec_1"))
    toolbox.execute("send_email_yaml", email, make_ctx(execution_id="exec_2"))
    assert world.snapshot().counts["rows:emails"] == 2


def test_lookup_row_reconciles_a_lost_response(world: World, toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    world.add_fault(FaultSpec("create_order_yaml", "response_lost"))
    lost = toolbox.execute("create_order_yaml", {"item": "pen", "quantity": 1}, make_ctx())
    assert lost.code == "SIDE_EFFECT_UNCERTAIN"
    assert "get_order_yaml_by_key" in lost.content
    found = toolbox.execute("get_order_yaml_by_key", {"idempotency_key": "key_1"}, make_ctx())
    assert found.ok and found.data["found"]
    assert found.data["row"]["payload"] == {"item": "pen", "quantity": 1}
    missing = toolbox.execute("get_order_yaml_by_key", {"idempotency_key": "other"}, make_ctx())
    assert missing.data == {"found": False, "row": None}
    # Generic rows and the order API's orders are different tables.
    assert world.snapshot().counts["orders"] == 0


@pytest.mark.parametrize(
    ("kind", "code"), [("timeout_before", "TIMEOUT"), ("permission_denied", "PERMISSION_DENIED")]
)
def test_faults_before_the_effect_insert_no_row(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx, kind: str, code: str
) -> None:
    world.add_fault(FaultSpec("refund_payment", kind))
    assert toolbox.execute("refund_payment", REFUND, make_ctx()).code == code
    assert "rows:refunds" not in world.snapshot().counts


def test_read_only_returns_its_constants(world: World, toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    observation = toolbox.execute("get_store_status", {}, make_ctx())
    assert observation.ok
    assert observation.data == {"open": True, "timezone": "UTC"}
    assert world.events() == []


def test_a_result_constant_cannot_overwrite_the_ledger_status(
    world: World, http: httpx.Client, make_ctx: MakeCtx, tmp_path: Path
) -> None:
    extra = tmp_path / "contracts"
    extra.mkdir()
    (extra / "ping.yaml").write_text(
        "name: ping\nidempotency: idempotent\n"
        "mock: {kind: read_only, result: {status: pong, ok: false, n: 1}}\n"
    )
    toolbox = MockToolbox(world, catalogue([extra]), http)
    result = toolbox.execute("ping", {}, make_ctx()).to_result(
        execution_id="exec_1", idempotency="idempotent"
    )
    assert (result["ok"], result["status"], result["n"]) == (True, "succeeded", 1)
