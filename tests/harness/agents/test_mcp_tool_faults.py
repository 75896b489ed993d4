"""harness.agents.tool_faults: a tool-side fault is armed for one call and taken once, across
every life of the case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from crashmatrix.harness.agents.protocol import MODEL_BASE_URL, LifeContext
from crashmatrix.harness.agents.tool_faults import FAULT_FILE, ToolSideFault, arm, armed, mock_toolbox, take
from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS
from crashmatrix.harness.core.tools import ToolContext
from crashmatrix.harness.errors import InputError
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.input.suite import BUILTIN_SUITE
from crashmatrix.mock_tools.world import World
from tests.tls import CONTEXT


def test_a_fault_is_taken_once_for_its_call_and_never_for_another(tmp_path: Path) -> None:
    arm(tmp_path, ToolSideFault("tool_server_died", "call_2"))
    assert take(tmp_path, "call_1") is None
    assert take(tmp_path, "call_2") == "tool_server_died"
    assert take(tmp_path, "call_2") is None  # a retry (the next life's too) meets a healthy server
    assert armed(tmp_path) == ToolSideFault("tool_server_died", "call_2")
    assert json.loads((tmp_path / FAULT_FILE).read_text())["fired"] is True


def test_no_fault_armed_is_none(tmp_path: Path) -> None:
    assert take(tmp_path, "call_1") is None
    assert armed(tmp_path) is None


def test_the_mark_is_durable_before_the_kind_is_given(tmp_path: Path) -> None:
    """A life killed right after taking it must not leave it to the next life: the file says
    fired before ``take`` returns (no temporary file is left either)."""
    arm(tmp_path, ToolSideFault("tool_result_error", "call_1"))
    assert take(tmp_path, "call_1") == "tool_result_error"
    assert sorted(p.name for p in tmp_path.iterdir()) == [FAULT_FILE]
    assert take(tmp_path, "call_1") is None


@pytest.mark.parametrize("kind", TOOL_SIDE_KINDS)
def test_every_kind_can_be_armed(tmp_path: Path, kind: str) -> None:
    arm(tmp_path, ToolSideFault(kind, "c"))
    assert take(tmp_path, "c") == kind


def test_an_unknown_kind_is_refused_in_one_line() -> None:
    with pytest.raises(InputError, match="tool-side fault 'tool_exploded': write one of tool_server_died"):
        ToolSideFault("tool_exploded", "call_1")


@pytest.mark.parametrize("via", ["mock tools", "in process"])
def test_the_shared_toolbox_builder_puts_the_case_s_tool_side_on_every_call(tmp_path: Path, via: str) -> None:
    """``mock_toolbox`` is how every adapter running the mock tools in its process builds them
    (the reference agent, a kind-1 framework adapter's wrappers, an ``intercept:``ed
    function, a team's in-process tools): the fault armed for a call acts there, once, and
    the trace says where the call reached the tool side and that the fault acted."""
    world = World.create(tmp_path / "world")
    trace: list[dict[str, Any]] = []
    arm(tmp_path, ToolSideFault("tool_server_died", "call_mail"))
    ctx = LifeContext(
        case_dir=tmp_path,
        session_path=tmp_path / "session.jsonl",
        session_id="s",
        world_dir=world.root,
        scenario=load_scenario(BUILTIN_SUITE / "send_email" / "send_once.yaml"),
        http=httpx.Client(verify=CONTEXT),  # send_email's backend is in process: no request leaves
        model_base_url=MODEL_BASE_URL,
        hook=lambda boundary, call_id: None,
        before_append=lambda *args: None,
        approvals={},
        approvals_again={},
        life=1,
        trace=lambda event: trace.append(dict(event)),
    )
    toolbox = mock_toolbox(ctx, via)
    email = {"to": "a@b.test", "subject": "hi", "body": "hello"}
    lost = toolbox.execute("send_email", email, ToolContext("call_mail", "e1", "k1", "sha"))
    assert (lost.code, lost.uncertain) == ("SIDE_EFFECT_UNCERTAIN", True)
    again = toolbox.execute("send_email", email, ToolContext("call_mail", "e2", "k1", "sha"))
    assert again.ok  # the retry meets a healthy backend: the fault fired once
    assert World(world.root).snapshot().counts["emails"] == 2  # both sends landed in the world
    assert [(e["event"], e.get("via"), e.get("fault")) for e in trace] == [
        ("mcp_call", via, None),
        ("fault", None, "tool_server_died"),
        ("mcp_call", via, None),
    ]
