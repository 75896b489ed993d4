"""docs/five-minutes.md, walked as written: its commands run literally, from the checkout,
and what the page says they print is what they print. A newcomer's first five minutes must
not break without this test going red."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "five-minutes.md"


def _block(marker: str) -> str:
    """The fenced block right after ``<!-- five-minutes: MARKER -->``."""
    found = re.search(
        rf"<!-- five-minutes: {re.escape(marker)} -->\n```\w*\n(.*?)```", PAGE.read_text(), re.S
    )
    assert found, f"{PAGE} has no block marked {marker!r}"
    return found.group(1)


def test_the_walk_gives_the_verdict_the_page_shows(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        # crashmatrix on PATH, as after the README's quick start (its venv active).
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    walk = subprocess.run(
        ["bash", "-e", "-c", _block("the walk")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    printed = walk.stdout + walk.stderr
    lines = [line.rstrip() for line in printed.splitlines()]
    # eval's exit status is pytest's: 1, the agent has real failures. init's must have been 0.
    assert walk.returncode == 1, printed[-3000:]
    assert "TODO" not in printed, printed[:3000]
    for expected in [*_block("init prints").splitlines(), *_block("eval prints").splitlines()]:
        assert expected.rstrip() in lines, f"{expected!r} not printed:\n{printed[-4000:]}"
    # The failure's rerun line, run as printed from the agent's folder, keeps its one case.
    rerun = next(
        line.strip().removeprefix("rerun: ")
        for line in lines
        if line.strip().startswith("rerun: ")
        and "after_side_effect[call_mail]'" in line
        and "--second" not in line
    )
    again = subprocess.run(
        shlex.split(rerun), cwd=tmp_path / "shop", env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 1, again.stdout + again.stderr
    assert "0 passed, 1 failed; case directories under " in again.stdout
