"""A kind-2 agent's ``main()`` return value is its exit status, as under ``sys.exit(main())``:
an agent that returns 2 failed, and says so, never taken as a life that ended well."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCENARIO = Path(__file__).resolve().parents[3] / "scenarios" / "send_email" / "send_once.yaml"
AGENT = """import sys


def main():
    sys.stdout.write("> ")
    sys.stdin.readline()
    return {returned}
"""


@pytest.mark.parametrize(("returned", "fails"), [("2", True), ("None", False), ("0", False)])
def test_what_main_returns_is_the_agents_exit_status(tmp_path: Path, returned: str, fails: bool) -> None:
    (tmp_path / "agent.py").write_text(AGENT.format(returned=returned), encoding="utf-8")
    (tmp_path / "adapter.yaml").write_text("name: returns\npython: {script: agent.py}\n", encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "crashmatrix.harness.front.cli",
            "points",
            str(SCENARIO),
            "--agent",
            "adapter.yaml",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = done.stdout + done.stderr
    # Either way the agent passes no boundary (it calls no tool): only the life's end differs.
    assert "the clean run passed no boundary" in said, said
    assert ("life 1 error" in said and "agent returns exited with 2" in said) is fails, said
