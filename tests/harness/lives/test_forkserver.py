"""The fork server lives are started from: exit codes, deadlines, concurrency, its own death,
and no re-run of the harness's ``__main__`` in every life (why it replaced multiprocessing's)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from crashmatrix.harness.errors import HarnessError
from crashmatrix.harness.lives.forkserver import EXIT_TARGET_RAISED, ForkServer, run_spawned

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]


# Targets pickle by reference, so they are importable functions (this module is not, under
# --import-mode=importlib): copying /proc/self/stat records the child's pid and parent.
def _stat(path: Path) -> tuple[int, int]:
    fields = path.read_text().rsplit(")", 1)[1].split()
    return int(path.read_text().split()[0]), int(fields[1])


@pytest.fixture
def server() -> Iterator[ForkServer]:
    # Its own server (not ForkServer.shared): these tests kill it.
    own = ForkServer(["crashmatrix.harness.lives.life"])
    yield own
    own.stop()


def test_a_target_runs_in_a_child_of_the_server_and_its_exit_code_comes_back(
    server: ForkServer, tmp_path: Path
) -> None:
    out = tmp_path / "stat"
    ended = server.run(shutil.copyfile, ("/proc/self/stat", str(out)), deadline=30)
    pid, parent = _stat(out)
    assert (ended.code, ended.hung, ended.pid) == (0, False, pid)
    assert parent not in (os.getpid(), pid)  # forked by the server, not by us
    assert server.run(os._exit, (7,), deadline=30).code == 7
    assert server.run(os.abort, (), deadline=30).code == -signal.SIGABRT
    assert server.run(int, ("not a number",), deadline=30).code == EXIT_TARGET_RAISED


def test_the_child_runs_in_the_callers_working_directory(
    server: ForkServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.run(os._exit, (0,), deadline=30)  # the server starts elsewhere
    (tmp_path / "here.txt").write_text("here")
    monkeypatch.chdir(tmp_path)
    assert server.run(shutil.copyfile, ("here.txt", "copied.txt"), deadline=30).code == 0
    assert (tmp_path / "copied.txt").read_text() == "here"


def test_a_child_past_its_deadline_is_killed_and_reported_hung(server: ForkServer) -> None:
    ended = server.run(time.sleep, (3600,), deadline=0.5)
    assert ended.hung and ended.code == -signal.SIGKILL
    with pytest.raises(ProcessLookupError):
        os.kill(ended.pid, 0)


def test_threads_may_run_children_at_once(server: ForkServer, tmp_path: Path) -> None:
    paths = [tmp_path / f"p{i}" for i in range(8)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        ended = list(
            pool.map(lambda p: server.run(shutil.copyfile, ("/proc/self/stat", str(p)), deadline=30), paths)
        )
    pids = [_stat(p)[0] for p in paths]
    assert [e.pid for e in ended] == pids and len(set(pids)) == 8


def test_a_server_started_by_a_thread_that_ends_outlives_it(server: ForkServer) -> None:
    """The server's PR_SET_PDEATHSIG follows the thread that started it: started by one of
    double resume's two life threads, it was SIGKILLed when that thread ended, and the other
    life still running with it ('the fork server ... ended', under load)."""
    import threading

    first = threading.Thread(target=server.run, args=(time.sleep, (0.3,)), kwargs={"deadline": 30})
    first.start()  # this thread starts the server, runs its life, and ends
    while server._process is None:
        time.sleep(0.01)
    with ThreadPoolExecutor(max_workers=1) as pool:
        # A life that runs on past the first thread's end, on the same server.
        longer = pool.submit(server.run, time.sleep, (1.5,), deadline=30)
        first.join()
        assert longer.result().code == 0
    process = server._process
    assert process is not None and process.poll() is None


def test_a_server_that_dies_mid_life_is_an_error_and_the_next_run_starts_a_new_one(
    server: ForkServer, tmp_path: Path
) -> None:
    server.run(os._exit, (0,), deadline=30)
    process = server._process
    assert process is not None
    with pytest.raises(HarnessError, match=r"fork server .* ended"):
        server.run(os.kill, (process.pid, signal.SIGKILL), deadline=30)
    assert server.run(os._exit, (3,), deadline=30).code == 3


def test_launchers_with_other_preload_lists_get_other_servers(tmp_path: Path) -> None:
    a, b = (
        ForkServer.shared(["crashmatrix.harness.lives.life"]),
        ForkServer.shared(["crashmatrix.harness.lives.life", "crashmatrix.harness.verdict.verdict"]),
    )
    assert ForkServer.shared(["crashmatrix.harness.lives.life"]) is a and a is not b
    a.run(shutil.copyfile, ("/proc/self/stat", str(tmp_path / "a")), deadline=30)
    b.run(shutil.copyfile, ("/proc/self/stat", str(tmp_path / "b")), deadline=30)
    assert _stat(tmp_path / "a")[1] != _stat(tmp_path / "b")[1]


def test_spawned_children_report_the_same_exit_codes() -> None:
    assert run_spawned(os._exit, (5,), deadline=60).code == 5
    assert run_spawned(os.abort, (), deadline=60).code == -signal.SIGABRT
    hung = run_spawned(time.sleep, (3600,), deadline=3)
    assert hung.hung and hung.code == -signal.SIGKILL


def test_lives_do_not_rerun_the_harness_main_script(tmp_path: Path) -> None:
    # multiprocessing re-runs __main__ in each child: under the `pytest` console script that
    # re-imported pytest in every life. A script with a side effect at import shows it.
    marker = tmp_path / "imports"
    script = tmp_path / "main_script.py"
    script.write_text(
        textwrap.dedent(
            f"""
            from pathlib import Path
            with open({str(marker)!r}, "a") as out:
                out.write("imported\\n")
            if __name__ == "__main__":
                import os
                from crashmatrix.harness.lives.forkserver import ForkServer
                server = ForkServer(["crashmatrix.harness.lives.life"])
                codes = [server.run(os._exit, (0,), deadline=30).code for _ in range(3)]
                server.stop()
                print(codes)
            """
        ),
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.stdout.strip() == "[0, 0, 0]", done.stderr
    assert marker.read_text() == "imported\n"


@pytest.mark.parametrize("ignored", [False, True], ids=["handled", "ignored"])
def test_lives_keep_the_harness_sigint_disposition(tmp_path: Path, ignored: bool) -> None:
    # A harness started ignoring SIGINT (a background job of a script) must not have its
    # lives killed by a Ctrl-C it ignores itself; a harness that handles it stops its lives.
    script = tmp_path / "run_a_life.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import shutil, signal
            from crashmatrix.harness.lives.forkserver import ForkServer
            # Set either way: this suite itself may have been started ignoring SIGINT.
            signal.signal(signal.SIGINT, signal.SIG_IGN if {ignored!r} else signal.default_int_handler)
            server = ForkServer(["crashmatrix.harness.lives.life"])
            server.run(shutil.copyfile, ("/proc/self/status", {str(tmp_path / "status")!r}), deadline=30)
            server.stop()
            """
        ),
        encoding="utf-8",
    )
    subprocess.run([sys.executable, str(script)], cwd=ROOT, check=True, timeout=120)
    masks = {
        line.split(":")[0]: int(line.split()[1], 16)
        for line in (tmp_path / "status").read_text().splitlines()
        if line.startswith(("SigIgn", "SigCgt"))
    }
    bit = 1 << (signal.SIGINT - 1)
    assert bool(masks["SigIgn"] & bit) is ignored
    assert bool(masks["SigCgt"] & bit) is not ignored
