"""A real PostgreSQL for framework stores (``harness.lives.postgres``): the server starts and
stops with nothing left running, each case has its own database, a copied case its own copy,
and what a SIGKILL leaves in a database is what PostgreSQL committed.

The fast tests need no server; the slow ones use the session's (``postgres_url`` in
``tests/conftest.py``: it fails under CI when no server can be started, and skips elsewhere
naming what to install) or start their own in a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.lives import postgres
from crashmatrix.harness.lives.casedir import clone_case, remove_case

from ...pytest_runs import OTHER_PLUGINS_OFF, run_inprocess

pytest_plugins = ["pytester"]

# Port 1 of this machine: nothing listens there.
_UNREACHABLE = "postgresql://crashmatrix@127.0.0.1:1/postgres"
# A kind-1 adapter (``--agent=pg_adapter:build``) whose agent's store is PostgreSQL.
_ADAPTER = "class Adapter:\n    servers = ('postgres',)\n\n\ndef build():\n    return Adapter()\n"
# Bounds, not timings: how long a test waits for processes to go before it calls them leaked.
_GONE_WITHIN = 60.0


def _processes_naming(text: str) -> list[str]:
    """The processes whose command line (a postgres process's title) contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in line:
            found.append(f"{entry.name}: {line.strip()}")
    return found


def _left_running(name: str) -> list[str]:
    """What of the cluster ``name`` is still running once it had ``_GONE_WITHIN`` to go."""
    deadline = time.monotonic() + _GONE_WITHIN
    while (left := _processes_naming(name)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _env_without_server() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in (postgres.ENV, postgres.RUN_ENV)}


# ---------------------------------------------------------------------------- no server needed


def test_missing_binaries_are_one_line_naming_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(postgres.PostgresUnavailable) as raised:
        postgres.find_binaries(path=str(tmp_path), debian=tmp_path / "no-postgresql")
    message = str(raised.value)
    assert "\n" not in message
    assert "initdb" in message and "apt-get install postgresql" in message and postgres.ENV in message


def test_ensure_server_with_a_path_that_lacks_the_binaries_raises_before_starting_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(postgres.ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(postgres, "_DEBIAN", tmp_path / "no-postgresql")
    # A process with no server of its own (a cluster an earlier test of this worker started
    # would be exported again, and nothing would need starting).
    monkeypatch.setattr(postgres, "_cluster", None)
    monkeypatch.setattr(postgres, "_own_run", None)
    with pytest.raises(postgres.PostgresUnavailable, match="apt-get install postgresql"):
        postgres.ensure_server()
    assert postgres.ENV not in os.environ and not postgres.owns_server()


def _fake_installation(folder: Path) -> None:
    folder.mkdir(parents=True)
    for name in ("initdb", "pg_ctl", "postgres"):
        (folder / name).write_text("#!/bin/sh\n")
        (folder / name).chmod(0o755)


def test_the_binaries_are_debians_newest_version_when_path_has_none(tmp_path: Path) -> None:
    for version in ("9.6", "13", "15"):
        _fake_installation(tmp_path / "lib" / version / "bin")
    found = postgres.find_binaries(path=str(tmp_path / "empty"), debian=tmp_path / "lib")
    assert found["initdb"] == tmp_path / "lib" / "15" / "bin" / "initdb"


def test_an_initdb_on_path_brings_its_own_installation_through_its_symlink(tmp_path: Path) -> None:
    _fake_installation(tmp_path / "lib" / "16" / "bin")
    _fake_installation(tmp_path / "real")
    (tmp_path / "path").mkdir()
    (tmp_path / "path" / "initdb").symlink_to(tmp_path / "real" / "initdb")
    found = postgres.find_binaries(path=str(tmp_path / "path"), debian=tmp_path / "lib")
    assert found["postgres"] == tmp_path / "real" / "postgres"


def test_a_team_server_that_cannot_be_reached_is_one_line_at_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(postgres.ENV, _UNREACHABLE)
    with pytest.raises(postgres.PostgresUnavailable) as raised:
        postgres.ensure_server()
    assert str(raised.value).startswith(f"cannot reach the PostgreSQL server at {_UNREACHABLE}: ")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("command", ["run", "points"])
def test_crashmatrix_run_and_points_start_the_server_an_adapter_needs_before_anything_runs(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from crashmatrix.harness.front.cli import EXIT_USAGE, main

    (tmp_path / "pg_adapter.py").write_text(_ADAPTER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(postgres.ENV, _UNREACHABLE)  # reached first: the one line says so
    scenario = Path(__file__).resolve().parents[3] / "scenarios" / "send_email" / "send_once.yaml"
    assert main([command, str(scenario), "--agent", "pg_adapter:build"]) == EXIT_USAGE
    said = capsys.readouterr().err
    assert said.startswith(f"crashmatrix: cannot reach the PostgreSQL server at {_UNREACHABLE}: ")
    assert said.count("\n") == 1


def test_a_case_database_without_a_server_is_one_line_naming_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(postgres.ENV, raising=False)
    with pytest.raises(postgres.PostgresUnavailable, match=r"servers = \('postgres',\)"):
        postgres.case_database_url(tmp_path)
    assert not (tmp_path / postgres.RECORD).exists()


def test_without_psycopg_the_line_names_what_to_pip_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(postgres.PostgresUnavailable, match=r"pip install 'psycopg\[binary\]'"):
        postgres.ensure_server()


def test_a_case_database_name_is_stable_per_case_directory_and_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(postgres.RUN_ENV, "run1")
    first = postgres._name_for(tmp_path / "a")
    assert first == postgres._name_for(tmp_path / "a")
    assert first != postgres._name_for(tmp_path / "b")
    assert first.startswith("cm_run1_") and len(first) < 64  # PostgreSQL's identifier limit
    monkeypatch.setenv(postgres.RUN_ENV, "run2")
    assert postgres._name_for(tmp_path / "a") != first


def test_a_case_without_a_database_is_cloned_without_any_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(postgres.ENV, raising=False)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "trace.jsonl").write_text("{}\n")
    clone_case(tmp_path / "a", tmp_path / "b")
    assert (tmp_path / "b" / "trace.jsonl").exists() and not (tmp_path / "b" / postgres.RECORD).exists()


# ---------------------------------------------------------------------------- on the session's server


def _connect(url: str, **options: Any) -> Any:
    import psycopg

    return psycopg.connect(url, **options)


def _rows(url: str) -> list[str]:
    with _connect(url) as connection:
        return [row[0] for row in connection.execute("SELECT note FROM notes ORDER BY note").fetchall()]


def _case_with_rows(case_dir: Path, *notes: str) -> str:
    case_dir.mkdir(parents=True)
    url = postgres.case_database_url(case_dir)
    with _connect(url, autocommit=True) as connection:
        connection.execute("CREATE TABLE notes (note text)")
        for note in notes:
            connection.execute("INSERT INTO notes VALUES (%s)", (note,))
    return url


def _databases(admin_url: str) -> set[str]:
    with _connect(admin_url) as connection:
        return {row[0] for row in connection.execute("SELECT datname FROM pg_database").fetchall()}


@pytest.mark.slow
def test_the_server_acknowledges_only_durable_commits(postgres_url: str) -> None:
    # A crash test against a server that may lose acknowledged commits measures nothing.
    with _connect(postgres_url) as connection:
        settings = {
            name: connection.execute(f"SHOW {name}").fetchone()[0]
            for name in ("fsync", "synchronous_commit", "full_page_writes")
        }
    assert settings == {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}


@pytest.mark.slow
def test_a_case_database_is_created_on_first_use_and_recorded_in_the_case(
    postgres_url: str, tmp_path: Path
) -> None:
    url = postgres.case_database_url(tmp_path)
    name = json.loads((tmp_path / postgres.RECORD).read_text())["database"]
    assert url.rsplit("/", 1)[1] == name and name in _databases(postgres_url)
    _case_with_rows(tmp_path / "other")
    with _connect(url, autocommit=True) as connection:
        connection.execute("CREATE TABLE mine (x int)")
    assert postgres.case_database_url(tmp_path) == url  # the same database, its table still there
    with _connect(url) as connection:
        assert connection.execute("SELECT count(*) FROM mine").fetchone() == (0,)


@pytest.mark.slow
def test_a_copied_case_has_the_sources_rows_in_its_own_database(postgres_url: str, tmp_path: Path) -> None:
    source = _case_with_rows(tmp_path / "a", "before the copy")
    clone_case(tmp_path / "a", tmp_path / "b")
    copy = postgres.case_database_url(tmp_path / "b")
    assert copy != source
    assert _rows(copy) == ["before the copy"]
    with _connect(copy, autocommit=True) as connection:
        connection.execute("INSERT INTO notes VALUES ('only in the copy')")
    with _connect(source, autocommit=True) as connection:
        connection.execute("INSERT INTO notes VALUES ('only in the source')")
    assert _rows(source) == ["before the copy", "only in the source"]
    assert _rows(copy) == ["before the copy", "only in the copy"]


@pytest.mark.slow
def test_copying_over_a_case_and_removing_one_drop_their_databases(postgres_url: str, tmp_path: Path) -> None:
    _case_with_rows(tmp_path / "a", "a")
    _case_with_rows(tmp_path / "b", "b")
    old_b = json.loads((tmp_path / "b" / postgres.RECORD).read_text())["database"]
    clone_case(tmp_path / "a", tmp_path / "b")  # b's own database goes with the directory it replaces
    new_b = json.loads((tmp_path / "b" / postgres.RECORD).read_text())["database"]
    assert _rows(postgres.case_database_url(tmp_path / "b")) == ["a"]
    # The name comes from the directory: the same name again, a new database under it.
    assert new_b == old_b
    remove_case(tmp_path / "b")
    assert new_b not in _databases(postgres_url) and not (tmp_path / "b").exists()


@pytest.mark.slow
def test_a_case_whose_database_is_not_on_the_server_is_refused_in_one_line(
    postgres_url: str, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / postgres.RECORD).write_text(json.dumps({"database": "cm_gone_0"}))
    with pytest.raises(postgres.PostgresUnavailable, match="names database cm_gone_0, which the server"):
        clone_case(tmp_path / "a", tmp_path / "b")


def _client(url: str, then: str) -> int:
    """A forked client of ``url``: commits 'kept', begins a transaction and inserts 'lost'
    (not committed), then says so on a pipe and waits ('sleep') or stops itself ('stop')."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read)
            connection = _connect(url)
            connection.execute("INSERT INTO notes VALUES ('kept')")
            connection.commit()
            connection.execute("INSERT INTO notes VALUES ('lost')")  # a transaction is open now
            os.write(write, b"in transaction")
            if then == "stop":
                os.kill(os.getpid(), signal.SIGSTOP)
            time.sleep(600)
        finally:
            os._exit(1)
    os.close(write)
    with os.fdopen(read, "rb") as said:
        assert said.read(14) == b"in transaction"
    return pid


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


@pytest.mark.slow
def test_a_sigkill_mid_transaction_commits_nothing_and_the_committed_row_survives(
    postgres_url: str, tmp_path: Path
) -> None:
    url = _case_with_rows(tmp_path / "a")
    pid = _client(url, "sleep")
    _kill(pid)  # before COMMIT
    assert _rows(url) == ["kept"]
    clone_case(tmp_path / "a", tmp_path / "b")  # what the next life starts from, copied
    assert _rows(postgres.case_database_url(tmp_path / "b")) == ["kept"]


@pytest.mark.slow
def test_a_case_is_copied_while_clients_of_its_database_linger(postgres_url: str, tmp_path: Path) -> None:
    url = _case_with_rows(tmp_path / "a")
    killed = _client(url, "sleep")
    _kill(killed)  # its backend may not have seen the socket close yet
    # A stopped process keeps its connection open: its backend lingers for as long as the
    # test wants, as a SIGKILLed agent's may for a moment. Without terminating it, CREATE
    # DATABASE ... TEMPLATE waits 5 s and fails: "source database is being accessed".
    stopped = _client(url, "stop")
    try:
        clone_case(tmp_path / "a", tmp_path / "b")
    finally:
        _kill(stopped)
    assert _rows(postgres.case_database_url(tmp_path / "b")) == ["kept", "kept"]
    assert _rows(url) == ["kept", "kept"]


@pytest.mark.slow
def test_a_server_a_pytest_run_inside_a_test_started_outlives_that_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fork servers of this process keep the URL of the server their lives inherit: one
    # in-process run's end must not stop it under the next run's lives.
    monkeypatch.delenv(postgres.ENV, raising=False)
    pytester.makepyfile(pg_adapter=_ADAPTER, test_inner="def test_nothing():\n    pass\n")
    pytester.syspathinsert()
    run_inprocess(pytester, "-p", "no:cacheprovider", "--agent=pg_adapter:build").assert_outcomes(passed=1)
    assert postgres.owns_server()
    with _connect(os.environ[postgres.ENV]) as connection:
        assert connection.execute("SELECT 1").fetchone() == (1,)


# ---------------------------------------------------------------------------- a server of its own

_OWNER = textwrap.dedent(
    """
    import json, sys, time
    from crashmatrix.harness.lives import postgres

    url = postgres.ensure_server()
    cluster = postgres._cluster
    print(json.dumps({"url": url, "dir": str(cluster.directory), "seconds": cluster.seconds}), flush=True)
    if sys.argv[1] == "wait":
        time.sleep(600)
    """
)


@pytest.fixture
def owner(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Start a process that starts its own server (nothing inherited); yields (process, what it said)."""
    started: list[subprocess.Popen[str]] = []

    def start(then: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
        process = subprocess.Popen(
            [sys.executable, "-c", _OWNER, then], stdout=subprocess.PIPE, text=True, env=_env_without_server()
        )
        started.append(process)
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            process.wait()
            pytest.fail(f"the process starting a server exited {process.returncode} without one")
        return process, json.loads(line)

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


@pytest.mark.slow
def test_the_process_that_started_the_server_stops_it_at_exit_leaving_nothing(owner: Any) -> None:
    process, said = owner("exit")
    name = Path(said["dir"]).name
    assert process.wait() == 0
    assert _left_running(name) == []
    assert not Path(said["dir"]).exists()


@pytest.mark.slow
def test_a_port_taken_before_the_server_binds_it_is_tried_again_with_another() -> None:
    script = textwrap.dedent(
        """
        import socket
        import psycopg
        from crashmatrix.harness.lives import postgres

        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = [taken.getsockname()[1]]
        real = postgres._free_port
        postgres._free_port = lambda: ports.pop() if ports else real()
        url = postgres.ensure_server()
        assert f":{taken.getsockname()[1]}/" not in url, url
        with psycopg.connect(url) as connection:
            assert connection.execute("SELECT 1").fetchone() == (1,)
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=_env_without_server(), capture_output=True, text=True, timeout=300
    )
    assert done.stdout == "ok\n", done.stdout + done.stderr


@pytest.mark.slow
def test_a_sigkilled_owner_takes_its_postmaster_along_and_the_next_start_sweeps_its_directory(
    owner: Any,
) -> None:
    process, said = owner("wait")
    name = Path(said["dir"]).name
    assert _processes_naming(name)  # the postmaster and its helpers, found by the cluster's name
    process.kill()
    process.wait()
    assert _left_running(name) == []
    assert Path(said["dir"]).exists()  # no exit handler ran
    postgres._sweep(Path(said["dir"]).parent)  # what the next start does first, where it made it
    assert not Path(said["dir"]).exists()


_WORKER_TEST = textwrap.dedent(
    """
    import json, os, pathlib
    import psycopg
    import pytest
    from crashmatrix.harness.lives import postgres


    @pytest.mark.parametrize("n", range(4))
    def test_one(n):
        inherited = os.environ.get(postgres.ENV)
        url = postgres.ensure_server()  # what a framework's load check does
        with psycopg.connect(url) as connection:
            name = connection.execute("SHOW cluster_name").fetchone()[0]
        out = pathlib.Path(os.environ["OUT"]) / f"{os.getpid()}-{n}.json"
        said = {"cluster": name, "inherited": bool(inherited), "owns": postgres.owns_server()}
        out.write_text(json.dumps(said))
    """
)


def _pytest_n2(tmp_path: Path, *options: str) -> list[dict[str, Any]]:
    (tmp_path / "pg_adapter.py").write_text(_ADAPTER)
    (tmp_path / "test_worker.py").write_text(_WORKER_TEST)
    (tmp_path / "out").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", *OTHER_PLUGINS_OFF, *options],
        cwd=tmp_path,
        env={**_env_without_server(), "OUT": str(tmp_path / "out")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    said = [json.loads(p.read_text()) for p in (tmp_path / "out").iterdir()]
    assert len(said) == 4
    return said


def _cluster_left(name: str) -> list[Path]:
    """The cluster's directory, wherever it was made: $TMPDIR, or /tmp when the server's
    user cannot reach $TMPDIR (``postgres._cluster_base``)."""
    return [d / name for d in {Path(tempfile.gettempdir()), Path("/tmp")} if (d / name).exists()]


@pytest.mark.slow
def test_pytest_starts_the_server_an_adapter_needs_before_its_workers_and_stops_it(tmp_path: Path) -> None:
    said = _pytest_n2(tmp_path, "--agent=pg_adapter:build")
    clusters = {s["cluster"] for s in said}
    assert len(clusters) == 1  # one server, the controller's, for every worker
    assert all(s["inherited"] and not s["owns"] for s in said)
    (name,) = clusters
    assert _left_running(name) == []
    assert not _cluster_left(name)


@pytest.mark.slow
def test_a_server_an_xdist_worker_started_stops_with_its_session(tmp_path: Path) -> None:
    # Whether the worker still owns a server at the very end of its session finish (then
    # xdist tells the controller, which may end the worker before any exit handler runs).
    (tmp_path / "ends").mkdir()
    (tmp_path / "conftest.py").write_text(
        textwrap.dedent(
            f"""
            import os
            import pytest
            from crashmatrix.harness.lives import postgres

            @pytest.hookimpl(trylast=True)
            def pytest_sessionfinish(session):
                if hasattr(session.config, "workerinput"):
                    with open(os.path.join({str(tmp_path / "ends")!r}, str(os.getpid())), "w") as out:
                        out.write(str(postgres.owns_server()))
            """
        )
    )
    said = _pytest_n2(tmp_path)  # no adapter asks: a worker starts its own
    ends = [p.read_text() for p in (tmp_path / "ends").iterdir()]
    assert ends and set(ends) == {"False"}
    assert all(s["owns"] for s in said)  # each worker's own (started by its first test)
    assert 1 <= len({s["cluster"] for s in said}) <= 2
    for name in {s["cluster"] for s in said}:
        assert _left_running(name) == []
        assert not _cluster_left(name)


@pytest.mark.slow
def test_pytest_says_in_one_line_when_the_server_an_adapter_needs_cannot_be_had(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In this process: the run's controller reads the URL from its own environment.
    monkeypatch.setenv(postgres.ENV, _UNREACHABLE)
    pytester.makepyfile(pg_adapter=_ADAPTER, test_nothing="def test_nothing():\n    pass\n")
    pytester.syspathinsert()
    done = run_inprocess(pytester, "-p", "no:cacheprovider", "--agent=pg_adapter:build")
    said = done.stdout.str() + done.stderr.str()
    assert done.ret == pytest.ExitCode.USAGE_ERROR, said
    assert (
        f"ERROR: --agent=pg_adapter:build: cannot reach the PostgreSQL server at {_UNREACHABLE}"
        in done.stderr.str()
    )
    assert "Traceback" not in said
