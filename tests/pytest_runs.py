"""Running pytest on a scenario directory, as a user does, from a test.

``run_inprocess``: pytester runs pytest in this process (``pytester.runpytest``; pass
``--runpytest=subprocess`` to run the same tests in a subprocess instead). The inner run
still loads the crashmatrix plugin through its ``pytest11`` entry point, as an installed
crashmatrix is loaded, and its lives still fork from a fork server subprocess: in-process
only saves the interpreter start and the imports, 4-15 s a run. Use it unless the test
depends on a separate interpreter (an environment variable the lives must inherit, xdist
workers).

``run_subprocess``: a fresh interpreter, for a run several tests share (a module-scoped
fixture cannot use the function-scoped ``pytester``).
"""

from __future__ import annotations

import gc
import importlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

__all__ = ["OTHER_PLUGINS_OFF", "run_inprocess", "run_subprocess"]

# What an inner run imports, imported before pytester snapshots sys.modules: pytester drops
# every module first imported during an in-process run, so each run would import openai
# and hypothesis again (~2 s), and a re-imported fork server module would start a new fork
# server (and its warm-up life) for every run.
IMPORTED_FIRST = (
    "crashmatrix.harness.agents.foreign",
    "crashmatrix.harness.agents.reference",
    "crashmatrix.harness.front.collection",
    "crashmatrix.harness.observation.reading",
    "crashmatrix.harness.verdict.explain",
    "crashmatrix.reports.collector",
    "hypothesis",  # its pytest plugin imports it at the end of every run
)
for _name in IMPORTED_FIRST:
    importlib.import_module(_name)

# The dev venv's other pytest plugins (respx, anyio, hypothesis, langsmith), there for other
# tests, turned off for a pytest subprocess whose claim is about crashmatrix's and xdist's
# plugins: about 1.1 s of CPU in each interpreter of the run (its controller and each worker).
# A name not installed is ignored.
OTHER_PLUGINS = ("respx", "anyio", "hypothesispytest", "langsmith_plugin")
OTHER_PLUGINS_OFF = tuple(arg for name in OTHER_PLUGINS for arg in ("-p", f"no:{name}"))

# Longer than any healthy run on a loaded 2-core machine; a deadlocked run fails instead of
# holding the suite until the CI timeout.
SUBPROCESS_TIMEOUT = 300.0


def run_inprocess(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """``pytester.runpytest(*args)``, leaving this process as the run found it: once it
    collects a scenario the plugin turns SIGTERM into an interrupt and freezes the GC."""
    sigterm = signal.getsignal(signal.SIGTERM)
    frozen = gc.get_freeze_count()
    try:
        return pytester.runpytest(*args)
    finally:
        signal.signal(signal.SIGTERM, sigterm)
        if not frozen:
            gc.unfreeze()


# Per scenario (file stem), per case: (pytest's outcome, a skip's reason).
Cases = dict[str, dict[str, tuple[str, str]]]


def case_outcomes(pytester: pytest.Pytester, adapter: Path, scenarios: Sequence[Path], *args: str) -> Cases:
    """pytest in this process on copies of ``scenarios`` with ``--agent adapter`` (no report,
    no doctor): each case's outcome and, for a skip, its reason ("not applicable: ...")."""
    for path in scenarios:
        shutil.copy(path, pytester.path / path.name)
    result = run_inprocess(
        pytester,
        *(p.name for p in scenarios),
        f"--agent={adapter}",
        "-p",
        "no:cacheprovider",
        "--no-report",
        "--no-doctor",
        *args,
    )
    cases: Cases = {}
    for report in result.reprec.getreports("pytest_runtest_logreport"):  # type: ignore[attr-defined]
        if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
            continue
        stem, _, case = report.nodeid.partition(".yaml::")
        reason = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else ""
        cases.setdefault(stem, {})[case] = (report.outcome, str(reason).removeprefix("Skipped: "))
    return cases


def run_subprocess(directory: Path, *args: str, env: Mapping[str, str] | None = None) -> pytest.RunResult:
    """``python -m pytest ARGS`` in ``directory`` (basetemp under it), in the environment
    pytester gives a subprocess run (no outer PYTEST_ADDOPTS, HOME in the directory, no
    colours), plus ``env``."""
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "TOX_ENV_DIR")}
    environ.update(HOME=str(directory), PY_COLORS="0")
    environ.update(env or {})
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", f"--basetemp={directory / 'basetemp'}", *args],
        cwd=directory,
        env=environ,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT,
        check=False,
    )
    return pytest.RunResult(
        done.returncode, done.stdout.splitlines(), done.stderr.splitlines(), time.monotonic() - started
    )
