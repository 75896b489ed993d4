"""``python -m crashmatrix.reference_agent``, run as a user would: in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each test starts the agent's interpreter

# Nothing here may reach a real model: an address where nothing listens.
OFFLINE = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "none", "CRASHMATRIX_MODEL": "none"}


def run(*args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AGENT_SESSION_ID"} | OFFLINE
    return subprocess.run(
        [sys.executable, "-m", "crashmatrix.reference_agent", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_self_check_passes_and_says_so(tmp_path: Path) -> None:
    result = run("--self-check", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == "self-check passed"
    assert list(tmp_path.iterdir()) == [], "the self-check works in its own temporary directory"


def test_interactive_start_creates_the_seed_000_session_layout_and_exits_on_eof(tmp_path: Path) -> None:
    result = run("--session-id", "lesson", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert f"[session] {tmp_path / 'workspace' / '.agent_state' / 'session-lesson.jsonl'}" in result.stdout
    assert "You> " in result.stdout
    assert (tmp_path / "workspace" / ".agent_state" / "session-lesson.jsonl").exists()
    assert (tmp_path / "world.json").exists(), "the world is rooted at the workspace's parent"


def test_a_workspace_not_named_workspace_is_refused_with_the_fix(tmp_path: Path) -> None:
    result = run("--workspace", str(tmp_path / "elsewhere"), cwd=tmp_path)

    assert result.returncode == 2
    assert "--workspace" in result.stderr and "elsewhere/workspace" in result.stderr
    assert "Traceback" not in result.stderr
