"""Hostile paths are refused with a one-line reason, and nothing escapes the workspace."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crashmatrix.harness.core.tools import ToolContext
from crashmatrix.harness.errors import SandboxViolation
from crashmatrix.mock_tools import MockToolbox, World, resolve_in_workspace


@pytest.fixture
def hostile(world: World, tmp_path: Path) -> World:
    """A workspace with a way out (symlinks), a FIFO and a hard link to the session file."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    ws = world.workspace
    (ws / "link_out").symlink_to(outside)
    (ws / "file_out").symlink_to(outside / "secret.txt")
    (ws / "src" / "link_in").symlink_to(ws / "src")
    (ws / "loop").symlink_to(ws / "loop")
    (ws / "state_link").symlink_to(ws / ".agent_state")
    os.mkfifo(ws / "pipe")
    assert world.session_path is not None
    os.link(world.session_path, ws / "session_hardlink")
    return world


# The reason each rule gives, as much of it as tells the rules apart: the session file itself
# is also its own hard link, so "session" alone would pass with the forbidden-path rule off.
FORBIDDEN = "the agent's own session/ledger state"
HARD_LINK = "hard link to the agent's session file"

HOSTILE_PATHS = [
    ("", "empty"),
    ("/etc/passwd", "absolute"),
    ("../outside/secret.txt", "'..'"),
    ("src/../../x", "'..'"),
    ("a\x00b", "NUL"),
    ("link_out/secret.txt", "symlink pointing outside"),
    ("file_out", "symlink pointing outside"),
    ("loop/x", "resolve"),
    (".agent_state/session-demo.jsonl", FORBIDDEN),
    (".agent_state", FORBIDDEN),
    (".agent_state/new.jsonl", FORBIDDEN),
    ("state_link/session-demo.jsonl", FORBIDDEN),
    ("session_hardlink", HARD_LINK),
    ("pipe", "FIFO"),
    ("x" * 256, "longer than 255"),
    ("/".join(["d" * 200] * 21), "bytes long"),
]


LABELS = {FORBIDDEN: "session", HARD_LINK: "hard link"}


@pytest.mark.parametrize(
    ("path", "why"), HOSTILE_PATHS, ids=[LABELS.get(why, why) + ":" + p[:20] for p, why in HOSTILE_PATHS]
)
def test_hostile_path_is_refused_with_a_one_line_reason(hostile: World, path: str, why: str) -> None:
    with pytest.raises(SandboxViolation) as info:
        hostile.resolve(path)
    message = str(info.value)
    assert why in message
    assert "\n" not in message


def test_a_socket_is_refused(world: World) -> None:
    # AF_UNIX paths are limited to ~108 bytes; bind relative to the workspace to stay short.
    cwd = os.getcwd()
    os.chdir(world.workspace)
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind("sock")
            with pytest.raises(SandboxViolation, match="socket"):
                world.resolve("sock")
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize(
    "path", ["README.md", "./README.md", "src/app.js", "src/link_in/app.js", "new/dir/f.txt"]
)
def test_ordinary_paths_resolve_inside_the_workspace(hostile: World, path: str) -> None:
    resolved = resolve_in_workspace(hostile.workspace, path)
    root = hostile.workspace.resolve()
    assert resolved == root or root in resolved.parents


def test_a_non_string_path_is_refused(world: World) -> None:
    with pytest.raises(SandboxViolation, match="string"):
        resolve_in_workspace(world.workspace, 42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/etc/passwd", "absolute"),
        ("link_out/secret.txt", "symlink pointing outside"),
        (".agent_state/session-demo.jsonl", FORBIDDEN),
    ],
)
def test_tools_turn_a_violation_into_permission_denied_with_no_effect(
    hostile: World, toolbox: MockToolbox, path: str, why: str
) -> None:
    ctx = ToolContext("call_1", "exec_1", "key_1", "0" * 64)
    before = hostile.snapshot()
    for name, args in [("write_file", {"path": path, "content": "pwned"}), ("read_file", {"path": path})]:
        observation = toolbox.execute(name, args, ctx)
        assert (observation.ok, observation.code) == (False, "PERMISSION_DENIED")
        assert why in str(observation.content)  # refused by the rule it names, not by another
    assert hostile.snapshot() == before
    assert hostile.events() == []
    assert (hostile.workspace.parent.parent / "outside" / "secret.txt").read_text() == "secret\n"


COMPONENTS = st.sampled_from(
    [
        "..",
        ".",
        "",
        "link_out",
        "file_out",
        "state_link",
        ".agent_state",
        "session-demo.jsonl",
        "session_hardlink",
        "src",
        "link_in",
        "pipe",
        "loop",
        "a",
        "/",
        "\x00",
        "x" * 256,
        "~",
        "secret.txt",
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(COMPONENTS, min_size=1, max_size=6), absolute=st.booleans())
def test_no_generated_path_escapes_the_workspace_or_touches_the_session(
    hostile: World, toolbox: MockToolbox, tmp_path: Path, parts: list[str], absolute: bool
) -> None:
    path = ("/" if absolute else "") + "/".join(parts)
    outside = tmp_path / "outside"
    assert hostile.session_path is not None
    ctx = ToolContext("call_f", "exec_f", "key_f", "0" * 64)
    toolbox.execute("write_file", {"path": path, "content": "FUZZ"}, ctx)
    toolbox.execute("run_command", {"command": f"echo FUZZ >> '{path}'"}, ctx)
    toolbox.execute("run_command", {"command": f"rm -rf '{path}'"}, ctx)
    # The filesystem afterwards, not the return values, is the proof.
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "secret\n"
    assert hostile.session_path.read_bytes() == b'{"type":"message"}\n'
    assert sorted(p.name for p in hostile.session_path.parent.iterdir()) == ["session-demo.jsonl"]
    assert hostile.workspace.is_dir()
    for entry in tmp_path.iterdir():
        assert entry.name in ("world", "outside")
    for entry in hostile.root.iterdir():
        assert entry.name in (
            "world.json",
            "world.sqlite",
            "world.sqlite-wal",
            "world.sqlite-shm",
            "workspace",
        )
