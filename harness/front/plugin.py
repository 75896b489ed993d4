"""pytest plugin (the ``pytest11`` entry point): every scenario file becomes a crash matrix of
test items (``harness.front.collection``).

Installing crashmatrix puts this module in EVERY pytest run of that environment, so it is
light: options, a file test and a reporter that stays idle until a crash case reports.
Nothing heavy is imported, no marker registered and no signal handler installed until the
first scenario file is collected.

Which YAML files are scenarios (``is_scenario_text``, ``RULE``): a file that declares it
(``# yaml-language-server: $schema=.../scenario.schema.json`` at its top: every built-in
scenario, example and ``crashmatrix explore`` finding carries it) wherever pytest finds it;
or a file with a top-level ``turns:`` or ``model:`` key that is named on the command line
or lies under ``crashmatrix_paths`` (ini; default ``scenarios`` beside the ini file). Any
other YAML is left alone -- not collected, not an error -- so a Kubernetes manifest in a
folder named ``scenarios/`` no longer breaks a team's ``pytest``. When a path named on the
command line gives nothing, one line says why.

``--shard=I/N`` keeps the files of shard I of N (``harness.plan.shards``) and deselects the
rest, so a CI job matrix runs one suite on N machines; ``crashmatrix report --merge`` puts
their results files back together (``reports.merge``).

After the run, the pass matrix is written to ``--report-dir`` (``reports/latest/``) and
printed at the end of the terminal summary: each case's record rides on its test report
(so xdist brings it to the controller) and only the controller writes; see
``reports.collector``.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

__all__ = ["REPORT_ATTR", "RULE", "is_scenario_text"]

_ACTIVE = pytest.StashKey[bool]()
# The doctor's one-line summary in this process ("" while it has not run).
_DOCTOR = pytest.StashKey[str]()
# The attribute of a crash case's TestReport that carries its report record (a JSON string).
REPORT_ATTR = "crashmatrix_case"
# Collection: where undeclared scenarios may live, the command line's files, what was
# collected or failed to collect (for the "nothing collected from PATH" line).
_PATHS = pytest.StashKey[tuple[Path, ...]]()
_NAMED = pytest.StashKey[frozenset[Path]]()
_SEEN = pytest.StashKey[set[Path]]()
_SAID_WHY = pytest.StashKey[bool]()
# The node ids pytest kept after its own selection (-k, -m, --deselect, --shard): the report
# names the scenario's other items deselected, not "not reached".
_SELECTED = pytest.StashKey[set[str]]()
# --shard=I/N, parsed, and --shard-durations read into seconds per file.
_SHARD = pytest.StashKey[Any]()
_RECORDED = pytest.StashKey[dict[str, float]]()

RULE = (
    "a scenario declares '# yaml-language-server: $schema=.../scenario.schema.json' at its top, "
    "or has a top-level turns: or model: key and is named on the command line or lies under "
    "crashmatrix_paths"
)
# A top-level key only a scenario has (``crashmatrix validate`` reads files by the same keys).
_SCENARIO_KEYS = re.compile(r"^(?:turns|model)\s*:", re.MULTILINE)
_SCHEMA = re.compile(r"\$schema=(\S+)")
# A declaration is in the leading comments: enough of the file to find it.
_HEAD = 4096


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
        "--recovery-torn-writes",
        action="store_true",
        help="in every scenario, also tear each session line the recovering agent appends "
        "(as the scenario key recovery_torn_writes: true; more lives per recovery@ item)",
    )
    group.addoption(
        "--no-power-loss",
        action="store_true",
        help="no power@P column (a power loss at each boundary: unsynced bytes and directory entries lost)",
    )
    group.addoption(
        "--no-double-resume",
        action="store_true",
        help="no double@P column (two lives resuming one crashed session at once)",
    )
    group.addoption(
        "--no-tool-side-faults",
        action="store_true",
        help="no tool-side columns (over MCP: the tool server dies, loses or garbles a response, or errs)",
    )
    group.addoption(
        "--no-snapshots",
        action="store_true",
        help="run each point's first crash as a life killed there, not from the clean life's "
        "snapshot at the point (for diagnosis; the verdicts are the same)",
    )
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
    group.addoption(
        "--shard",
        default=None,
        metavar="I/N",
        help="run shard I of N (1-based): whole files, balanced; merge with crashmatrix report --merge",
    )
    group.addoption(
        "--shard-durations",
        default=None,
        metavar="MATRIX_JSON",
        help="balance --shard by the seconds a previous run's results file (matrix.json) recorded",
    )
    parser.addini(
        "crashmatrix_paths",
        type="paths",
        default=None,
        help="crashmatrix: folders whose YAML files with a top-level turns: or model: key are scenarios "
        "even without the schema line (default: scenarios)",
    )
    parser.addini(
        "crashmatrix_tool_side_faults",
        type="bool",
        default=True,
        help="crashmatrix: the tool-side columns of an agent whose tools are over MCP (default true; "
        "as --no-tool-side-faults when false)",
    )
    parser.addini(
        "crashmatrix_snapshots",
        type="bool",
        default=True,
        help="crashmatrix: first crashes from one clean life's snapshots at each boundary (default "
        "true: proven the same verdicts; false, or --no-snapshots, kills a life at each point)",
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
    from crashmatrix.harness.core.double_resume import DOUBLE_COLUMN
    from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS

    config.addinivalue_line("markers", "crashmatrix: a crash-matrix case from a scenario YAML")
    kinds = ("clean", "recovery", "power_loss", TORN_WRITE, *BOUNDARIES, *TOOL_SIDE_KINDS, DOUBLE_COLUMN)
    for name in ("idempotent", "conditional", "non_idempotent", *kinds):
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

    def _real(self) -> Any:
        if self.real is None:
            from crashmatrix.reports.collector import MatrixReporter

            out = self.config.getoption("report_dir")
            summary = os.environ.get("GITHUB_STEP_SUMMARY")
            self.real = MatrixReporter(
                Path(out) if out else self.config.rootpath / "reports" / "latest",
                self.config.getoption("agent"),
                Path(summary) if summary else None,
                started=self.started,
            )
        return self.real

    def _file(self, nodeid: str) -> Path:
        return self.config.rootpath / nodeid.partition("::")[0]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        raw = getattr(report, REPORT_ATTR, None)
        if isinstance(raw, str):
            self._real().add(raw)
        # Never greener than pytest: a crash case it failed without a failing record (a
        # worker that died with it, an error outside its verdict) is an error case.
        file = self._file(report.nodeid)
        if report.failed and (isinstance(raw, str) or _is_scenario(file, self.config)):
            self._real().failed(report.nodeid, file, report.longreprtext, str(report.when))

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        # A scenario file that failed to collect has no case: one error case says why.
        file = self._file(report.nodeid)
        if report.failed and report.nodeid and "::" not in report.nodeid and _is_scenario(file, self.config):
            self._real().not_collected(report.nodeid, file, report.longreprtext)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
        if (
            self.real is None
            and exitstatus == pytest.ExitCode.INTERRUPTED
            and (self.config.stash.get(_ACTIVE, False) or _asked_for_scenarios(self.config))
        ):
            # Interrupted before any crash case reported (during collection, or in the clean
            # runs): an INCOMPLETE report with no case, rather than no report at all (a CI
            # job would keep last run's matrix, or none, and say nothing).
            self._real()
        if self.real is not None:
            selected = self.config.stash.get(_SELECTED, None)
            self.real.selected = None if selected is None else frozenset(selected)
            self.real.pytest_sessionfinish(session, exitstatus)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.real is not None:
            self.real.pytest_terminal_summary(terminalreporter)


def pytest_configure(config: pytest.Config) -> None:
    _configure_shard(config)
    _start_servers(config)
    if not hasattr(config, "workerinput") and not config.getoption("no_report"):
        config.pluginmanager.register(_Reporter(config), "crashmatrix-matrix")
    config.pluginmanager.register(_Seen(config), "crashmatrix-seen")


def _start_servers(config: pytest.Config) -> None:
    """The servers the agent's store needs (its adapter's ``servers``: a real PostgreSQL),
    started here, before xdist starts its workers, so that they, their fork servers and
    every life inherit the one server (``CRASHMATRIX_POSTGRES_URL``). Only for an agent
    other than the reference one (the light path stays light); a worker inherits, and an
    adapter that cannot be loaded says why where it is loaded for real (collection)."""
    agent = config.getoption("agent")
    if agent == "reference" or hasattr(config, "workerinput"):
        return
    from crashmatrix.harness.agents.loading import adapter_for
    from crashmatrix.harness.errors import CrashmatrixError
    from crashmatrix.harness.lives import postgres

    try:
        adapter = adapter_for(agent)
    except CrashmatrixError:
        return
    try:
        postgres.ensure_servers(adapter)
    except postgres.PostgresUnavailable as error:
        raise pytest.UsageError(f"--agent={agent}: {error}") from None


# ---------------------------------------------------------------------------- which files


def is_scenario_text(text: str, *, candidate: bool) -> bool:
    """Is a YAML file with this text a scenario? It is when its leading comments declare the
    scenario schema. A file that declares another schema (a contract, an adapter) is not.
    Otherwise only a ``candidate`` (named on the command line, or under crashmatrix_paths)
    is, and only with a top-level key no other YAML of ours or of a team's tools has: a
    broken scenario (a misspelt ``turnz:``) is still one, and fails with file:line."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        declared = _SCHEMA.search(stripped)
        if declared:
            return declared[1].endswith("scenario.schema.json")
    return candidate and _SCENARIO_KEYS.search(text) is not None


