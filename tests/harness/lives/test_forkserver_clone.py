"""A fork server forked from a warm one (``ForkServer._clone``): it must be what a new process
would have been -- its own preloads, the harness's environment, directory, standard streams
and SIGINT disposition as they are at its start -- and die with the harness all the same."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.errors import HarnessError
from crashmatrix.harness.lives.forkserver import ForkServer, _Clone

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
LIFE = "crashmatrix.harness.lives.life"
# In no other server's list: no other test's server is cloned from this module's base, which
# its fixture stops (a base's clones die with it).
BASE = [LIFE, "crashmatrix.harness.lives.server_state"]
# A module the base does not import (its clone does): proves whose preloads a life has.
EXTRA = "crashmatrix.harness.verdict.explain"


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _write_imported(module: str, out: str) -> None:
    Path(out).write_text(str(module in sys.modules), encoding="utf-8")


def _write_env(name: str, out: str) -> None:
    Path(out).write_text(os.environ.get(name, "<unset>"), encoding="utf-8")


def _say(text: str) -> None:
    os.write(1, text.encode())


@pytest.fixture
def servers() -> Iterator[tuple[ForkServer, ForkServer]]:
    # Shared, as launchers' servers are (only shared servers are bases); removed after, so
    # no other test of this worker finds them.
    base = ForkServer.shared(BASE)
    clone = ForkServer.shared([*BASE, EXTRA], (), (BASE, ()))
    yield base, clone
    for server in (clone, base):
        server.stop()
        ForkServer._shared = {key: s for key, s in ForkServer._shared.items() if s is not server}


def test_a_new_server_is_forked_from_a_running_base_and_imports_only_what_its_list_adds(
    servers: tuple[ForkServer, ForkServer], tmp_path: Path
) -> None:
    base, clone = servers
    assert base.run(_write_imported, (EXTRA, str(tmp_path / "base")), deadline=30).code == 0
    assert clone.run(_write_imported, (EXTRA, str(tmp_path / "clone")), deadline=30).code == 0
    assert isinstance(clone._process, _Clone) and base._process is not None
    assert _parent(clone._process.pid) == base._process.pid
    assert (tmp_path / "base").read_text() == "False"
    assert (tmp_path / "clone").read_text() == "True"


def test_with_clones_off_a_new_process_is_started_though_a_base_runs(
    servers: tuple[ForkServer, ForkServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, clone = servers
    monkeypatch.setenv("CRASHMATRIX_SERVER_CLONES", "0")
    base.run(os._exit, (0,), deadline=30)
    assert clone.run(os._exit, (0,), deadline=30).code == 0
    assert isinstance(clone._process, subprocess.Popen)


def test_a_clone_has_the_harness_environment_directory_and_output_of_its_start(
    servers: tuple[ForkServer, ForkServer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    base, clone = servers
    base.run(os._exit, (0,), deadline=30)  # the base starts before anything below is set
    monkeypatch.setenv("CRASHMATRIX_TEST_CLONE_ENV", "set after the base started")
    monkeypatch.chdir(tmp_path)
    assert clone.run(_write_env, ("CRASHMATRIX_TEST_CLONE_ENV", str(tmp_path / "env")), deadline=30).code == 0
    assert isinstance(clone._process, _Clone)
    assert (tmp_path / "env").read_text() == "set after the base started"
    assert Path(f"/proc/{clone._process.pid}/cwd").resolve() == tmp_path.resolve()
    capfd.readouterr()
    clone.run(_say, ("a life's output\n",), deadline=30)
    assert "a life's output" in capfd.readouterr().out


def test_a_clone_that_dies_mid_life_is_an_error_and_the_next_run_clones_a_new_one(
    servers: tuple[ForkServer, ForkServer],
) -> None:
    base, clone = servers
    base.run(os._exit, (0,), deadline=30)
    clone.run(os._exit, (0,), deadline=30)
    first = clone._process
    assert isinstance(first, _Clone)
    with pytest.raises(HarnessError, match=r"fork server .* ended"):
        clone.run(os.kill, (first.pid, signal.SIGKILL), deadline=30)
    assert first.wait() == -signal.SIGKILL  # the base reaped it and said how it ended
    assert clone.run(os._exit, (3,), deadline=30).code == 3
    assert isinstance(clone._process, _Clone) and clone._process.pid != first.pid


def test_stopping_a_clone_kills_it_and_leaves_its_base_serving(
    servers: tuple[ForkServer, ForkServer],
) -> None:
    base, clone = servers
    base.run(os._exit, (0,), deadline=30)
    clone.run(os._exit, (0,), deadline=30)
    pid = clone._process.pid if clone._process else -1
    clone.stop()
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    assert base.run(os._exit, (4,), deadline=30).code == 4


def test_a_clone_and_its_lives_die_with_a_sigkilled_harness(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = tmp_path / "harness.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, threading, time
            from pathlib import Path
            from crashmatrix.harness.lives.forkserver import ForkServer
            base = ForkServer.shared([{LIFE!r}])
            base.run(os._exit, (0,), deadline=30)
            clone = ForkServer.shared([{LIFE!r}, {EXTRA!r}], (), ([{LIFE!r}], ()))
            life = threading.Thread(target=clone.run, args=(time.sleep, (3600,)), kwargs={{"deadline": 3600}})
            life.start()
            while clone._process is None:
                time.sleep(0.01)
            time.sleep(0.5)
            kind = type(clone._process).__name__
            Path({str(pids)!r}).write_text(f"{{base._process.pid}} {{clone._process.pid}} {{kind}}")
            time.sleep(3600)
            """
        ),
        encoding="utf-8",
    )
    harness = subprocess.Popen([sys.executable, str(script)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not pids.exists() and harness.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        base_pid, clone_pid, kind = pids.read_text().split()
        assert kind == "_Clone"
        lives = [int(p) for p in Path(f"/proc/{clone_pid}/task/{clone_pid}/children").read_text().split()]
        assert len(lives) == 1
    finally:
        harness.kill()
        harness.wait()
    for pid in (int(base_pid), int(clone_pid), *lives):
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                break
            time.sleep(0.02)
        else:
            if Path(f"/proc/{pid}").exists():
                pytest.fail(f"pid {pid} outlived the SIGKILLed harness")


def test_the_clone_keeps_the_harness_sigint_disposition_of_its_start(tmp_path: Path) -> None:
    # The base started while SIGINT was handled; the harness then ignores it (a background
    # job): the clone's lives ignore it too, as a new server's would.
    script = tmp_path / "run_a_life.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, shutil, signal
            from crashmatrix.harness.lives.forkserver import ForkServer
            signal.signal(signal.SIGINT, signal.default_int_handler)
            base = ForkServer.shared([{LIFE!r}])
            base.run(os._exit, (0,), deadline=30)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            clone = ForkServer.shared([{LIFE!r}, {EXTRA!r}], (), ([{LIFE!r}], ()))
            clone.run(shutil.copyfile, ("/proc/self/status", {str(tmp_path / "status")!r}), deadline=30)
            print(type(clone._process).__name__)
            """
        ),
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "_Clone"
    masks = {
        line.split(":")[0]: int(line.split()[1], 16)
        for line in (tmp_path / "status").read_text().splitlines()
        if line.startswith(("SigIgn", "SigCgt"))
    }
    assert masks["SigIgn"] & (1 << (signal.SIGINT - 1))


def test_the_reference_base_is_the_server_pytest_agent_reference_starts() -> None:
    # Else the reference base would be one more server beside the reference agent's own.
    from crashmatrix.harness.agents.loading import fork_preload
    from crashmatrix.harness.lives.injector import _BASES, PRELOAD, LifeLauncher

    reference = LifeLauncher("fork", preload=fork_preload("reference"), warm=("reference",)).server
    assert reference is not None and reference.base is None  # it is a base: never a clone
    assert (reference.preload, reference.warm) == _BASES[0]
    bare = LifeLauncher("fork", preload=()).server
    assert bare is not None and bare.base is None and (bare.preload, bare.warm) == (tuple(PRELOAD), ())
    agent = LifeLauncher(
        "fork", preload=fork_preload(str(ROOT / "examples/python_agent/adapter.yaml"))
    ).server
    assert agent is not None and agent.base == _BASES[0]


def test_a_process_that_needs_a_second_server_starts_the_base_and_forks_it_from_there(tmp_path: Path) -> None:
    # The first server of a process is started as a new interpreter (a run of one agent pays
    # for no base); a second one, with no base running, starts its base and is forked from it.
    script = tmp_path / "harness.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os
            from crashmatrix.harness.lives.forkserver import ForkServer
            base = ({BASE!r}, ())
            first = ForkServer.shared([*{BASE!r}, "crashmatrix.harness.verdict.verdict"], (), base)
            first.run(os._exit, (0,), deadline=60)
            second = ForkServer.shared([*{BASE!r}, {EXTRA!r}], (), base)
            second.run(os._exit, (0,), deadline=60)
            started = ForkServer.shared({BASE!r})
            print(*(type(server._process).__name__ for server in (first, second, started)))
            """
        ),
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.split() == ["Popen", "_Clone", "Popen"], done.stderr


def test_a_clone_for_a_framework_agent_runs_its_throwaway_life_before_the_first_fork(tmp_path: Path) -> None:
    # The base imported harness.lives.warmup (the reference agent's life) before this clone
    # existed: the framework agent's own life is the clone's to run (forkserver._prepare).
    pytest.importorskip("langgraph")
    import json

    from crashmatrix.harness.agents.loading import fork_preload
    from crashmatrix.harness.lives.injector import _BASES, PRELOAD

    spec = "langgraph:examples.langgraph_agent.agent:build"
    added = str(ROOT) not in sys.path
    if added:
        sys.path.insert(0, str(ROOT))  # the server gets this sys.path: examples.* import
    server = ForkServer([*PRELOAD[:-1], *fork_preload(spec), PRELOAD[-1]], (spec,), _BASES[0])
    try:
        ForkServer.shared(*_BASES[0]).run(os._exit, (0,), deadline=60)  # the base runs
        out = tmp_path / "state.json"
        # The life's code as a string (exec): unpickling a function of this module would
        # import modules the server may not have imported itself.
        report = (
            "import json, sys\n"
            "framework_life = 'crashmatrix.harness.agents.foreign_session' in sys.modules\n"
            f"open({str(out)!r}, 'w').write(json.dumps(framework_life))\n"
        )
        assert server.run(exec, (report,), deadline=120).code == 0
        assert isinstance(server._process, _Clone)
        assert json.loads(out.read_text(encoding="utf-8")) is True
    finally:
        server.stop()
        if added:
            sys.path.remove(str(ROOT))
