"""harness.agents.tool_faults: a tool-side fault is armed for one call and taken once, across
every life of the case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crashmatrix.harness.agents.tool_faults import FAULT_FILE, ToolSideFault, arm, armed, take
from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS
from crashmatrix.harness.errors import InputError


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
