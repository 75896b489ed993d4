"""read_file / list_files / write_file, and write_file's plan and precondition (seed 004)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from crashmatrix.harness.core.tools import ToolContext
from crashmatrix.mock_tools import MockToolbox, World
from crashmatrix.mock_tools.fileops import sha256_text

MakeCtx = Callable[..., ToolContext]  # the make_ctx fixture (conftest.py)


def test_read_file_returns_the_content_untruncated(toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    observation = toolbox.execute("read_file", {"path": "README.md"}, make_ctx())
    assert observation.ok
    assert observation.data == {"path": "README.md", "content": "hello\n", "truncated": False}


def test_read_file_of_a_missing_file_is_not_found(toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    observation = toolbox.execute("read_file", {"path": "nope.txt"}, make_ctx())
    assert (observation.ok, observation.code) == (False, "NOT_FOUND")


def test_list_files_is_sorted_and_hides_the_agent_state(toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    observation = toolbox.execute("list_files", {}, make_ctx())
    assert observation.data["names"] == ["README.md", "package.json", "src"]
    assert observation.data["directories"] == ["src"]
    assert toolbox.execute("list_files", {"path": "src"}, make_ctx()).data["names"] == ["app.js"]


def test_write_file_replaces_the_whole_file_and_records_both_hashes(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    observation = toolbox.execute("write_file", {"path": "README.md", "content": "new"}, make_ctx())
    assert observation.ok
    assert observation.data == {"path": "README.md", "bytes_written": 3}
    assert (world.workspace / "README.md").read_text() == "new"
    [event] = world.events()
    assert event.kind == "file_write"
    assert (event.tool_call_id, event.execution_id, event.idempotency_key) == ("call_1", "exec_1", "key_1")
    assert event.detail == {
        "path": "README.md",
        "base_sha256": sha256_text("hello\n"),
        "after_sha256": sha256_text("new"),
    }
    # No temp file is left next to the target.
    assert sorted(p.name for p in world.workspace.iterdir() if p.is_file()) == ["README.md", "package.json"]


def test_write_file_creates_missing_directories(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    assert toolbox.execute("write_file", {"path": "a/b/c.txt", "content": "x"}, make_ctx()).ok
    assert (world.workspace / "a/b/c.txt").read_text() == "x"


def test_writing_the_same_content_twice_leaves_the_same_file(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    args = {"path": "out.txt", "content": "hello ledger"}
    toolbox.execute("write_file", args, make_ctx(execution_id="exec_1"))
    once = world.snapshot().files
    toolbox.execute("write_file", args, make_ctx(execution_id="exec_2"))
    assert world.snapshot().files == once
    assert len(world.events("file_write")) == 2


def test_plan_records_base_and_after_before_the_write(world: World, toolbox: MockToolbox) -> None:
    plan = toolbox.plan("write_file", {"path": "README.md", "content": "new"})
    assert plan == {
        "path": "README.md",
        "base_sha256": sha256_text("hello\n"),
        "after_sha256": sha256_text("new"),
    }
    assert toolbox.plan("write_file", {"path": "fresh.txt", "content": "x"})["base_sha256"] is None
    assert toolbox.plan("read_file", {"path": "README.md"}) == {}


def test_plan_of_a_hostile_path_says_it_will_be_refused(toolbox: MockToolbox) -> None:
    assert "refused" in toolbox.plan("write_file", {"path": "../x", "content": "x"})


@pytest.mark.parametrize(
    ("before", "first_attempt_landed", "external", "expected"),
    [
        ("old", True, None, "already_applied"),
        ("old", False, None, "apply_again"),
        (None, False, None, "apply_again"),  # null base: the file must still be absent
        (None, True, None, "already_applied"),
        ("old", False, "someone else's", "conflict"),
        ("old", True, "someone else's", "conflict"),
        (None, False, "someone else's", "conflict"),
    ],
)
def test_precondition_compares_the_file_now_with_the_plan(
    world: World,
    toolbox: MockToolbox,
    make_ctx: MakeCtx,
    before: str | None,
    first_attempt_landed: bool,
    external: str | None,
    expected: str,
) -> None:
    args = {"path": "target.txt", "content": "new"}
    if before is not None:
        world.external_write("target.txt", before)
    plan = toolbox.plan("write_file", args)
    if first_attempt_landed:
        assert toolbox.execute("write_file", args, make_ctx()).ok
    if external is not None:
        world.external_write("target.txt", external)
    verdict = toolbox.check_precondition("write_file", args, plan)
    assert verdict.action == expected
    current = (
        (world.workspace / "target.txt").read_text() if (world.workspace / "target.txt").exists() else None
    )
    assert verdict.current_sha256 == (None if current is None else sha256_text(current))
    if expected == "conflict":
        assert "changed by the user or another tool" in verdict.reason


def test_precondition_of_a_file_deleted_after_the_plan_is_a_conflict(
    world: World, toolbox: MockToolbox
) -> None:
    args = {"path": "README.md", "content": "new"}
    plan = toolbox.plan("write_file", args)
    Path(world.workspace / "README.md").unlink()
    verdict = toolbox.check_precondition("write_file", args, plan)
    assert (verdict.action, verdict.current_sha256) == ("conflict", None)


def test_a_tool_without_a_precondition_check_is_never_declared_replayable(toolbox: MockToolbox) -> None:
    verdict = toolbox.check_precondition("send_email", {}, {})
    assert verdict.action == "conflict"
    assert "no precondition check" in verdict.reason


@pytest.mark.parametrize(("present", "expected"), [(None, "apply_again"), ("new", "already_applied")])
def test_without_a_recorded_plan_a_full_replace_falls_back_to_natural_idempotency(
    world: World, toolbox: MockToolbox, present: str | None, expected: str
) -> None:
    # Seed 000's ledger records no base/after hashes; its recovery retries the same write.
    if present is not None:
        world.external_write("target.txt", present)
    verdict = toolbox.check_precondition("write_file", {"path": "target.txt", "content": "new"}, {})
    assert verdict.action == expected


def test_a_partial_plan_is_a_conflict(toolbox: MockToolbox) -> None:
    args = {"path": "README.md", "content": "new"}
    verdict = toolbox.check_precondition("write_file", args, {"path": "README.md"})
    assert (verdict.action, verdict.current_sha256) == ("conflict", None)
    assert "incomplete" in verdict.reason
