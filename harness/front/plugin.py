"""pytest plugin (the ``pytest11`` entry point): every ``scenarios/**/*.yaml`` becomes a
crash matrix of test items (``harness.front.collection``).

Installing crashmatrix puts this module in EVERY pytest run of that environment, so it is
light: options, a file-name test and a reporter that stays idle until a crash case reports.
Nothing heavy is imported, no marker registered and no signal handler installed until the
first scenario file is collected.

After the run, the pass matrix is written to ``--report-dir`` (``reports/latest/``) and
printed at the end of the terminal summary: each case's record rides on its test report
(so xdist brings it to the controller) and only the controller writes; see
``reports.collector``.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["REPORT_ATTR"]

_ACTIVE = pytest.StashKey[bool]()
# The doctor's one-line summary in this process ("" while it has not run).
_DOCTOR = pytest.StashKey[str]()
# The attribute of a crash case's TestReport that carries its report record (a JSON string).
REPORT_ATTR = "crashmatrix_case"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("crashmatrix", "crash-matrix scenarios")
    group.addoption(
        "--agent", default="reference", help="agent under test: reference (default) or module:factory"
    )
    group.addoption(
        "--isolation",
        choices=("fork", "spawn"),
        default="fork",
        help="fork lives from a warm process (default) or spawn a fresh interpreter per life",
    )
    group.addoption(
        "--crash-boundary",
        action="append",
        default=[],
        metavar="NAME",
        help="run only these boundaries or point ids (repeatable); clean always runs",
    )
    group.addoption("--no-recovery-crashes", action="store_true", help="skip depth-2 crashes during recovery")
    group.addoption(
        "--case-deadline", type=float, default=30.0, help="seconds one life may take before it is hung"
    )
    group.addoption("--keep-cases", default=None, metavar="DIR", help="keep every case directory under DIR")
    group.addoption(
        "--report-dir",
        default=None,
        metavar="DIR",
        help="write matrix.json, matrix.md and matrix.html here (default: reports/latest under the rootdir)",
    )
    group.addoption("--no-report", action="store_true", help="write no pass-matrix report")
    group.addoption(
        "--no-doctor",
        action="store_true",
        help="skip the once-per-session self-check (crashmatrix doctor) that every check can see the agent",
    )
    parser.addini(
        "crashmatrix_doctor",
        type="bool",
        default=True,
        help="crashmatrix: run the cached self-check of the agent's checks once per session (default true)",
    )


def _terminate_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _activate(config: pytest.Config) -> None:
    """What a run with crash cases needs, done once, when the first scenario is collected."""
    if config.stash.get(_ACTIVE, False):
        return
    config.stash[_ACTIVE] = True
    # SIGTERM (a cancelled CI job) ends Python without any cleanup; as an interrupt it goes
    # through pytest's orderly stop: lives are reaped, and a partial report is written and
    # marked incomplete. Only if nobody else handles SIGTERM, and only in the main thread.
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    ):
        signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    from crashmatrix.harness.core.boundaries import BOUNDARIES, TORN_WRITE

    config.addinivalue_line("markers", "crashmatrix: a crash-matrix case from a scenario YAML")
    for name in ("idempotent", "conditional", "non_idempotent", "clean", "recovery", TORN_WRITE, *BOUNDARIES):
        config.addinivalue_line("markers", f"{name}: crashmatrix cases of this kind")


class _Reporter:
    """Registered on the controller only (a worker sees only its share of the cases; workers
    still attach each record to its report). Idle until a crash case reports: only then are
    the report modules imported and ``reports.collector.MatrixReporter`` built, so a run
    without crash cases (a team's own ``pytest tests``) never loads them."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.monotonic()
        self.real: Any = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.real is None and isinstance(getattr(report, REPORT_ATTR, None), str):
            from crashmatrix.reports.collector import MatrixReporter

            out = self.config.getoption("report_dir")
            summary = os.environ.get("GITHUB_STEP_SUMMARY")
            self.real = MatrixReporter(
                Path(out) if out else self.config.rootpath / "reports" / "latest",
                self.config.getoption("agent"),
                Path(summary) if summary else None,
                started=self.started,
            )
        raw = getattr(report, REPORT_ATTR, None)
        if self.real is not None and isinstance(raw, str):
            self.real.add(raw)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
        if self.real is not None:
            self.real.pytest_sessionfinish(session, exitstatus)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.real is not None:
            self.real.pytest_terminal_summary(terminalreporter)


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and not config.getoption("no_report"):
        config.pluginmanager.register(_Reporter(config), "crashmatrix-matrix")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    report = yield
    record = getattr(item, "report_record", None)
    if call.when == "call" and getattr(item, "is_crash_case", False) and record is not None:
        # A plain attribute of a TestReport travels with it from an xdist worker.
        setattr(report, REPORT_ATTR, record)
    return report


def _is_scenario(file_path: Path) -> bool:
    if file_path.suffix not in (".yaml", ".yml"):
        return False
    parts = file_path.parts
    return "scenarios" in parts and "contracts" not in parts[parts.index("scenarios") :]


def pytest_collection_finish(session: pytest.Session) -> None:
    # What exists after collection (pytest, openai, the items) lives until the session ends,
    # yet every full collection walked all of it again: ~12% of a worker's CPU in a matrix
    # run (perf). Frozen, it is left out of collections; cases still collect their garbage.
    if any(getattr(item, "is_crash_case", False) for item in session.items):
        gc.collect()
        gc.freeze()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    # Under xdist the controller collects nothing itself: it learns from a worker's node ids
    # that crash cases are coming, in time to turn SIGTERM into an orderly stop there too.
    if any(_is_scenario(Path(nodeid.partition("::")[0])) for nodeid in ids):
        _activate(node.config)


def _doctor_enabled(config: pytest.Config) -> bool:
    return not config.getoption("no_doctor") and bool(config.getini("crashmatrix_doctor"))


def _self_check(config: pytest.Config) -> None:
    """``crashmatrix doctor`` once per process, before the first scenario is collected (its
    clean case is judged then): cached across sessions and shared by xdist workers
    (``harness.front.doctor.cached_coverage``). The checks it finds blind on this agent are
    not applicable in every verdict of the run."""
    if _DOCTOR in config.stash or not _doctor_enabled(config):
        return
    config.stash[_DOCTOR] = ""
    from crashmatrix.harness.front.collection import launcher_for
    from crashmatrix.harness.front.doctor import self_check

    config.stash[_DOCTOR] = self_check(
        config.getoption("agent"),
        lambda: launcher_for(config),
        deadline=config.getoption("case_deadline"),
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """One line: how many of the checks the doctor proved can fire on this agent."""
    if hasattr(config, "workerinput") or not config.stash.get(_ACTIVE, False) or not _doctor_enabled(config):
        return
    line = config.stash.get(_DOCTOR, "")
    if not line:  # an xdist controller: its workers ran the doctor and cached what it found
        from crashmatrix.harness.front.doctor import cached_summary

        line = cached_summary(config.getoption("agent"))
    if line:
        terminalreporter.write_line(f"crashmatrix {line}")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if not _is_scenario(file_path):
        return None
    _activate(parent.config)
    _self_check(parent.config)
    from crashmatrix.harness.front.collection import ScenarioFile

    file: pytest.Collector = ScenarioFile.from_parent(parent, path=file_path)
    return file
