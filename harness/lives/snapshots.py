"""One clean life, a first crash at every boundary it passes (issue 31).

A crash point's first crash is life 1 SIGKILLed at that point. Run once per point, the
prefix up to it is run again for every point of the scenario (~1.9 lives a case). Instead,
the clean life of a scenario stops at each crash point it passes (each ``CrashPoint`` the
enumeration makes of its trace: boundary, call, occurrence, a torn write's label), and
forks: the child copies the case directory and is SIGKILLed right there, a real process
death at P, while the life waits for it. A SIGKILL loses nothing the agent handed to the
operating system (the page cache survives it), so the files as they are at that instant
ARE what a life killed at P leaves; the copy's trace gets the ``crash`` line the dying life
writes, and a torn write its half line, synced. The harness then reads each copy as the
case stopped after a life that crashed at P (``FirstCrashes``: ``first_crash`` and
``run_case(resume=)`` take it as they take a killed life 1), so recovery lives, power
cuts and verdicts downstream are unchanged. ``tests/harness/lives/test_snapshots.py`` and
``benchmarks/snapshot_equivalence.py`` run the built-in suite and the mutants both ways and
compare every verdict.

The copy is made in the child, not in the life: a process that opens and closes a file
drops every POSIX lock it holds on it, SQLite's included (the world's database is open in
the life); the child holds none.

Where a snapshot could not be faithful, the point is not snapshotted and its first crash
runs as before (a life killed at P), with the reason in the manifest:

* a process the life started is alive at the boundary (a ``run_command`` child inside its
  effect, a kind-3 agent that is not stopped): a SIGKILL of the life would end its tie
  with it, and it goes on writing while the copy is made. A kind-3 agent is the exception
  where it is stopped at its edge with no process of its own but the launchers of the
  life's MCP relay server (``harness.lives.helper_processes``): it acts no more than a
  killed one. That server and its relays (``harness.agents.mcp_warm``) are stopped for the
  copy and continued after it: they die with the life and act only through it; in proxy
  mode (a relay with the team's server as its child, which outlives a kill) the point is a
  killed life's;
* another thread of the life is running at the boundary, besides the harness's quiet ones
  (``harness.lives.threads``): a kill stops every thread at once, a pause only the one at
  the boundary, so the others may write while the copy is made. A harness thread caught
  acting (a handler that sent its answer, not yet returned) is waited for, up to
  ``SETTLE_DEADLINE``; an agent's own thread is not. A kind-2 agent's own
  threads, and the agent's thread itself where the boundary is passed in the loopback
  server's (the model's reply, a service's effect), leave their points to killed lives;
* the case keeps a store on a PostgreSQL server (``postgres.json``): not a file to copy.

And a whole agent is left on the plain path (``unfaithful``): agents whose adapter does not
declare ``snapshots = True`` (the reference agent, kind-2 and kind-3 agents do), agents that run a
message's calls at once (``concurrent_calls``), spawned lives (``isolation: spawn``).

With ``record_syncs`` (the power column) the clean life records its fsyncs
(``harness.lives.power``); each copy takes the recording with it, its files' identities
renamed to the copy's inodes (the recording names files by inode), so ``power@P`` cuts its
power loss into the snapshot exactly as into a killed life 1.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import time
import traceback
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.boundaries import CrashPoint
from crashmatrix.harness.core.torn_fragments import torn_event

# At the top, not where used: the child that copies the case imports nothing (a forked
# child compiling and running a module it needs paid ~10-30 ms a snapshot), and the fork
# server preloads this module (``injector.PRELOAD``), so a clean life does not either.
from crashmatrix.harness.lives import postgres
from crashmatrix.harness.lives.descendants import state
from crashmatrix.harness.lives.helper_processes import SERVERS, is_gone, is_launcher, live_children
from crashmatrix.harness.lives.parent_death import die_with_parent
from crashmatrix.harness.lives.power import RECORD_DIR, SYNC_LOG, _identity
from crashmatrix.harness.lives.threads import GATE, settled

__all__ = ["MANIFEST", "WINDOW", "WINDOW_TORN", "Snapshotter", "unfaithful"]

# Beside the snapshot directories: one line per crash point the clean life passed.
MANIFEST = "snapshots.jsonl"
# A recovering life's snapshots (``LifeSpec.snapshot_window``): only the points of its
# recovery window, each the second crash of ``recovery@P`` there; with torn writes or not.
WINDOW = "window"
WINDOW_TORN = "window+torn"


def _append(path: Path, record: Mapping[str, Any]) -> None:
    """One line in one ``write()``: it survives a kill of the life that follows."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(record) + "\n").encode("utf-8"))
    finally:
        os.close(fd)


_IDENTITY = re.compile(r'"(\d+(?:\.\d+)?)"')