def _scenario_paths(config: pytest.Config) -> tuple[Path, ...]:
    if _PATHS not in config.stash:
        configured = config.getini("crashmatrix_paths")
        base = config.inipath.parent if config.inipath is not None else config.invocation_params.dir
        paths = configured if configured else [base / "scenarios"]
        config.stash[_PATHS] = tuple(Path(os.path.abspath(p)) for p in paths)
    return config.stash[_PATHS]


def _arg_paths(config: pytest.Config) -> list[tuple[str, Path]]:
    """The paths named on the command line, as typed and absolute (not testpaths: those
    are the project's defaults, not a request for these files)."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return []
    base = config.invocation_params.dir
    return [(arg, Path(os.path.abspath(base / arg.partition("::")[0]))) for arg in config.args]


def _named(config: pytest.Config) -> frozenset[Path]:
    if _NAMED not in config.stash:
        config.stash[_NAMED] = frozenset(path for _, path in _arg_paths(config))
    return config.stash[_NAMED]


def _asked_for_scenarios(config: pytest.Config) -> bool:
    """Whether a path on the command line is, or holds, a scenario file (an xdist controller
    collects nothing, so an interrupt during its workers' collection leaves it this to go by)."""
    for _, path in _arg_paths(config):
        if path.is_file():
            if _is_scenario(path, config):
                return True
            continue
        for folder, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("node_modules", "__pycache__")]
            if any(_is_scenario(Path(folder) / name, config) for name in files):
                return True
    return False


