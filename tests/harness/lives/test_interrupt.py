"""An interrupted ``pytest scenarios/ -n 2`` leaves no process behind.

The run is started with a unique environment marker that every process it creates inherits
(xdist workers, forkservers, agent lives); after the interrupt, the process table must hold
no process with that marker.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from crashmatrix.reports.results import load_results

from ...pytest_runs import OTHER_PLUGINS_OFF
from ...scenario_data import email_once
from ...waiting import texts_under, wait_until

pytestmark = pytest.mark.slow

SCENARIO = email_once(recovery_crashes=False)
CASE_DEADLINE = 120.0  # per life: the hung lives outlive the test unless the interrupt stops them


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


def _hung_lives(basetemp: Path, marker: str) -> set[int]:
    """Second lives still running: this mutant's second life of a torn-write case blocks for
    ever once it has set the torn line aside (each life records its pid in the trace)."""
    seconds = set()
    # Walked while the run makes and removes case directories: what vanishes is skipped.
    for trace in texts_under(basetemp, "trace.jsonl"):
        for line in trace.splitlines():
            with contextlib.suppress(ValueError):  # a line cut by the SIGKILL that followed it
                event = json.loads(line)
                if event.get("event") == "start" and event.get("life", 1) >= 2:
                    seconds.add(event["pid"])
    return seconds & set(_lives(marker))


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
    tmpdir = tmp_path / "tmp"  # the run's own $TMPDIR: what crashmatrix leaves there is seen
    tmpdir.mkdir()
    env = dict(
        os.environ,
        CRASHMATRIX_INTERRUPT_TEST=marker.split("=", 1)[1],
        PYTHONUNBUFFERED="1",
        TMPDIR=str(tmpdir),
    )
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
        "-v",  # the controller prints each case it has recorded
        # The controller imports the report modules when the first case reports, after the
        # line above is printed; an interrupt during that import (~0.3 s) loses the whole
        # report (a harness race, harness/front/plugin.py). Imported at start, so this test
        # interrupts as soon as a case is recorded and still checks the orderly stop.
        "-p",
        "crashmatrix.reports.collector",
        *OTHER_PLUGINS_OFF,  # the dev venv's unrelated plugins: ~1.1 s of CPU per interpreter
        "--agent=crashmatrix.reference_agent.mutants:torn_tail_blocks_forever",
        "--crash-boundary=torn_write",
        f"--case-deadline={CASE_DEADLINE}",
        f"--basetemp={tmp_path / 'basetemp'}",  # where the case directories are
    ]
    # SIGINT at its default, as a terminal gives it, however this suite was started: a
    # background job of a script inherits SIGINT ignored, and so would the run (and then a
    # Ctrl-C to its group rightly does nothing).
    reset = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    log = tmp_path / "run.log"  # what the run printed, for a failure message
    with log.open("wb") as out:
        run = subprocess.Popen(
            [sys.executable, "-c", reset, *command],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a terminal or a CI runner gives it
        )
    try:
        # The interrupt must land mid-case, with lives that only a deadline ends (a second
        # life of this mutant: life 1 kills itself at the torn write), after the controller
        # has recorded a case (the clean one), so that there is something to report. Any
        # run gets there long before a case could end at its deadline.
        def mid_case() -> set[int]:
            recorded = re.search(r"^\[gw\d\] .*(PASSED|FAILED) ", log.read_text(), flags=re.MULTILINE)
            return _hung_lives(tmp_path / "basetemp", marker) if recorded else set()

        hung = wait_until(mid_case, within=CASE_DEADLINE)
        assert hung, f"the run never recorded a case and reached a hung life:\n{log.read_text()[-2000:]}"
        if signum == signal.SIGKILL:
            # The whole harness dies at once (controller and xdist workers), as under a CI
            # timeout: no worker is left to clean up, only forkservers and lives remain.
            # Named before any is killed: a killed worker takes its fork server and lives with
            # it (parent death), and a process in exit has an empty command line, so a walk
            # that kills as it goes misnames those as harness processes and signals them after
            # they were reaped (ProcessLookupError). Any may still end on its own meanwhile.
            harness = [pid for pid in _marked(marker) if b"forkserver" not in _cmdline(pid)]
            for pid in harness:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        else:
            # Ctrl-C in a terminal and a cancelled CI job signal the whole process group.
            os.killpg(run.pid, signum)
        # Slow on a loaded machine (once 45 s), but an interrupted run that waits for its
        # hung lives' deadline did not stop them: it must end before that deadline.
        try:
            run.wait(timeout=CASE_DEADLINE)
        except subprocess.TimeoutExpired:
            still = _describe(marker)
            pytest.fail(
                f"the interrupted run did not end within {CASE_DEADLINE:.0f} s; still running: {still}"
            )
    finally:
        if run.poll() is None:
            run.kill()
    if signum != signal.SIGKILL:
        # An orderly stop writes what ran, marked: never nothing, never a matrix that looks whole.
        results = load_results(tmp_path / "reports" / "latest" / "matrix.json")
        assert results.incomplete
    # A loaded machine reaps slowly; a leaked life is still there after its own deadline.
    assert wait_until(lambda: not _marked(marker), within=CASE_DEADLINE), _describe(marker)
    # Nothing of crashmatrix is left in $TMPDIR, however the run ended: the fork servers listen
    # on abstract sockets (no file), and the rest is removed or lives under the basetemp.
    left = sorted(p.name for p in tmpdir.iterdir())
    assert left == [], f"left in $TMPDIR after {signal.Signals(signum).name}: {left}"