def _copy_case(source: Path, copy: Path) -> None:
    """The case directory as it is now. The power recording's copies of synced files are
    written once each and never changed (``power._Recorder._copy``): linked, not copied, so
    a snapshot costs the same at the last point as at the first (the recording grows with
    every sync of the life)."""
    record = source / RECORD_DIR
    shutil.copytree(
        source, copy, symlinks=True, ignore=lambda where, names: [RECORD_DIR] if Path(where) == source else []
    )
    if not record.is_dir():
        return
    (copy / RECORD_DIR).mkdir()
    log = Path(SYNC_LOG).name
    for entry in os.scandir(record):
        target = copy / RECORD_DIR / entry.name
        if entry.name != log and entry.is_file(follow_symlinks=False):
            os.link(entry.path, target)
        elif entry.is_dir(follow_symlinks=False):
            shutil.copytree(entry.path, target, symlinks=True)
        else:
            shutil.copy2(entry.path, target, follow_symlinks=False)


def _rename_identities(source: Path, copy: Path) -> None:
    """The power recording names files by identity (inode and birth time); in ``copy``,
    rewritten to the copy's files, path by path, so ``cut_power`` finds them there. Only
    the recording's roots are walked (its start line names them): nothing else is named."""
    log = copy / SYNC_LOG
    if not log.exists():
        return
    text = log.read_text(encoding="utf-8")
    start = json.loads(text.partition("\n")[0])
    renamed: dict[str, str] = {}
    for root in start.get("roots", ()):
        top = source / str(root["path"])
        with contextlib.suppress(OSError):
            renamed[_identity(top)] = _identity(copy / str(root["path"]))
        for here, dirs, files in os.walk(top):
            for name in (*dirs, *files):
                old = Path(here) / name
                with contextlib.suppress(OSError):  # gone from the copy: nothing to name
                    renamed[_identity(old)] = _identity(copy / old.relative_to(source))
    log.write_text(
        _IDENTITY.sub(lambda m: f'"{renamed.get(m.group(1), m.group(1))}"', text), encoding="utf-8"
    )


def _all_stopped(pid: int) -> bool:
    """Stopped by a signal, every thread of it: a kind-3 agent at its edge
    (``harness.agents.supervised._stopped``). It writes nothing while the copy is made, and a
    kill of the life leaves it as it is now (the kernel SIGKILLs it with the life)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    return all(state(int(task)) == b"T" for task in tasks)


# How long a paused helper may take to stop (it is waiting on the life or its agent).
PAUSE_DEADLINE = 2.0
# How long a point waits for the harness's threads caught acting to be quiet again
# (``harness.lives.threads.settled``): milliseconds on a quiet machine, more when it is loaded.
SETTLE_DEADLINE = 2.0


def _survey() -> tuple[str, list[int]]:
    """The life's processes at this boundary: why a copy made now would not be what a kill
    leaves ("" when it would), and the harness's relay servers to stop while it is made.

    A child of the life may act while a copy is made unless it is stopped (a kind-3 agent
    at its edge) or the harness's own relay server. A stopped child with processes of its
    own is left to a killed life too: those may not have stopped with it (another group),
    and a kill leaves them running, found as survivors by the next life; the exception is
    the launchers of the life's relay server, which die with their agent."""
    servers: list[int] = []
    running = parents = 0
    for pid in live_children(os.getpid()):
        if pid in SERVERS:
            if any(live_children(relay) for relay in live_children(pid)):
                # Proxy mode: the team's server is the relay's child, in a session of its
                # own; it outlives a kill until it reads end of file, and may act till then.
                return "an MCP relay had a server of its own at the boundary (proxy mode)", []
            servers.append(pid)
        elif not _all_stopped(pid):
            running += 1
        elif not all(is_launcher(child) for child in live_children(pid)):
            parents += 1
    if running:
        return f"processes the life started were running at the boundary ({running})", []
    if parents:
        return f"a process the life started had processes of its own at the boundary ({parents})", []
    return "", servers


def _pause(servers: Sequence[int]) -> tuple[list[int], bool]:
    """SIGSTOP the relay servers, then their relays (a stopped server forks no more), each
    waited until it is stopped (kill() only queues the signal): the processes this stopped,
    to continue afterwards, and whether all of them stopped in time."""
    stopped: list[int] = []
    deadline = time.monotonic() + PAUSE_DEADLINE

    def stop(pids: Sequence[int]) -> bool:
        for pid in pids:
            if not _all_stopped(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
                    stopped.append(pid)
        while not all(_all_stopped(pid) or is_gone(pid) for pid in pids):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0002)
        return True

    still = stop(servers) and stop([relay for server in servers for relay in live_children(server)])
    return stopped, still