def _is_scenario(file_path: Path, config: pytest.Config) -> bool:
    if file_path.suffix not in (".yaml", ".yml"):
        return False
    path = Path(os.path.abspath(file_path))
    candidate = path in _named(config) or any(path.is_relative_to(p) for p in _scenario_paths(config))
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            text = handle.read() if candidate else handle.read(_HEAD)
    except OSError:
        return candidate  # collected, so that loading it says what is wrong with it
    return is_scenario_text(text, candidate=candidate)


class _Seen:
    """Files something was collected from besides the items that will run: scenario files,
    files that failed to collect (on an xdist controller too: failed collect reports are
    forwarded there), files whose items -k, -m or --shard deselected."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        config.stash[_SEEN] = set()

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and report.nodeid:
            self.config.stash[_SEEN].add(self.config.rootpath / report.nodeid.partition("::")[0])

    def pytest_deselected(self, items: Sequence[pytest.Item]) -> None:
        self.config.stash[_SEEN].update(Path(os.path.abspath(item.path)) for item in items)


def _has_yaml(path: Path) -> bool:
    if path.is_file():
        return path.suffix in (".yaml", ".yml")
    for _, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("node_modules", "__pycache__")]
        if any(f.endswith((".yaml", ".yml")) for f in files):
            return True
    return False


def _why_nothing(config: pytest.Config, collected: Sequence[Path]) -> list[str]:
    """One line for each path named on the command line that holds YAML and gave nothing:
    which rule its files did not meet (a silent "no tests ran" told nobody anything)."""
    if config.stash.get(_SAID_WHY, False):
        return []
    config.stash[_SAID_WHY] = True
    seen = [*collected, *config.stash.get(_SEEN, ())]
    paths = ", ".join(_shown(p, config) for p in _scenario_paths(config))
    lines = []
    for arg, path in _arg_paths(config):
        if any(p == path or p.is_relative_to(path) for p in seen) or not _has_yaml(path):
            continue
        what = "is not a scenario" if path.is_file() else "holds no scenario"
        lines.append(f"crashmatrix: {arg} {what}, nothing collected ({RULE}: {paths})")
    return lines


def _shown(path: Path, config: pytest.Config) -> str:
    try:
        return str(path.relative_to(config.invocation_params.dir))
    except ValueError:
        return str(path)


def pytest_report_collectionfinish(
    config: pytest.Config, start_path: Path, items: Sequence[pytest.Item]
) -> list[str]:
    lines = _why_nothing(config, [Path(os.path.abspath(item.path)) for item in items])
    shard = config.stash.get(_SHARD, None)
    if shard is not None and shard.summary:
        lines.append(shard.summary)
    return lines


# ---------------------------------------------------------------------------- shards


class _ShardState:
    def __init__(self, shard: Any, recorded: dict[str, float] | None, source: str) -> None:
        self.shard = shard
        self.recorded = recorded
        self.source = source  # what the split is balanced by, for the summary line
        self.summary = ""


def _configure_shard(config: pytest.Config) -> None:
    spec, durations = config.getoption("shard"), config.getoption("shard_durations")
    if spec is None:
        if durations is not None:
            raise pytest.UsageError("--shard-durations balances --shard=I/N: give --shard too")
        return
    from crashmatrix.harness.plan.shards import parse_shard, seconds_by_file

    try:
        shard = parse_shard(spec)
    except ValueError as error:
        raise pytest.UsageError(str(error)) from None
    recorded = None
    if durations is not None:
        from crashmatrix.harness.errors import CrashmatrixError
        from crashmatrix.reports.results import load_results

        try:
            results = load_results(durations)
        except CrashmatrixError as error:
            raise pytest.UsageError(f"--shard-durations {error}") from None
        recorded = seconds_by_file((case.node_id, case.seconds) for case in results.cases)
    source = f"recorded seconds in {durations}" if durations else "item count"
    config.stash[_SHARD] = _ShardState(shard, recorded, source)


def _file_of(item: pytest.Item) -> str:
    return item.nodeid.partition("::")[0]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Keep shard I's files: after -k and -m (trylast), so the split balances what runs.
    Every xdist worker and every CI job computes the same split from the same items."""
    state = config.stash.get(_SHARD, None)
    if state is None:
        return
    from crashmatrix.harness.plan.shards import split, weights

    by_file: dict[str, int] = {}
    for item in items:
        by_file[_file_of(item)] = by_file.get(_file_of(item), 0) + 1
    plan = split(weights(by_file, state.recorded), state.shard.count)
    mine = set(plan[state.shard.index - 1])
    kept = [item for item in items if _file_of(item) in mine]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if _file_of(item) not in mine])
        items[:] = kept
    state.summary = (
        f"crashmatrix --shard={state.shard}: {len(mine)} of {len(by_file)} files, "
        f"{len(kept)} of {sum(by_file.values())} items (balanced by {state.source})"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    report = yield
    record = getattr(item, "report_record", None)
    if not getattr(item, "is_crash_case", False):
        return report
    if call.when == "call" and record is not None:
        # A plain attribute of a TestReport travels with it from an xdist worker.
        setattr(report, REPORT_ATTR, record)
    elif getattr(report, "failed", False) and record is None:
        # Failed before it had a record (in setup, or the record could not be made): still
        # a record, an error with the cause. Failing after it (teardown) turns the record it
        # has into an error on the controller (``MatrixReporter.failed``), which also makes
        # a bare error record if this one cannot be made.
        with contextlib.suppress(Exception):
            setattr(report, REPORT_ATTR, item.error_record(report.longreprtext, call.when))  # type: ignore[attr-defined]
    return report


def pytest_collection_finish(session: pytest.Session) -> None:
    # What exists after collection (pytest, openai, the items) lives until the session ends,
    # yet every full collection walked all of it again: ~12% of a worker's CPU in a matrix
    # run (perf). Frozen, it is left out of collections; cases still collect their garbage.
    if any(getattr(item, "is_crash_case", False) for item in session.items):
        gc.collect()
        gc.freeze()
    if not session.config.pluginmanager.has_plugin("dsession"):  # an xdist controller collects nothing
        session.config.stash[_SELECTED] = {item.nodeid for item in session.items}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    # Under xdist the controller collects nothing itself: it learns from a worker's node ids
    # that crash cases are coming, in time to turn SIGTERM into an orderly stop there too.
    config = node.config
    config.stash.setdefault(_SELECTED, set()).update(ids)
    files = {config.rootpath / nodeid.partition("::")[0] for nodeid in ids}
    if any(_is_scenario(path, config) for path in files):
        _activate(config)
    lines = _why_nothing(config, sorted(files))
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    for line in lines if reporter is not None else ():
        reporter.write_line(line)


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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
    """This process's world templates (and a worker's server) go now: an xdist worker may be
    ended with ``os._exit`` and never run the exit handlers that would remove them.
    Looked up, not imported: a pytest run that never touched crashmatrix stays light."""
    casedir = sys.modules.get("crashmatrix.harness.lives.casedir")
    if casedir is not None:
        casedir.remove_templates()
    # The server an xdist worker started stops with its session: its exit handlers may never
    # run. Anywhere else this process's exit stops it, never a session's end: a pytest run
    # in-process inside a test would stop the test process's server under the fork servers
    # that keep its URL for the next run.
    postgres = sys.modules.get("crashmatrix.harness.lives.postgres")
    if postgres is not None and hasattr(session.config, "workerinput"):
        postgres.stop_server()


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


class _NotAScenario(pytest.File):
    """A YAML file named on the command line that is not a scenario: it holds no item."""

    def collect(self) -> Iterator[pytest.Item]:
        return iter(())


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if not _is_scenario(file_path, parent.config):
        named = Path(os.path.abspath(file_path)) in _named(parent.config)
        if named and file_path.suffix in (".yaml", ".yml"):
            # Named on the command line: without a collector pytest would stop at "not
            # found: FILE", hiding the line that says why it is no scenario.
            ignored: pytest.Collector = _NotAScenario.from_parent(parent, path=file_path)
            return ignored
        return None
    parent.config.stash.setdefault(_SEEN, set()).add(Path(os.path.abspath(file_path)))
    _activate(parent.config)
    _self_check(parent.config)
    from crashmatrix.harness.front.collection import ScenarioFile, clean_ahead

    clean_ahead(parent.config, lambda: _scenario_files(parent.config))
    file: pytest.Collector = ScenarioFile.from_parent(parent, path=file_path)
    return file


def _scenario_files(config: pytest.Config) -> list[Path]:
    """The scenario files under the paths on the command line, in the order pytest's
    collection reaches them (a directory's entries by name, depth first), less what
    ``pytest_ignore_collect`` leaves out (``--ignore``, ``norecursedirs``). For running
    their clean cases ahead (``collection.clean_ahead``): a file missed or extra costs
    time, never a verdict."""
    found: dict[Path, None] = {}

    def walk(path: Path) -> None:
        if config.hook.pytest_ignore_collect(collection_path=path, config=config):
            return
        if path.is_dir():
            for entry in sorted(path.iterdir()):
                if not entry.name.startswith(".") and entry.name not in ("node_modules", "__pycache__"):
                    walk(entry)
        elif _is_scenario(path, config):
            found[path] = None

    for _, path in _arg_paths(config):
        walk(path)
    return list(found)
