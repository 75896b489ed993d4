"""What holds for every test of the project (tests/README.md says where a new test goes).

Fast tests run in the test's own process: ``pytest tests -m "not slow"`` runs them all in
well under a minute on 2 cores. A test that starts a program (another interpreter, the
``crashmatrix`` CLI, pytest in a subprocess, the fork server that agent lives fork from) is
marked ``slow``; CI runs both. Forking the test process itself (``os.fork``, a few
milliseconds) is fine in a fast test.

The rule is checked, not trusted: an audit hook sees every program this process starts,
and a test that is not marked ``slow`` and starts one fails at teardown, naming what it
started.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
from collections.abc import Iterator

import pytest

# Audit events raised when a program starts: subprocess.Popen (subprocess.run, the fork
# server and spawned lives go through it) and the os-level calls. (multiprocessing's spawn
# would not be seen; nothing here uses it since lives fork from our own server.)
_STARTS_A_PROGRAM = frozenset({"subprocess.Popen", "os.system", "os.posix_spawn"})

# The node id of the fast test running now (None while a slow test or no test runs), and
# what each fast test started.
_fast_test: str | None = None
_started: dict[str, list[str]] = {}


def _audit(event: str, args: tuple[object, ...]) -> None:
    if _fast_test is not None and event in _STARTS_A_PROGRAM:
        _started.setdefault(_fast_test, []).append(f"{event} {args[1] if len(args) > 1 else args!r}"[:200])


sys.addaudithook(_audit)  # cannot be removed: it only records while a fast test runs

# What a library starts once per process and then caches is started here, before any test:
# the openai client's platform headers run ``uname -p`` (platform.processor()).
platform.processor()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    global _fast_test
    _fast_test = None if item.get_closest_marker("slow") else item.nodeid
    try:
        return (yield)
    finally:
        _fast_test = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    report: pytest.TestReport = yield
    started = _started.pop(item.nodeid, None) if call.when == "teardown" else None
    if started and report.passed:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} is not marked slow but started {len(started)} program(s), first: "
            f"{started[0]}. Mark it @pytest.mark.slow, or keep it in this process (tests/README.md)."
        )
    return report


@pytest.hookimpl(trylast=True)  # after the tmpdir plugin has made the session's basetemp
def pytest_configure(config: pytest.Config) -> None:
    """The doctor's findings (``harness.front.doctor.cached_coverage``) cached once for the
    whole test session, under its basetemp, where the xdist workers and every pytest run a
    test makes (in process, or a subprocess inheriting the environment) find them. Without
    it each run of a test's scenarios under pytester found an empty cache (pytester gives
    each test its own HOME) and ran the doctor again for the same agent: a clean case and a
    first life per crash column each time, 1-7 s a run (issue 31). The key is the agent's
    files and crashmatrix's sources, so a twin or a copied adapter has its own entry; a test
    about the doctor's own run sets ``CRASHMATRIX_CACHE_DIR`` itself (test_doctor.py). One
    the caller set is kept. An xdist worker inherits the controller's."""
    if hasattr(config, "workerinput"):
        return  # an xdist worker inherits the controller's environment
    factory: pytest.TempPathFactory = config._tmp_path_factory  # type: ignore[attr-defined]
    if "CRASHMATRIX_CACHE_DIR" not in os.environ:
        os.environ["CRASHMATRIX_CACHE_DIR"] = str(factory.getbasetemp() / "crashmatrix-doctor-cache")
    # $TMPDIR too: a rerun line (`crashmatrix run S --crash P`) keeps its case in a new
    # directory by design, as explore and mutants keep theirs, and tests that run those
    # commands in process left them in /tmp, about eight a CI run. Under the basetemp they go
    # with pytest's own retention. A test about what a run leaves in $TMPDIR sets its own.
    scratch = factory.getbasetemp() / "tmp"
    scratch.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(scratch)
    tempfile.tempdir = None  # read $TMPDIR again on the next call


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """The admin URL of a running PostgreSQL (``harness.lives.postgres.ensure_server``: a
    throwaway cluster of this test process, or ``CRASHMATRIX_POSTGRES_URL``), exported to
    what the test starts. It starts a server, so a test using it is slow. Without one it
    FAILS under CI (``CI=true``: ``.ci/run`` installs PostgreSQL, so a missing server is a
    broken CI) and skips elsewhere, naming what to install."""
    from crashmatrix.harness.lives import postgres

    try:
        url = postgres.ensure_server()
    except postgres.PostgresUnavailable as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {error}", pytrace=False)
        pytest.skip(str(error))
    yield url
    # A session fixture ends in the teardown of whichever test ran last in this process: the
    # server's pg_ctl is the session's program, never charged to that test (fast or slow).
    global _fast_test
    _fast_test = None
    postgres.stop_server()  # only what this process started: a team's server is left alone