def _resume(pids: Sequence[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


class Snapshotter:
    """Inside the clean life: at each crash point, a copy of the case directory made by a
    child killed there (see the module docstring). ``into`` gets the copies (``0001``, ...)
    and the manifest."""

    def __init__(self, case_dir: Path, into: Path, life: int, window: str = "") -> None:
        self.case_dir = case_dir
        self.into = into
        self.life = life
        self.started = time.monotonic()
        self.count = 0
        # "" every point; WINDOW / WINDOW_TORN: only the points ``recovery_window`` would
        # name in this life's trace (see ``in_window``).
        self.window = window
        self.asked = False
        self.before_asking = 0  # window points passed before the life first asked its model
        into.mkdir(parents=True, exist_ok=True)

    def model_request(self) -> None:
        self.asked = True

    def in_window(self, torn: bool) -> bool:
        """Whether this point is one of the life's recovery window, decided as it is passed,
        by the rule ``harness.plan.enumeration.recovery_window`` applies to the whole trace
        afterwards: its boundaries (and with WINDOW_TORN its appends) before it first asked
        the model; all of them when it asked before passing any."""
        if torn and self.window != WINDOW_TORN:
            return False
        if self.asked and self.before_asking:
            return False
        if not self.asked:
            self.before_asking += 1
        return True

    def why_not(self) -> str:
        """Why a copy made now would not be the state a kill leaves ("" when it would)."""
        return self._survey()[0]

    def _survey(self) -> tuple[str, list[int]]:
        """``why_not``, and the harness's relay servers to stop while the copy is made."""
        if (self.case_dir / postgres.RECORD).exists():
            return "the case keeps a store on a PostgreSQL server: no file to copy at the boundary", []
        why, servers = _survey()
        if why:
            return why, []
        threads = settled(SETTLE_DEADLINE)
        if threads:
            # A kill stops them all; a copy made while they run is not what it leaves.
            return (
                f"other threads of the life were running at the boundary ({threads})"
                if threads > 0
                else "the life's threads cannot be counted here (/proc/self/task)"
            ), []
        return "", servers

    def take(self, point: CrashPoint, tear: tuple[Path, bytes] | None = None) -> None:
        if self.window and not self.in_window(tear is not None):
            return
        self.count += 1
        with GATE:  # no handler thread of the loopback server starts until the copy is made
            self._take(point, f"{self.count:04d}", tear)

    def _take(self, point: CrashPoint, name: str, tear: tuple[Path, bytes] | None) -> None:
        why, servers = self._survey()
        if why:
            _append(self.into / MANIFEST, {"point": point.id, "skipped": why})
            return
        stopped, still = _pause(servers)
        try:
            if not still:
                why = f"the life's MCP relays did not stop within {PAUSE_DEADLINE:g} s"
                _append(self.into / MANIFEST, {"point": point.id, "skipped": why})
                return
            self._copy(point, name, tear)
        finally:
            _resume(stopped)

    def _copy(self, point: CrashPoint, name: str, tear: tuple[Path, bytes] | None) -> None:
        copy = self.into / name
        crash = (json.dumps({"life": self.life, "event": "crash", "point": point.id}) + "\n").encode()
        parent = os.getpid()
        with warnings.catch_warnings():
            # Python 3.12+ warns on a fork with threads: the harness's quiet ones are
            # waiting in C (select, recv) holding nothing the child's copy needs.
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child dies by SIGKILL; tested through its copies
            try:
                die_with_parent(parent)
                _copy_case(self.case_dir, copy)
                _rename_identities(self.case_dir, copy)
                torn = b""
                if tear is not None:  # the dying writer's half line, as Tracer.before_append tears it
                    path, line = tear
                    fd = os.open(copy / path.relative_to(self.case_dir), os.O_WRONLY | os.O_APPEND)
                    fragment = line[: max(1, len(line) // 2)]
                    where = str(path.relative_to(self.case_dir))
                    size = os.fstat(fd).st_size
                    event = torn_event(self.life, point.tool_call_id, point.label, where, size, fragment)
                    torn = (json.dumps(event) + "\n").encode()
                    os.write(fd, fragment)
                    os.fsync(fd)
                    os.close(fd)
                fd = os.open(copy / "trace.jsonl", os.O_WRONLY | os.O_APPEND)
                os.write(fd, torn + crash)
                os.kill(os.getpid(), signal.SIGKILL)
            except BaseException:
                with contextlib.suppress(Exception):
                    (self.into / f"{name}.error").write_text(traceback.format_exc(), encoding="utf-8")
            os._exit(1)
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        seconds = time.monotonic() - self.started
        _append(self.into / MANIFEST, {"point": point.id, "dir": name, "exitcode": code, "seconds": seconds})


def unfaithful(adapter: object, isolation: str) -> str:
    """Why this agent's first crashes are not taken from snapshots ("" when they are)."""
    if isolation != "fork":
        return "spawned lives (isolation: spawn)"
    if getattr(adapter, "concurrent_calls", False):
        return "the agent runs a message's calls at once: a pause stops one thread, a kill all"
    if not getattr(adapter, "snapshots", False):
        return f"adapter {getattr(adapter, 'name', '?')} does not declare snapshots = True"
    return ""
