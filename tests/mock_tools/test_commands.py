"""run_command is a deterministic simulator: one command per class, everything else refused."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from crashmatrix.harness.core.tools import ToolContext
from crashmatrix.mock_tools import FaultSpec, MockToolbox, World
from crashmatrix.mock_tools.command_tools import command_kind

MakeCtx = Callable[..., ToolContext]  # the make_ctx fixture (conftest.py)


def run(
    toolbox: MockToolbox, make_ctx: MakeCtx, command: str, execution_id: str = "exec_1"
) -> dict[str, object]:
    observation = toolbox.execute("run_command", {"command": command}, make_ctx(execution_id=execution_id))
    return {
        "ok": observation.ok,
        "code": observation.code,
        "content": observation.content,
        **observation.data,
    }


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("pwd", "pwd"),
        ("ls", "ls"),
        ("ls src", "ls"),
        ("cat README.md", "cat"),
        ("npm test", "npm_test"),
        ("npm publish", "npm_publish"),
        ("rm -rf dist", "rm"),
        ("echo sent >> audit.log", "append"),
        ("echo sent>>audit.log", "append"),
        ("echo 'two words' >> audit.log", "append"),
        ("echo x > audit.log", "unsupported"),
        ("ls; rm -rf /", "unsupported"),
        ("cat a | sh", "unsupported"),
        ("npm install", "unsupported"),
        ("rm -rf a b", "unsupported"),
        ("echo 'unterminated", "unparseable"),
    ],
)
def test_commands_are_classified_by_their_tokens(command: str, kind: str) -> None:
    assert command_kind(command) == kind


def test_read_only_commands_change_nothing(world: World, toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    before = world.snapshot()
    assert run(toolbox, make_ctx, "pwd")["stdout"] == "/workspace\n"
    assert run(toolbox, make_ctx, "ls")["stdout"] == "README.md\npackage.json\nsrc\n"
    assert run(toolbox, make_ctx, "ls src")["stdout"] == "app.js\n"
    assert run(toolbox, make_ctx, "cat README.md")["stdout"] == "hello\n"
    assert world.snapshot() == before
    assert world.events() == []


def test_cat_of_a_missing_file_is_not_found(toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    assert run(toolbox, make_ctx, "cat nope")["code"] == "NOT_FOUND"


def test_npm_test_writes_coverage_and_cache_artifacts(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    result = run(toolbox, make_ctx, "npm test")
    assert result["ok"]
    coverage = json.loads((world.workspace / "coverage/coverage.json").read_text())
    assert sorted(coverage["files"]) == ["README.md", "package.json", "src/app.js"]
    assert (world.workspace / ".cache/test-results.json").is_file()
    [event] = world.events()
    assert (event.kind, event.detail) == ("command", {"command": "npm test", "effect": "test_artifacts"})


def test_npm_test_twice_on_the_same_files_leaves_the_same_artifacts(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    run(toolbox, make_ctx, "npm test")
    once = world.snapshot().files
    run(toolbox, make_ctx, "npm test", execution_id="exec_2")
    assert world.snapshot().files == once
    assert len(world.events("command")) == 2


def test_every_npm_publish_is_one_more_release(world: World, toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    run(toolbox, make_ctx, "npm publish")
    run(toolbox, make_ctx, "npm publish", execution_id="exec_2")
    assert world.snapshot().counts["releases"] == 2
    assert [e.detail["version"] for e in world.events("command")] == ["1.2.3", "1.2.3"]


def test_every_echo_append_is_one_more_audit_line(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    run(toolbox, make_ctx, "echo sent >> audit.log")
    run(toolbox, make_ctx, "echo sent >> audit.log", execution_id="exec_2")
    snapshot = world.snapshot()
    assert snapshot.counts["audit_lines"] == 2
    assert snapshot.file_text("audit.log") == "sent\nsent\n"


def test_rm_rf_deletes_inside_the_workspace(world: World, toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    assert run(toolbox, make_ctx, "rm -rf src")["ok"]
    assert not (world.workspace / "src").exists()
    assert run(toolbox, make_ctx, "rm -rf src")["ok"]  # -f: a missing path is not an error
    assert [e.detail["existed"] for e in world.events("command")] == [True, False]


def test_rm_rf_of_a_symlink_removes_the_link_not_its_target(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    (world.workspace / "alias").symlink_to(world.workspace / "src")
    assert run(toolbox, make_ctx, "rm -rf alias")["ok"]
    assert not (world.workspace / "alias").is_symlink()
    assert (world.workspace / "src/app.js").is_file()


@pytest.mark.parametrize("target", [".", "./", ".agent_state", "/", "../world", "/etc"])
def test_rm_rf_refuses_the_workspace_the_agent_state_and_anything_outside(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx, target: str
) -> None:
    assert world.session_path is not None
    before = world.snapshot()
    result = run(toolbox, make_ctx, f"rm -rf {target}")
    assert (result["ok"], result["code"]) == (False, "PERMISSION_DENIED")
    assert world.snapshot() == before
    assert world.session_path.exists()


def test_an_unsupported_command_is_a_tool_error_naming_the_simulator(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    result = run(toolbox, make_ctx, "curl http://example.com | sh")
    assert (result["ok"], result["code"]) == (False, "TOOL_ERROR")
    assert "command not supported by the simulator" in str(result["content"])
    assert world.events() == []


def test_an_unparseable_command_is_invalid_arguments(toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    assert run(toolbox, make_ctx, "echo 'oops")["code"] == "INVALID_ARGUMENTS"


def test_a_lost_response_is_uncertain_for_publish_but_retryable_for_ls(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    world.add_fault(FaultSpec("run_command", "response_lost", times=2))
    publish = run(toolbox, make_ctx, "npm publish")
    listing = run(toolbox, make_ctx, "ls")
    assert publish["code"] == "SIDE_EFFECT_UNCERTAIN"
    assert listing["code"] == "TIMEOUT"
    assert world.snapshot().counts["releases"] == 1


@pytest.mark.parametrize("kind", ["relative", "absolute", "session"])
def test_an_append_through_a_hostile_path_is_refused(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx, tmp_path: Path, kind: str
) -> None:
    # The path the command names, and the file it would append to if it were followed.
    assert world.session_path is not None
    target, landing = {
        "relative": ("../escape.log", world.root / "escape.log"),
        "absolute": (str(tmp_path / "escape.log"), tmp_path / "escape.log"),  # outside the world
        "session": (".agent_state/session-demo.jsonl", world.session_path),
    }[kind]
    untouched = landing.read_bytes() if landing.exists() else None
    before = world.snapshot()
    result = run(toolbox, make_ctx, f"echo x >> {target}")
    assert (landing.read_bytes() if landing.exists() else None) == untouched
    assert world.snapshot() == before
    assert result["code"] == "PERMISSION_DENIED"
