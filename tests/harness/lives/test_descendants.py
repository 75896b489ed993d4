"""No process of the agent outlives its life unseen: what an agent starts and leaves running
(a shell in the background, a ``setsid`` daemon) is found when its life ends, named, killed
before it can write to the world, and fails ``no_effect_after_death``.

The agents are the reference agent whose tools first start a background process that writes
to the world a moment later (loaded by the lives as ``tests...test_descendants:Factory``).
Without the harness killing it, that write lands after the case was judged (issue 15's
``bash -lc 'sleep 4; echo late >> audit.log'``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from crashmatrix.harness.agents.protocol import LifeContext
from crashmatrix.harness.agents.reference import ReferenceAdapter
from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.core.scenario import Scenario
from crashmatrix.harness.front.cases import run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives import descendants
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.plan.enumeration import points_from_trace
from crashmatrix.harness.verdict.explain import explain
from crashmatrix.reference_agent.agent import Agent

from ...scenario_data import email_once
from ...waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not descendants.tracking(), reason="descendants are tracked on Linux only"),
]

LATE = "late.txt"  # in the world's workspace: what the background process writes
DELAY = 1.5  # seconds before it writes: long after the life died, well inside the case


class _LeavingToolbox:
    """The agent's toolbox, except that each tool first starts a background shell that
    appends to the world's workspace after ``DELAY`` seconds, in a new session (``setsid``),
    and does not wait for it."""

    def __init__(self, inner: Any, workspace: Path) -> None:
        self._inner = inner
        self._workspace = workspace

    def execute(self, name: str, arguments: Mapping[str, Any], ctx: Any) -> Any:
        subprocess.Popen(
            ["sh", "-c", f"sleep {DELAY}; echo late >> {LATE}"],
            cwd=self._workspace,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return self._inner.execute(name, arguments, ctx)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._inner, attribute)


class LeavesAProcess(ReferenceAdapter):
    name = "leaves-a-process"

    def build(self, ctx: LifeContext) -> Agent:
        agent = super().build(ctx)
        agent.toolbox = _LeavingToolbox(agent.toolbox, ctx.world_dir / "workspace")
        return agent


AGENT = f"{__name__}:LeavesAProcess"


@pytest.fixture(scope="module", params=["fork", "spawn"])
def launcher(request: pytest.FixtureRequest) -> Iterator[LifeLauncher]:
    yield LifeLauncher(request.param, preload=[__name__])


def _late_written(case_dir: Path) -> bool:
    return (case_dir / "world" / "workspace" / LATE).exists()


def _running_in(case_dir: Path) -> list[int]:
    """Live processes whose working directory is the case's workspace: the only ones that
    could still write LATE there (a relative path, appended by a shell started in it)."""
    workspace = str((case_dir / "world" / "workspace").resolve())
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cwd = os.readlink(entry / "cwd")
            except OSError:  # gone, or a zombie: it writes nothing
                continue
            if cwd == workspace or cwd.startswith(workspace + "/"):
                found.append(int(entry.name))
    return found


def _wait_nothing_runs_in(case_dir: Path) -> None:
    """Instead of sleeping past the moment the shell would have written (DELAY): wait until
    no process is left that could write it. Bounded by DELAY: a shell the harness left
    running writes by then, or is still there and named."""
    gone = wait_until(lambda: not _running_in(case_dir), within=DELAY + 5)
    assert gone, f"still running in the workspace of {case_dir}: {_running_in(case_dir)}"


def _scenario(tmp_path: Path) -> Scenario:
    path = tmp_path / "email_once.yaml"
    path.write_text(email_once(), encoding="utf-8")
    return load_scenario(path)


@pytest.mark.parametrize("crash", ["after_side_effect[call_1]", None], ids=["crashed", "clean"])
def test_a_process_left_running_is_killed_named_and_fails_the_case(
    launcher: LifeLauncher, tmp_path: Path, crash: str | None
) -> None:
    point = parse_point(crash) if crash else None
    result = run_point(_scenario(tmp_path), point, launcher, tmp_path / "case", agent=AGENT)
    assert result.verdict.status == "failed"
    found = [v for v in result.verdict.violations if v.invariant == "no_effect_after_death"]
    assert found, result.verdict.violations
    assert f"sleep {DELAY}; echo late >> {LATE}" in found[0].message
    assert "life 1" in found[0].message
    # Killed (not just stopped), so it never writes: gone, with nothing left that could.
    pid = int(found[0].message.split("pid ", 1)[1].split()[0])
    _wait_gone(pid)
    _wait_nothing_runs_in(tmp_path / "case")
    assert not _late_written(tmp_path / "case")
    assert result.observation is not None
    lives = result.observation.lives
    assert all(life.survivors is not None for life in lives)
    assert any(life.survivors for life in lives)
    assert "no_effect_after_death" in explain(result)


def test_the_reference_agent_leaves_nothing(launcher: LifeLauncher, tmp_path: Path) -> None:
    point = parse_point("after_side_effect[call_1]")
    result = run_point(_scenario(tmp_path), point, launcher, tmp_path / "case")
    assert result.verdict.status == "passed", result.verdict
    assert result.observation is not None
    assert all(life.survivors == () for life in result.observation.lives)


# -- a black box (kind 3): the case, a shell in its own session ---------------------

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
WRAPPER = """\
import runpy, subprocess, sys
subprocess.Popen(["bash", "-c", "sleep {delay}; echo late >> {late}"], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
sys.argv = [{agent!r}]
runpy.run_path({agent!r}, run_name="__main__")
"""


def _leaving_black_box(where: Path) -> Path:
    """examples/blackbox_agent, started by a wrapper that first leaves a shell running in its
    own session (``setsid``): the agent itself is unchanged and correct."""
    agent = EXAMPLES / "blackbox_agent" / "agent.py"
    wrapper = where / "leaving.py"
    wrapper.write_text(WRAPPER.format(delay=DELAY, late=LATE, agent=str(agent)), encoding="utf-8")
    data = yaml.safe_load((EXAMPLES / "blackbox_agent" / "adapter.yaml").read_text(encoding="utf-8"))
    data["command"] = ["{python}", "-u", str(wrapper)]
    adapter = where / "adapter.yaml"
    adapter.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return adapter


def test_a_black_box_that_leaves_a_shell_in_its_own_session_fails_and_the_shell_never_writes(
    tmp_path: Path,
) -> None:
    launcher = LifeLauncher("fork")
    adapter = str(_leaving_black_box(tmp_path))
    scenario = load_scenario(EXAMPLES / "blackbox_agent" / "scenario.yaml")
    clean = run_point(scenario, None, launcher, tmp_path / "clean", agent=adapter)
    points = points_from_trace(clean.observation.trace if clean.observation else ())
    assert points, "the black box passed no crash point"
    crashed = run_point(scenario, points[0], launcher, tmp_path / "crashed", agent=adapter)
    for result in (clean, crashed):
        found = [v for v in result.verdict.violations if v.invariant == "no_effect_after_death"]
        assert found and f"sleep {DELAY}; echo late >> {LATE}" in found[0].message, result.verdict
        assert result.verdict.status == "failed"
    for case in ("clean", "crashed"):
        _wait_nothing_runs_in(tmp_path / case)
        assert not (tmp_path / case / "world" / "workspace" / LATE).exists()


KILLER = """\
import os, runpy, signal, sys, urllib.request
real = urllib.request.urlopen
def urlopen(request, *args, **kwargs):
    url = request.full_url if hasattr(request, "full_url") else str(request)
    if "/create_order" in url and not os.path.exists("killed-once"):
        open("killed-once", "w").close()
        os.kill(os.getpid(), signal.SIGKILL)  # the agent dies of a signal nobody planned
    return real(request, *args, **kwargs)
urllib.request.urlopen = urlopen
sys.argv = [{agent!r}]
runpy.run_path({agent!r}, run_name="__main__")
"""


def test_a_black_box_killed_by_a_signal_nobody_planned_is_restarted_like_a_crash(tmp_path: Path) -> None:
    agent = EXAMPLES / "blackbox_agent" / "agent.py"
    wrapper = tmp_path / "killed.py"
    wrapper.write_text(KILLER.format(agent=str(agent)), encoding="utf-8")
    data = yaml.safe_load((EXAMPLES / "blackbox_agent" / "adapter.yaml").read_text(encoding="utf-8"))
    data["command"] = ["{python}", "-u", str(wrapper)]
    adapter = tmp_path / "adapter.yaml"
    adapter.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    scenario = load_scenario(EXAMPLES / "blackbox_agent" / "scenario.yaml")
    result = run_point(scenario, None, LifeLauncher("fork"), tmp_path / "case", agent=str(adapter))
    assert result.observation is not None
    first, *rest = result.observation.lives
    assert first.status == "died", first
    assert "the agent's process: SIGKILL" in first.error
    assert rest and rest[-1].status == "exited"
    # Judged as a recovery (never an error of the harness): the agent survived it, breaking
    # no invariant; only the clean run's exact ledger differs, as after any crash.
    assert result.verdict.status == "failed", result.verdict
    assert result.verdict.violations == ()
    assert [p.split(":")[0] for p in result.verdict.problems] == ["life 1 died"]
    assert [m.field.split("[")[0] for m in result.verdict.mismatches] == ["ledger"], result.verdict.mismatches
    assert any("life 1 died" in note for note in result.verdict.notes)


def _subreaper_with_orphan(ready: int) -> None:
    """In a forked child: become a subreaper, start a double-forked setsid'd sleeper (its
    parent exits at once, so it is re-parented to us), report its pid, then wait."""
    descendants.become_subreaper()
    process = subprocess.Popen(
        ["sh", "-c", "setsid sleep 30 & echo $!"], stdout=subprocess.PIPE, start_new_session=True
    )
    assert process.stdout is not None
    pid = process.stdout.readline().strip()
    process.wait()
    os.write(ready, pid + b"\n")


def test_kill_adopted_finds_a_double_forked_setsid_process_and_kills_it() -> None:
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's side
        try:
            _subreaper_with_orphan(write)
            time.sleep(0.2)  # let the sleeper's parent exit and the sleeper be re-parented
            left = descendants.kill_adopted(os.getpid(), ())
            os.write(write, (",".join(str(s.pid) for s in left) + "|" + left[0].command + "\n").encode())
            os._exit(0)
        except BaseException:
            os._exit(1)
    with os.fdopen(read) as answers:
        os.close(write)
        orphan = int(answers.readline())
        killed, command = answers.readline().strip().split("|")
    os.waitpid(child, 0)
    assert killed == str(orphan)
    assert command == "sleep 30"
    _wait_gone(orphan)


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.05)
    assert not _alive(pid), f"pid {pid} still alive"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status", "rb") as stream:
            return b"State:\tZ" not in stream.read()
    except FileNotFoundError:
        return False


def test_a_process_already_dying_of_sigkill_is_not_a_survivor() -> None:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        os.kill(process.pid, signal.SIGSTOP)  # stopped: the SIGKILL stays pending while we look
        os.kill(process.pid, signal.SIGKILL)
        assert descendants._dying(process.pid)
    finally:
        process.kill()
        process.wait()


def test_a_process_inside_its_exec_is_waited_for_and_a_zombie_is_not(tmp_path: Path) -> None:
    """Inside ``execve``, after its close-on-exec descriptors closed (its parent's ``Popen``
    returned) and before the new program's arguments are laid out, a process's command line
    reads empty. A tie listed there twice in a row (its relay just killed) was stopped and
    named "?": a false no_effect_after_death of a correct agent, once in a full run."""
    stat = "4242 (python) {state} 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 1 1 1\n"
    (tmp_path / "4242").mkdir()
    for command, state, resolving in (
        (b"", "R", True),  # mid-exec
        (b"", "Z", False),  # a zombie: dying, the settle's other test
        (b"python\0-c\0" + descendants.TIE_MARK + b"\0", "S", True),  # the tie before its exec
        (b"sleep\x0030\0", "S", False),  # a program running: a survivor if left
    ):
        (tmp_path / "4242" / "cmdline").write_bytes(command)
        (tmp_path / "4242" / "stat").write_text(stat.format(state=state))
        assert descendants._resolving(4242, proc=str(tmp_path)) is resolving, (command, state)
    assert descendants._resolving(os.getpid()) is False


def test_a_process_the_kernel_is_tearing_down_is_dying_not_a_survivor(tmp_path: Path) -> None:
    """Its SIGKILL already taken (no longer pending), not a zombie yet: PF_EXITING in its
    flags. A node MCP server killed with its relay sat there long enough to be listed as a
    survivor of a correct agent (no_effect_after_death, a false red)."""
    stat = "4242 (node) R 1 4242 4242 0 -1 {flags} 0 0 0 0 0 0 0 0 20 0 1 0 1 1 1\n"
    status = "Name:\tnode\nState:\tR (running)\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\n"
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "status").write_text(status)
    for flags, exiting in ((0x40400104, True), (0x40400100, False)):  # PF_EXITING is 0x4
        (tmp_path / "4242" / "stat").write_text(stat.format(flags=flags))
        assert descendants._dying(4242, proc=str(tmp_path)) is exiting
    assert descendants._dying(os.getpid()) is False


_CHILD = """
import os, subprocess, sys
heavy, tie = int(sys.argv[1]), sys.argv[2]
ballast = b"x" * (heavy << 20)  # MiB its exit must free: a slow death, as a big relay's
child = subprocess.Popen([sys.executable, "-I", "-S", "-c", tie, str(os.getpid()), *sys.argv[3:]])
print(child.pid, flush=True)
os.read(0, 1)  # until killed
"""


def test_a_chain_dying_by_parent_death_signals_leaves_no_survivor() -> None:
    """A life, the agent it started, the MCP relay the agent started, the real server the
    relay started (four levels): each tied to its parent (PR_SET_PDEATHSIG), handed to the subreaper only as
    the one above it exits. The search waits for the whole chain; the roots it saw first were
    zombies by then, and the server, not yet signalled, was named a survivor of a correct agent."""
    from crashmatrix.harness.agents.mcp_upstream import _EXEC_TIED

    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's side
        try:
            descendants.become_subreaper()
            # "life" -> "relay" -> "server" (sleep): each level a python that starts the next
            # through the tie and prints its pid; the server prints nothing.
            server = ["sleep", "30"]
            relay = [sys.executable, "-c", _CHILD, "400", _EXEC_TIED, *server]
            agent = [sys.executable, "-c", _CHILD, "0", _EXEC_TIED, *relay]
            life = subprocess.Popen(
                [sys.executable, "-c", _CHILD, "0", _EXEC_TIED, *agent],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            assert life.stdout is not None
            # Each level prints the pid it started (one stdout, inherited): the chain is whole.
            *_, server_pid = (int(life.stdout.readline()) for _ in range(3))
            life.kill()
            life.wait()
            left = descendants.kill_adopted(os.getpid(), (life.pid,))
            os.write(write, (f"{server_pid}|" + ",".join(s.command for s in left) + "\n").encode())
            os._exit(0)
        except BaseException:
            os._exit(1)
    with os.fdopen(read) as answers:
        os.close(write)
        line = answers.readline().strip()
    os.waitpid(child, 0)
    server_pid, survivors = line.split("|")
    assert survivors == "", survivors
    _wait_gone(int(server_pid))


def test_the_tie_before_its_exec_is_waited_for_not_named() -> None:
    """crashmatrix's tie (the ``python -c`` that arms PR_SET_PDEATHSIG, then execs the real
    server) orphaned before its exec -- the relay killed while starting its server -- exits
    by itself a moment later; the search waits for it. Named, it was a false
    no_effect_after_death of a correct agent (seen once in twenty runs of the chain above)."""
    from crashmatrix.harness.agents.mcp_upstream import _EXEC_TIED

    assert descendants.TIE_MARK in _EXEC_TIED.encode()  # the mark is the tie's own text
    # A stand-in held before its exec for a while (the real one's window is a few ms).
    slow_tie = "import time; time.sleep(0.5)\n" + _EXEC_TIED
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's side
        try:
            descendants.become_subreaper()
            middle = subprocess.Popen(
                [sys.executable, "-c", _CHILD, "0", slow_tie, "sleep", "30"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            assert middle.stdout is not None
            int(middle.stdout.readline())
            middle.kill()
            middle.wait()
            left = descendants.kill_adopted(os.getpid(), (middle.pid,))
            os.write(write, (",".join(s.command for s in left) + "\n").encode())
            os._exit(0)
        except BaseException:
            os._exit(1)
    with os.fdopen(read) as answers:
        os.close(write)
        survivors = answers.readline().strip()
    os.waitpid(child, 0)
    assert survivors == "", survivors
