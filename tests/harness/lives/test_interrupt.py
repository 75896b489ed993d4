"""An interrupted ``pytest scenarios/ -n 2`` leaves no process behind.

The run is started with a unique environment marker that every process it creates inherits
(xdist workers, forkservers, agent lives); after the interrupt, the process table must hold
no process with that marker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from crashmatrix.reports.results import load_results

pytestmark = pytest.mark.slow

SCENARIO = """\
name: email_once
tools: [send_email]
turns: ["Send the invoice"]
recovery_crashes: false
model:
  - when: {role: user}
    reply:
      tool_calls:
        - {id: call_1, name: send_email, arguments: {to: a@example.com, subject: Invoice, body: hi}}
  - when: {tool: send_email}
    reply: {content: "Handled."}
"""


def _marked(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in environ and state != "Z":
            found.append(int(entry.name))
    return found


# SIGKILL: the harness dies without any cleanup (a CI timeout); only the lives' own
# parent-death signal stands between that and orphaned agent processes (harness/lives/parent_death.py).
def _lives(marker: str) -> list[int]:
    marked = _marked(marker)
    servers = {pid for pid in marked if b"forkserver" in _cmdline(pid)}
    return [pid for pid in marked if pid not in servers and _parent(pid) in servers] + [
        pid for pid in servers if _parent(pid) in servers
    ]


def _describe(marker: str) -> list[str]:
    """What each process left is doing (for a failure message): pid, parent, process group,
    state, kernel wait, blocked/ignored/caught signal masks, command."""
    out = []
    for pid in _marked(marker):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            wchan = Path(f"/proc/{pid}/wchan").read_text()
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
        except OSError:
            continue
        masks = " ".join(
            line.replace("\t", "") for line in status if line.startswith(("SigBlk", "SigIgn", "SigCgt"))
        )
        command = _cmdline(pid).replace(b"\0", b" ")[:60].decode(errors="replace")
        out.append(f"{pid} ppid={fields[1]} pgid={fields[2]} {fields[0]} {wchan} {masks} {command}")
    return out


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


@pytest.mark.parametrize(
    "signum", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "SIGKILL"]
)
def test_an_interrupted_parallel_run_leaves_no_process_behind(tmp_path: Path, signum: int) -> None:
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "email.yaml").write_text(SCENARIO, encoding="utf-8")
    marker = f"CRASHMATRIX_INTERRUPT_TEST={uuid.uuid4().hex}"
    env = dict(os.environ, CRASHMATRIX_INTERRUPT_TEST=marker.split("=", 1)[1])
    # The hanging mutant blocks forever after a torn write: lives that only a deadline ends.
    command = [
        sys.executable,
        "-m",
        "pytest",
        "scenarios",
        "-n",
        "2",
        "-p",
        "no:cacheprovider",
        "--agent=crashmatrix.reference_agent.mutants:torn_tail_blocks_forever",
        "--crash-boundary=torn_write",
        "--case-deadline=120",
    ]
    # SIGINT at its default, as a terminal gives it, however this suite was started: a
    # background job of a script inherits SIGINT ignored, and so would the run (and then a
    # Ctrl-C to its group rightly does nothing).
    reset = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    run = subprocess.Popen(
        [sys.executable, "-c", reset, *command],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, as a terminal or a CI runner gives it
    )
    try:
        deadline = time.monotonic() + 90
        # Wait until agent lives are running (a marked process whose parent is a marked
        # forkserver), so the interrupt lands mid-case with lives that only a deadline ends.
        # A life that is still there a second later is a hung one (life 1 kills itself at
        # the torn write within milliseconds; life 2 of this mutant never returns).
        hung: set[int] = set()
        while not hung and time.monotonic() < deadline:
            before = set(_lives(marker))
            time.sleep(1.0)
            hung = before & set(_lives(marker))
        assert hung, "the run never reached a hung agent life"
        if signum == signal.SIGKILL:
            # The whole harness dies at once (controller and xdist workers), as under a CI
            # timeout: no worker is left to clean up, only forkservers and lives remain.
            for pid in _marked(marker):
                if b"forkserver" not in _cmdline(pid):
                    os.kill(pid, signal.SIGKILL)
        else:
            # Ctrl-C in a terminal and a cancelled CI job signal the whole process group.
            os.killpg(run.pid, signum)
        try:
            run.wait(timeout=120)  # slow on a loaded machine (once 45 s); a deadlock never ends
        except subprocess.TimeoutExpired:
            pytest.fail(f"the interrupted run did not end within 120 s; still running: {_describe(marker)}")
    finally:
        if run.poll() is None:
            run.kill()
    if signum != signal.SIGKILL:
        # An orderly stop writes what ran, marked: never nothing, never a matrix that looks whole.
        results = load_results(tmp_path / "reports" / "latest" / "matrix.json")
        assert results.incomplete
    grace = time.monotonic() + 30  # a loaded machine reaps slowly; a leak never goes away
    while _marked(marker) and time.monotonic() < grace:
        time.sleep(0.2)
    assert _marked(marker) == []
