"""One ``pytest scenarios -n 2`` in a fresh interpreter, shared by the tests whose claims are
about a parallel run: the report its controller writes once and prints
(``tests/reports/test_plugin_report.py``) and what its workers, fork servers and lives leave
in its own ``$TMPDIR`` (``tests/harness/lives/test_casedir.py``). Each such run starts three
interpreters importing crashmatrix and openai (6-8 s on 2 cores); the claims read different
outputs of the same run (the report and the terminal; the private ``$TMPDIR``), and neither
set of expected lines depends on the other's inputs.

Shared across the outer session's xdist workers too: a module- or session-scoped fixture runs
once per worker, and ``--dist load`` hands the two modules' tests to either worker. The first
caller runs it under a lock in the session's base directory (the workers' common parent) and
records the result there; later callers, in any worker, read it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from .pytest_runs import OTHER_PLUGINS_OFF, run_subprocess
from .scenario_data import email_once

__all__ = ["ARGS", "SCENARIO", "ParallelRun", "parallel_run"]

# email_once crashed after running and after its side effect, passing: clean, two crash
# points, each one's power loss, and two lives resuming after_running at once (6 cases).
SCENARIO = email_once(
    recovery_crashes=False,
    cover=["after_running", "after_side_effect"],
    expect={"after_running": {"outcome": {"call_1": "side_effect_uncertain"}}},
)
# The tool-side columns left out for time (tests/reference_agent/test_tool_side_columns.py
# has them): the report says so, as it says what the scenario's cover leaves out.
ARGS = ("scenarios", "-n", "2", "-p", "no:cacheprovider", "--no-tool-side-faults", *OTHER_PLUGINS_OFF)


@dataclass(frozen=True)
class ParallelRun:
    path: Path  # the run's directory: scenarios/email.yaml, reports/latest/
    tmpdir: Path  # its $TMPDIR, empty when it started
    result: pytest.RunResult


def parallel_run(factory: pytest.TempPathFactory) -> ParallelRun:
    """``pytest scenarios -n 2`` on SCENARIO (``ARGS``) with a private ``$TMPDIR``, run once
    per test session."""
    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the session's, shared by its workers
    path = base / "parallel-run"
    record = base / "parallel-run.json"
    with open(base / "parallel-run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not record.exists():
            shutil.rmtree(path, ignore_errors=True)  # a caller that died half-way
            (path / "scenarios").mkdir(parents=True)
            (path / "tmp").mkdir()
            (path / "scenarios" / "email.yaml").write_text(SCENARIO, encoding="utf-8")
            done = run_subprocess(path, *ARGS, env={"TMPDIR": str(path / "tmp")})
            said = {"ret": int(done.ret), "out": done.outlines, "err": done.errlines, "s": done.duration}
            record.write_text(json.dumps(said), encoding="utf-8")
        said = json.loads(record.read_text(encoding="utf-8"))
    result = pytest.RunResult(said["ret"], said["out"], said["err"], said["s"])
    return ParallelRun(path, path / "tmp", result)
