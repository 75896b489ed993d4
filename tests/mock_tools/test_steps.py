"""The step hook (``ToolContext.step``): tools whose effect has several steps call it between
them, and only there, so a crash harness can stop an effect half done. Each test records
the world as the step saw it: that is the state a SIGKILL at ``during_side_effect`` leaves."""

from __future__ import annotations

from pathlib import Path

from crashmatrix.harness.core.tools import ToolContext
from crashmatrix.mock_tools import MockToolbox, World
from crashmatrix.mock_tools.fileops import atomic_write


class Steps:
    """A step callable that records what the world looked like at each step."""

    def __init__(self, look: Path) -> None:
        self.look = look
        self.seen: list[dict[str, str | None]] = []

    def __call__(self) -> None:
        directory = self.look.parent
        self.seen.append(
            {
                "target": self.look.read_text() if self.look.exists() else None,
                "temp": next((p.read_text() for p in directory.iterdir() if p.name.endswith(".tmp")), None),
            }
        )


def ctx_with(steps: Steps) -> ToolContext:
    return ToolContext("call_1", "exec_1", "key_1", "0" * 64, step=steps)


def test_atomic_write_steps_once_with_the_temp_synced_and_the_target_still_old(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    target.write_text("old")
    steps = Steps(target)
    atomic_write(target, b"new content", step=steps)
    assert steps.seen == [{"target": "old", "temp": "new content"}]
    assert target.read_text() == "new content"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]  # the temp file was renamed


def test_write_file_steps_between_its_temp_file_and_its_rename(world: World, toolbox: MockToolbox) -> None:
    steps = Steps(world.workspace / "README.md")
    observation = toolbox.execute("write_file", {"path": "README.md", "content": "new"}, ctx_with(steps))
    assert observation.ok
    assert steps.seen == [{"target": "hello\n", "temp": "new"}]
    assert [e.kind for e in world.events()].count("file_write") == 1


def test_no_write_file_event_is_recorded_before_the_step(world: World, toolbox: MockToolbox) -> None:
    events_at_step: list[int] = []
    ctx = ToolContext(
        "call_1", "exec_1", "key_1", "0" * 64, step=lambda: events_at_step.append(len(world.events()))
    )
    toolbox.execute("write_file", {"path": "README.md", "content": "new"}, ctx)
    assert events_at_step == [0]


def test_two_appends_step_once_between_them(world: World, toolbox: MockToolbox) -> None:
    log = world.workspace / "audit.log"
    steps = Steps(log)
    observation = toolbox.execute(
        "run_command", {"command": "echo a >> audit.log && echo b >> audit.log"}, ctx_with(steps)
    )
    assert observation.ok
    assert [s["target"] for s in steps.seen] == ["a\n"]  # one of two appends
    assert log.read_text() == "a\nb\n"


def test_three_effects_step_twice_and_read_only_parts_never(world: World, toolbox: MockToolbox) -> None:
    counts: list[int] = []
    ctx = ToolContext(
        "call_1",
        "exec_1",
        "key_1",
        "0" * 64,
        step=lambda: counts.append(len([e for e in world.events() if e.kind == "command"])),
    )
    command = "ls; echo a >> audit.log; cat README.md; echo b >> audit.log; rm -rf src"
    assert toolbox.execute("run_command", {"command": command}, ctx).ok
    assert counts == [1, 2]  # after the first effect and after the second; never after the last


def test_rm_of_two_paths_steps_between_them(world: World, toolbox: MockToolbox) -> None:
    steps = Steps(world.workspace / "README.md")
    assert toolbox.execute("run_command", {"command": "rm -rf src README.md"}, ctx_with(steps)).ok
    assert steps.seen and steps.seen[0]["target"] == "hello\n"
    assert not (world.workspace / "src").exists()


def test_one_step_effects_and_reads_never_step(world: World, toolbox: MockToolbox) -> None:
    calls: list[str] = []
    ctx = ToolContext("call_1", "exec_1", "key_1", "0" * 64, step=lambda: calls.append("step"))
    one_step = ("echo a >> audit.log", "ls; cat README.md", "npm publish", "ls && npm publish", "rm -rf src")
    for command in one_step:
        assert toolbox.execute("run_command", {"command": command}, ctx).ok, command
    assert toolbox.execute("read_file", {"path": "README.md"}, ctx).ok
    assert calls == []


def test_the_default_step_does_nothing(world: World, toolbox: MockToolbox) -> None:
    ctx = ToolContext("call_1", "exec_1", "key_1", "0" * 64)
    assert toolbox.execute("write_file", {"path": "README.md", "content": "x"}, ctx).ok
    assert (world.workspace / "README.md").read_text() == "x"
    assert ctx == ToolContext("call_1", "exec_1", "key_1", "0" * 64, step=print)  # not part of identity


def test_the_later_effects_of_one_run_name_its_first(world: World, toolbox: MockToolbox) -> None:
    command = "echo a >> audit.log && echo b >> audit.log; rm -rf src"
    assert toolbox.execute("run_command", {"command": command}, ToolContext("c", "e", "k", "0" * 64)).ok
    assert toolbox.execute(
        "run_command", {"command": "echo c >> audit.log"}, ToolContext("c", "e2", "k", "0" * 64)
    ).ok
    events = [e for e in world.events() if e.kind == "command"]
    first = events[0].seq
    assert [e.detail.get("part_of") for e in events] == [None, first, first, None]
