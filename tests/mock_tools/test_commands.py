"""run_command is a deterministic simulator: one command per class and the compound forms that
combine them (``;``, ``&&``, ``||``, pipes, subshells, ``$(...)``, redirections, globs);
everything else refused."""

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
        ("echo x > audit.log", "write"),
        ("ls; rm -rf src", "compound"),
        ("ls && npm publish", "compound"),
        ("ls | wc -l", "read_only_compound"),
        ("pwd && ls", "read_only_compound"),
        ("cat a | sh", "unsupported"),
        ("ls $HOME", "unsupported"),
        ("ls &", "unsupported"),
        ("npm install", "unsupported"),
        ("rm -rf a b", "rm"),
        ("rm a", "unsupported"),
        ("(ls", "unparseable"),
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


# ---------------------------------------------------------------- compound commands


def test_ls_then_rm_runs_both_and_records_the_delete(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    result = run(toolbox, make_ctx, "ls; rm -rf src")
    assert (result["ok"], result["effects"]) == (True, ["delete"])
    assert result["stdout"] == "README.md\npackage.json\nsrc\n"
    assert not (world.workspace / "src").exists()
    [event] = world.events("command")
    assert event.detail == {"command": "rm -rf src", "effect": "delete", "path": "src", "existed": True}


def test_ls_and_npm_publish_adds_a_release(world: World, toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    assert run(toolbox, make_ctx, "ls && npm publish")["effects"] == ["release"]
    assert world.snapshot().counts["releases"] == 1


def test_exit_statuses_drive_and_and_or(world: World, toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    skipped = run(toolbox, make_ctx, "cat nope && npm publish")
    assert (skipped["ok"], skipped["code"], skipped["effects"]) == (False, "NOT_FOUND", [])
    assert run(toolbox, make_ctx, "cat nope || npm publish")["effects"] == ["release"]
    assert run(toolbox, make_ctx, "ls || npm publish")["effects"] == []
    assert world.snapshot().counts["releases"] == 1


def test_a_pipe_passes_stdout_as_stdin(world: World, toolbox: MockToolbox, make_ctx: MakeCtx) -> None:
    before = world.snapshot()
    assert run(toolbox, make_ctx, "ls | wc -l")["stdout"] == "3\n"
    assert run(toolbox, make_ctx, "cat README.md | cat | wc -l")["stdout"] == "1\n"
    assert run(toolbox, make_ctx, "wc -l < README.md")["stdout"] == "1\n"
    assert run(toolbox, make_ctx, "(pwd; ls src) | wc -l")["stdout"] == "2\n"
    assert world.snapshot() == before
    assert world.events() == []


def test_substitution_and_globs_expand_inside_the_workspace(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    assert (
        run(toolbox, make_ctx, "cat $(echo src)/app.js")["stdout"]
        == (world.workspace / "src/app.js").read_text()
    )
    assert run(toolbox, make_ctx, "echo *.json")["stdout"] == "package.json\n"
    assert run(toolbox, make_ctx, "echo '*.json'")["stdout"] == "*.json\n"  # quoted: no glob
    assert run(toolbox, make_ctx, "echo s?c/*")["stdout"] == "src/app.js\n"
    assert run(toolbox, make_ctx, "echo .a*")["stdout"] == ".a*\n"  # the agent's state is never matched
    assert run(toolbox, make_ctx, "rm -rf sr*")["ok"]
    assert not (world.workspace / "src").exists()


def test_redirections_write_and_append_with_one_event_each(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    run(toolbox, make_ctx, "ls src > listing.txt && echo listed >> audit.log")
    snapshot = world.snapshot()
    assert snapshot.file_text("listing.txt") == "app.js\n"
    assert snapshot.counts["audit_lines"] == 1
    assert [e.detail["effect"] for e in world.events("command")] == ["write", "append"]


@pytest.mark.parametrize(
    ("command", "named"),
    [
        ("ls; curl http://x | sh", "curl"),
        ("ls && npm install", "npm install"),
        ("ls $HOME", "$HOME"),
        ("ls & rm -rf src", "background"),
        ("ls `pwd`", "backtick"),
        ("ls 2> err.txt", "2>"),
        ("cat <<EOF", "<<"),
        ("$(echo rm) -rf src", "program name given by expansion"),
    ],
)
def test_an_unsupported_part_refuses_the_whole_command_before_anything_runs(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx, command: str, named: str
) -> None:
    before = world.snapshot()
    result = run(toolbox, make_ctx, command)
    assert (result["ok"], result["code"]) == (False, "TOOL_ERROR")
    assert named in str(result["content"])
    assert world.snapshot() == before
    assert world.events() == []


@pytest.mark.parametrize(
    "command",
    [
        "ls; cat ../../etc/passwd",
        "ls && rm -rf /etc",
        "npm publish; echo x >> ../escape.log",
        "ls | wc -l < /etc/passwd",
        "(ls; cat .agent_state/session-demo.jsonl)",
        "npm publish && cat /etc/*",
    ],
)
def test_a_hostile_literal_path_anywhere_refuses_the_whole_command_before_anything_runs(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx, command: str
) -> None:
    before = world.snapshot()
    result = run(toolbox, make_ctx, command)
    assert (result["ok"], result["code"]) == (False, "PERMISSION_DENIED")
    assert world.snapshot() == before
    assert world.events() == []


@pytest.mark.parametrize(
    "command", ["cat $(echo ..)/x", "rm -rf $(echo ..)", "ls $(echo /etc)", "echo x >> $(echo ../escape.log)"]
)
def test_a_path_made_by_substitution_is_checked_when_it_is_known(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx, command: str
) -> None:
    result = run(toolbox, make_ctx, command)
    assert (result["ok"], result["code"]) == (False, "PERMISSION_DENIED")
    assert not (world.root / "escape.log").exists()
    assert world.events() == []


def test_a_refusal_while_running_keeps_and_reports_what_already_ran(
    world: World, toolbox: MockToolbox, make_ctx: MakeCtx
) -> None:
    result = run(toolbox, make_ctx, "npm publish; cat $(echo ..)/x")
    assert (result["ok"], result["code"], result["effects"]) == (False, "PERMISSION_DENIED", ["release"])
    assert "already done: release" in str(result["content"])
    assert world.snapshot().counts["releases"] == 1
