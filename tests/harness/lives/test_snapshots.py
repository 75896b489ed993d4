"""Issue 31's proof: first crashes from one clean life's snapshots give the verdicts that lives
killed at each point give, case by case (``harness.lives.snapshots``).

Two runs of ``pytest SCENARIOS`` in this process, with and without ``--no-snapshots``: every
case of one is a case of the other with the same status, the same failed invariants and
expectation keys, the same observed outcome, ledger, codes and world, and the same number of
lives. ``SLICE`` is a deterministic slice of the built-in suite for CI's time (every column:
boundaries, torn writes, power loss, recovery; a multi-step effect, a command, two calls in
one message, approvals, a fault); ``benchmarks/snapshot_equivalence.py`` runs the whole suite
and every mutant's kill matrix both ways with ``compare`` from here.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crashmatrix.harness.core.boundaries import TORN_WRITE, CrashPoint, parse_point
from crashmatrix.harness.input.suite import BUILTIN_SUITE
from crashmatrix.harness.lives import helper_processes, postgres, snapshots, threads
from crashmatrix.harness.lives.snapshots import MANIFEST, WINDOW, WINDOW_TORN, Snapshotter, unfaithful
from crashmatrix.harness.plan.enumeration import recovery_window
from crashmatrix.reports.results import CaseRecord, Results, load_results

from ...pytest_runs import run_inprocess

pytest_plugins = ["pytester"]

SLICE = (
    "create_order/keyed_once.yaml",
    "write_file/write_file_recovery.yaml",
    "run_command/compound_two_appends.yaml",
    "multi_call/two_calls_one_message.yaml",
)


# ``atomic_write``'s temporary file is named at random (``tempfile``): a crash inside the
# write leaves it under a name no two runs share.
_TEMPORARY = re.compile(r"\.[A-Za-z0-9_]{8}\.tmp\b")


def verdict_of(case: CaseRecord) -> dict[str, Any]:
    """What must be the same with and without snapshots: a case's verdict and what it saw."""
    observed = _TEMPORARY.sub(".XXXXXXXX.tmp", json.dumps(case.observed, sort_keys=True, default=str))
    return {
        "status": case.status,
        "lives": case.lives,
        "violations": sorted(str(v.get("invariant")) for v in case.violations),
        "mismatches": sorted(str(m.get("field")) for m in case.mismatches),
        "observed": json.loads(observed),
        "recovery": sorted((str(p.get("point")), str(p.get("status"))) for p in case.recovery_points),
    }


def _key(case: CaseRecord) -> str:
    """A case by its scenario file's name and its id, wherever the file was."""
    return f"{Path(case.node_id.partition('::')[0]).name}::{case.point}"


def compare(
    plain: Results,
    snapshots: Results,
    *,
    runs: tuple[str, str] = ("plain", "snapshot"),
    said: tuple[str, str] = ("without snapshots", "with"),
    leave_out: tuple[str, ...] = (),
) -> list[str]:
    """Every case whose verdict differs between the two runs, one line each (pure). ``runs``
    and ``said`` name the two runs in the lines; ``leave_out``: parts of ``verdict_of`` not
    compared, by dotted path (``observed``; ``observed.world.files``, the contents of an
    agent that writes wall-clock times or random names into its files)."""
    ours = {_key(case): _without(verdict_of(case), leave_out) for case in plain.cases}
    theirs = {_key(case): _without(verdict_of(case), leave_out) for case in snapshots.cases}
    out: list[str] = []
    for node in sorted(ours.keys() | theirs.keys()):
        a, b = ours.get(node), theirs.get(node)
        if a is None or b is None:
            out.append(f"{node}: only in the {runs[0] if b is None else runs[1]} run")
            continue
        differs = [key for key in a if a[key] != b[key]]
        if differs:
            line = "; ".join(f"{key}: {a[key]!r} {said[0]}, {b[key]!r} {said[1]}" for key in differs)
            out.append(f"{node}: {line}"[:600])
    return out


def _without(verdict: dict[str, Any], paths: tuple[str, ...]) -> dict[str, Any]:
    """``verdict`` without the parts ``paths`` name (``a.b.c``); a path not there is no error."""
    out = json.loads(json.dumps(verdict, default=str))
    for path in paths:
        *parents, last = path.split(".")
        here: Any = out
        for name in parents:
            here = here.get(name) if isinstance(here, dict) else None
        if isinstance(here, dict):
            here.pop(last, None)
    return out


def run(pytester: pytest.Pytester, name: str, scenarios: list[Path], *args: str) -> Results:
    folder = pytester.path / name
    folder.mkdir()
    for path in scenarios:
        (folder / path.name).write_bytes(path.read_bytes())
    report = pytester.path / f"report-{name}"
    result = run_inprocess(
        pytester,
        *(str(folder / p.name) for p in scenarios),
        "-p",
        "no:cacheprovider",
        "--no-doctor",
        f"--report-dir={report}",
        f"--basetemp={pytester.path / f'tmp-{name}'}",
        *args,
    )
    results = load_results(report / "matrix.json")
    assert results.cases, result.stdout.str()
    return results


@pytest.mark.slow
def test_snapshots_give_every_case_of_the_slice_the_verdict_a_killed_life_gives(
    pytester: pytest.Pytester,
) -> None:
    scenarios = [BUILTIN_SUITE / name for name in SLICE]
    # The tool-side columns start from no first crash: the same path both ways, left out.
    plain = run(pytester, "plain", scenarios, "--no-snapshots", "--no-tool-side-faults")
    snapshotted = run(pytester, "snapshots", scenarios, "--no-tool-side-faults")  # the default
    assert compare(plain, snapshotted) == []
    # It proves something: the snapshot run took its first crashes from snapshots (a manifest
    # per scenario, one copy per point it passed), and the slice has red cells too.
    found = list((pytester.path / "tmp-snapshots").rglob(MANIFEST))
    manifests = [m for m in found if m.parent.name == "snapshots"]
    assert len(manifests) == len(SLICE)
    # And every recovery@P item's second crashes from P's recovering life (its window's
    # snapshots, ``first_crash(window=)``), not from lives 2 run again to each point.
    windows = {
        (m.parent.parent.parent.name.rpartition("-")[0], m.parent.parent.name)
        for m in found
        if m.parent.name == "window"
    }
    recovering = {
        (Path(case.node_id.partition("::")[0]).stem, case.point.partition("@")[2])
        for case in snapshotted.cases
        if case.point.startswith("recovery@")
    }
    assert windows == recovering and len(recovering) > 5
    assert len(found) == len(SLICE) + len(windows)
    assert not list((pytester.path / "tmp-plain").rglob(MANIFEST))
    copies = [json.loads(line) for m in manifests for line in m.read_text().splitlines()]
    assert sum("dir" in c for c in copies) > 30
    assert len(plain.cases) > 100
    # Only the first crashes other items start from were published (run in the shared
    # directory): a point alone resumed from its snapshot in its own (``point_run``).
    published = {
        (p.parent.parent.name.rpartition("-")[0], p.parent.name)
        for p in (pytester.path / "tmp-snapshots").rglob("runs.json")
    }
    started_from = {
        (Path(case.node_id.partition("::")[0]).stem, case.point.partition("@")[2])
        for case in snapshotted.cases
        if case.point.partition("@")[0] in ("recovery", "power", "double")
    }
    assert published == started_from and len(published) > 10


DESK = Path(__file__).resolve().parents[3] / "examples" / "desk_agent"


@pytest.mark.slow
def test_a_kind_2_agent_gets_from_snapshots_the_verdicts_killed_lives_give(
    pytester: pytest.Pytester,
) -> None:
    """desk_agent is a team's unmodified Python agent (kind 2): its own session, outbox and
    orders database, found by probing; the model over the loopback server. Its lives run
    the loopback server's threads beside the agent's, so its snapshots rest on counting the
    life's threads at each point (``harness.lives.threads``)."""
    scenarios, agent = [DESK / "scenario.yaml"], f"--agent={DESK / 'adapter.yaml'}"
    plain = run(pytester, "plain", scenarios, agent, "--no-snapshots")
    snapshotted = run(pytester, "snapshots", scenarios, agent)
    assert compare(plain, snapshotted) == []
    entries = [
        json.loads(line)
        for manifest in (pytester.path / "tmp-snapshots").rglob(MANIFEST)
        for line in manifest.read_text().splitlines()
    ]
    taken = [e["point"] for e in entries if "dir" in e]
    skipped = {e["point"]: e["skipped"] for e in entries if "skipped" in e}
    # The points its own thread passes are copies. The model's reply is passed in the
    # loopback server's handler thread while the agent's thread runs on: a killed life's.
    assert len(taken) > len(entries) // 2 and len(plain.cases) > 40
    replies = {p: why for p, why in skipped.items() if p.startswith("after_model_reply")}
    assert replies and set(replies.values()) == {"other threads of the life were running at the boundary (1)"}
    assert not any(p.startswith("after_model_reply") for p in taken)


@pytest.mark.slow
def test_a_kind_3_agent_gets_from_snapshots_the_verdicts_killed_lives_give(pytester: pytest.Pytester) -> None:
    """blackbox_agent is a team's program run as a black box (kind 3): a process of its own,
    stopped at each of its edges (the model's reply, its services' effects) while the life
    decides. Its points are copied there, the model's reply included, so each case starts
    one agent process fewer. Its ``double@`` cases are left out: two lives at once on a
    session it holds no lease on race, and differ between any two runs without snapshots
    too (``benchmarks/repeatability.py --no-snapshots``)."""
    blackbox = DESK.parent / "blackbox_agent"
    scenarios, agent = [blackbox / "scenario.yaml"], f"--agent={blackbox / 'adapter.yaml'}"
    plain = run(pytester, "plain", scenarios, agent, "--no-snapshots", "-k", "not double")
    snapshotted = run(pytester, "snapshots", scenarios, agent, "-k", "not double")
    assert compare(plain, snapshotted) == []
    entries = [
        json.loads(line)
        for manifest in (pytester.path / "tmp-snapshots").rglob(MANIFEST)
        for line in manifest.read_text().splitlines()
    ]
    taken = {e["point"] for e in entries if "dir" in e}
    assert [e for e in entries if "skipped" in e] == []
    edges = ("after_model_reply", "after_running", "after_side_effect")
    assert {f"{edge}[call_order]" for edge in edges} <= taken


@pytest.mark.slow
def test_a_kind_3_mcp_agent_gets_from_snapshots_the_verdicts_killed_lives_give(
    pytester: pytest.Pytester,
) -> None:
    """tests/golden/mcp's agent calls its tools through the mcp SDK over stdio: its life runs
    the warm relay server, the agent's launcher and a relay beside the stopped agent. At
    its MCP edges (the relay's request arrived; the effect done, its response unread) they
    are stopped for the copy, so those points are copied too (each case one agent process
    fewer: ~1.3 s of importing the SDK and openai). Its ``double@`` cases are left out, as
    blackbox_agent's; the rest of send_once's matrix is the proof in
    ``benchmarks/snapshot_equivalence.py --agent tests/golden/mcp/adapter.yaml``."""
    desk_mcp = Path(__file__).resolve().parents[2] / "golden" / "mcp"
    scenarios, agent = (
        [BUILTIN_SUITE / "send_email" / "send_once.yaml"],
        f"--agent={desk_mcp / 'adapter.yaml'}",
    )
    only = ("-k", "(clean or after_running or after_side_effect) and not double and not recovery")
    plain = run(pytester, "plain", scenarios, agent, "--no-snapshots", *only)
    snapshotted = run(pytester, "snapshots", scenarios, agent, *only)
    assert compare(plain, snapshotted) == []
    entries = [
        json.loads(line)
        for manifest in (pytester.path / "tmp-snapshots").rglob(MANIFEST)
        for line in manifest.read_text().splitlines()
    ]
    assert [e for e in entries if "skipped" in e] == []
    taken = {e["point"] for e in entries if "dir" in e}
    assert {"after_running[call_mail]", "after_side_effect[call_mail]"} <= taken
    assert {case.point for case in snapshotted.cases} >= {
        "after_running[call_mail]",
        "after_side_effect[call_mail]",
    }


def _in_a_child(body: Callable[[], None]) -> None:
    """Run ``body`` in a forked child of this test (a process with no children of its own:
    the test process may have fork servers from earlier tests, which ``why_not`` would see)."""
    pid = os.fork()
    if pid == 0:
        try:
            body()
            code = 0
        except BaseException:
            traceback.print_exc()
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _case(tmp_path: Path) -> Path:
    case = tmp_path / "case"
    (case / "world" / "workspace").mkdir(parents=True)
    (case / "world" / "workspace" / "notes.txt").write_text("kept\n")
    (case / "trace.jsonl").write_text('{"life": 1, "event": "start"}\n')
    return case


def _manifest(into: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (into / MANIFEST).read_text().splitlines()]


def test_a_snapshot_is_the_case_directory_at_the_point_left_by_a_child_killed_there(tmp_path: Path) -> None:
    case, into = _case(tmp_path), tmp_path / "snapshots"
    session = case / "world" / "workspace" / "session.jsonl"
    session.write_bytes(b'{"line": 1}\n')

    def clean_life() -> None:
        snapshots = Snapshotter(case, into, 1)
        snapshots.take(parse_point("after_running[call_1]"))
        # What the life does after the point is no part of the point's snapshot.
        (case / "world" / "workspace" / "notes.txt").write_text("changed later\n")
        snapshots.take(
            parse_point("torn_write[call_1:succeeded]"), (session, b'{"line": 2, "pad": "xxxxxx"}\n')
        )

    _in_a_child(clean_life)
    first, torn = _manifest(into)
    assert first["point"] == "after_running[call_1]" and first["exitcode"] == -signal.SIGKILL
    copy = into / first["dir"]
    assert (copy / "world" / "workspace" / "notes.txt").read_text() == "kept\n"
    assert json.loads((copy / "trace.jsonl").read_text().splitlines()[-1]) == {
        "life": 1,
        "event": "crash",
        "point": "after_running[call_1]",
    }
    assert torn["exitcode"] == -signal.SIGKILL
    torn_copy = into / torn["dir"]
    assert (torn_copy / "world" / "workspace" / "notes.txt").read_text() == "changed later\n"
    written = (torn_copy / "world" / "workspace" / "session.jsonl").read_bytes()
    assert written.startswith(b'{"line": 1}\n{"line": 2,') and not written.endswith(b"\n")
    assert session.read_bytes() == b'{"line": 1}\n'  # the clean life's own file is whole


def test_a_snapshot_takes_the_power_recording_with_it_named_by_the_copy_s_inodes(tmp_path: Path) -> None:
    """``power@P`` cuts its loss into P's snapshot: the recording (files named by inode) must
    name the copy's files, and its copies of synced bytes come along (linked: written once)."""
    from crashmatrix.harness.lives.power import RECORD_DIR, SYNC_LOG, _identity, record_tree, roots_for

    case, into = _case(tmp_path), tmp_path / "snapshots"
    notes = case / "world" / "workspace" / "notes.txt"

    def clean_life() -> None:
        record_tree(case, roots_for(case, case / "world" / "workspace" / "session.jsonl"))
        with open(notes, "a") as stream:
            stream.write("synced\n")
            stream.flush()
            os.fsync(stream.fileno())
        Snapshotter(case, into, 1).take(parse_point("after_side_effect[call_1]"))

    _in_a_child(clean_life)
    copy = into / _manifest(into)[0]["dir"]
    synced = [json.loads(line) for line in (copy / SYNC_LOG).read_text().splitlines() if '"sync"' in line]
    assert [record["sync"] for record in synced] == [_identity(copy / "world" / "workspace" / "notes.txt")]
    assert (case / SYNC_LOG).read_text() != (copy / SYNC_LOG).read_text()  # the life's own is as it was
    kept = copy / RECORD_DIR / synced[0]["copy"]
    assert kept.read_text() == "kept\nsynced\n"
    assert os.stat(kept).st_ino == os.stat(case / RECORD_DIR / synced[0]["copy"]).st_ino


def test_a_point_passed_while_a_process_of_the_life_runs_is_left_to_a_killed_life(tmp_path: Path) -> None:
    """A child of the life alive at the boundary (a real shell's command, a kind-3 agent, an
    MCP server) goes on writing while a copy is made, and a kill of the life would end its
    tie with it: no snapshot there, and the manifest says why."""
    case, into = _case(tmp_path), tmp_path / "snapshots"

    def clean_life() -> None:
        read, write = os.pipe()
        helper = os.fork()
        if helper == 0:
            os.close(write)
            os.read(read, 1)  # alive until the life lets it go
            os._exit(0)
        os.close(read)
        Snapshotter(case, into, 1).take(parse_point("during_side_effect[call_1]"))
        os.close(write)
        os.waitpid(helper, 0)
        Snapshotter(case, into, 1).take(parse_point("after_side_effect[call_1]"))

    _in_a_child(clean_life)
    skipped, taken = _manifest(into)
    assert skipped == {
        "point": "during_side_effect[call_1]",
        "skipped": "processes the life started were running at the boundary (1)",
    }
    assert taken["exitcode"] == -signal.SIGKILL


def _copied_then_left(into: Path, copied: str, why: str) -> None:
    """The manifest of two points: ``copied`` by a child killed there, then
    ``after_running[call_1]`` left to a killed life for ``why``."""
    taken, skipped = _manifest(into)
    assert taken["point"] == copied and taken["exitcode"] == -signal.SIGKILL
    assert skipped == {"point": "after_running[call_1]", "skipped": why}


def _stopped_helper(with_own: bool) -> int:
    """A child of the life stopped by SIGSTOP, as a kind-3 agent is at its edge; with
    ``with_own``, with a process of its own (in its own group: it does not stop with it)."""
    ready_read, ready_write = os.pipe()
    helper = os.fork()
    if helper == 0:
        if with_own and os.fork() == 0:
            os.setsid()
            time.sleep(30)  # killed by the test once the point is passed
            os._exit(0)
        os.write(ready_write, b"x")
        time.sleep(30)
        os._exit(0)
    os.read(ready_read, 1)
    if with_own:
        while not (Path(f"/proc/{helper}/task/{helper}/children").read_text().split()):
            time.sleep(0.001)
    os.kill(helper, signal.SIGSTOP)
    os.waitid(os.P_PID, helper, os.WSTOPPED | os.WNOWAIT)
    return helper


def test_a_kind_3_agent_stopped_at_its_edge_is_copied_unless_it_has_processes_of_its_own(
    tmp_path: Path,
) -> None:
    """A kind-3 agent is a child of its life, stopped (SIGSTOP) while the life passes its edge:
    it acts no more than a killed one, so the point is copied. A process it started, in a
    group of its own, did not stop with it and outlives a kill: that point is a killed life's.
    Fails if ``why_not`` takes every child for a running one (no kind-3 point copied) or
    every stopped one as alone."""
    case, into = _case(tmp_path), tmp_path / "snapshots"

    def clean_life() -> None:
        for with_own, point in ((False, "after_model_reply[call_1]"), (True, "after_running[call_1]")):
            helper = _stopped_helper(with_own)
            try:
                Snapshotter(case, into, 1).take(parse_point(point))
            finally:
                own = [int(pid) for pid in Path(f"/proc/{helper}/task/{helper}/children").read_text().split()]
                for pid in (*own, helper):
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(helper, 0)

    _in_a_child(clean_life)
    _copied_then_left(
        into,
        "after_model_reply[call_1]",
        "a process the life started had processes of its own at the boundary (1)",
    )


def _spawned(code: str, **popen: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code], **popen)


def _until(ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not ready():
        assert time.monotonic() < deadline, "a test process did not start"
        time.sleep(0.005)


def _kids(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _argv(pid: int) -> list[str]:
    """The command line, ``[]`` while it reads empty: inside ``execve`` (a child ``Popen``
    just returned) it does, and a CI run under load saw it (an IndexError)."""
    return [part.decode() for part in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]]


def _letter(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def test_the_lifes_mcp_relays_are_stopped_for_the_copy_and_a_launcher_is_no_process_of_the_agents_own(
    tmp_path: Path,
) -> None:
    """A kind-3 MCP agent at its edge: stopped, its one child the launcher of the life's warm
    relay server (in a session of its own, as the mcp SDK starts a server), the server and
    its relay running. All die with the life, so the point is copied, with the server and
    the relay stopped while the copy is made and going on after it. A relay with a process
    of its own (proxy mode: the team's server, which outlives a kill) leaves the point to a
    killed life. Fails if the launcher counts as the agent's own process, if the relay
    server counts as a running child, or if they run on during the copy."""
    case, into = _case(tmp_path), tmp_path / "snapshots"
    launcher = [sys.executable, "-c", "import time; time.sleep(60)", "@crashmatrix-mcp-test"]

    def clean_life() -> None:
        during: dict[str, str] = {}
        after: dict[int, str] = {}
        copy_case = snapshots._copy_case

        def copying(source: Path, copy: Path) -> None:  # in the child that copies
            (into / "seen.json").write_text(json.dumps({str(p): _letter(p) for p in (server.pid, *relays)}))
            copy_case(source, copy)

        snapshots._copy_case = copying  # this forked child's module, not the test process's
        sleeper = (
            "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {!r}]); time.sleep(60)"
        )
        agent = _spawned(
            f"import subprocess; subprocess.Popen({launcher!r}, start_new_session=True); "
            "import time; time.sleep(60)"
        )
        for proxied in (False, True):
            relay = sleeper.format(
                sleeper.format("import time; time.sleep(60)") if proxied else "import time; time.sleep(60)"
            )
            server = _spawned(relay)
            helper_processes.declare_relay_server(server.pid, launcher[:4])
            _until(
                lambda pid=server.pid, proxied=proxied: (
                    len(_kids(pid)) == 1 and (not proxied or _kids(_kids(pid)[0]))
                )
            )
            _until(lambda: [_argv(kid) for kid in _kids(agent.pid)] == [launcher])
            relays = _kids(server.pid)
            os.kill(agent.pid, signal.SIGSTOP)
            os.waitid(os.P_PID, agent.pid, os.WSTOPPED | os.WNOWAIT)
            Snapshotter(case, into, 1).take(parse_point(f"after_running[call_{int(proxied)}]"))
            if not proxied:
                during.update(json.loads((into / "seen.json").read_text()))
                after.update({p: _letter(p) for p in (server.pid, *relays)})
            os.kill(agent.pid, signal.SIGCONT)
            for pid in (*[k for r in relays for k in _kids(r)], *relays):
                os.kill(pid, signal.SIGKILL)
            server.kill()
            server.wait()
        assert len(during) == 2 and set(during.values()) == {"T"}, during  # the server, its relay
        assert "T" not in after.values(), after  # continued after the copy
        for pid in _kids(agent.pid):
            os.kill(pid, signal.SIGKILL)
        agent.kill()
        agent.wait()

    _in_a_child(clean_life)
    _copied_then_left(
        into, "after_running[call_0]", "an MCP relay had a server of its own at the boundary (proxy mode)"
    )


def test_a_point_passed_while_another_thread_of_the_life_runs_is_left_to_a_killed_life(
    tmp_path: Path,
) -> None:
    """A kill stops every thread, a pause only the one at the boundary: a thread of the
    agent's own may write while the copy is made, so its points are left to killed lives.
    A quiet thread of the harness (waiting, acting only under the gate) is no reason."""
    case, into = _case(tmp_path), tmp_path / "snapshots"

    def clean_life() -> None:
        release = threading.Event()
        agents = threading.Thread(target=release.wait)
        agents.start()
        Snapshotter(case, into, 1).take(parse_point("after_running[call_1]"))
        release.set()
        agents.join()

        def harness_thread(started: threading.Event) -> None:
            with threads.quiet():
                started.set()
                release.wait()

        release.clear()
        started = threading.Event()
        quiet = threading.Thread(target=harness_thread, args=(started,))
        quiet.start()
        started.wait()
        Snapshotter(case, into, 1).take(parse_point("after_side_effect[call_1]"))
        release.set()
        quiet.join()

    _in_a_child(clean_life)
    skipped, taken = _manifest(into)
    assert skipped == {
        "point": "after_running[call_1]",
        "skipped": "other threads of the life were running at the boundary (1)",
    }
    assert taken["point"] == "after_side_effect[call_1]" and taken["exitcode"] == -signal.SIGKILL


def test_a_harness_thread_caught_acting_is_waited_for_and_what_it_did_is_in_the_copy(
    tmp_path: Path,
) -> None:
    """A handler that has sent its answer is inside ``active()`` until it returns, and on a
    loaded machine the agent can reach its next boundary first (CI's kind-3 MCP test left a
    point to a killed life so). The snapshot waits for it to be quiet again, and what it did
    while acting is in the copy whole. Fails if the point is left to a killed life, or if the
    copy holds half of the write."""
    case, into = _case(tmp_path), tmp_path / "snapshots"
    notes = case / "world" / "workspace" / "notes.txt"

    def clean_life() -> None:
        inside = threading.Event()

        def handler() -> None:
            with threads.quiet(), threads.active():
                inside.set()
                with notes.open("a") as out:
                    out.write("first half ")
                    out.flush()
                    time.sleep(0.05)
                    out.write("second half\n")

        thread = threading.Thread(target=handler)
        thread.start()
        inside.wait()
        Snapshotter(case, into, 1).take(parse_point("after_running[call_1]"))
        thread.join()

    _in_a_child(clean_life)
    [entry] = _manifest(into)
    assert "dir" in entry, entry
    copied = into / entry["dir"] / "world" / "workspace" / "notes.txt"
    assert copied.read_text() == "kept\nfirst half second half\n"


def test_a_harness_thread_acting_past_the_deadline_leaves_the_point_to_a_killed_life(tmp_path: Path) -> None:
    """The wait is bounded: a thread acting may itself wait on the life (a handler reaching a
    boundary of its own waits for the gate the snapshot holds). Past ``SETTLE_DEADLINE`` the
    point is a killed life's, counted as before."""
    case, into = _case(tmp_path), tmp_path / "snapshots"

    def clean_life() -> None:
        snapshots.SETTLE_DEADLINE = 0.2  # in this forked child only
        inside, release = threading.Event(), threading.Event()

        def handler() -> None:
            with threads.quiet(), threads.active():
                inside.set()
                release.wait()

        thread = threading.Thread(target=handler)
        thread.start()
        inside.wait()
        Snapshotter(case, into, 1).take(parse_point("after_running[call_1]"))
        release.set()
        thread.join()

    _in_a_child(clean_life)
    why = "other threads of the life were running at the boundary (1)"
    assert _manifest(into) == [{"point": "after_running[call_1]", "skipped": why}]


def test_a_thread_never_declared_quiet_is_not_waited_for() -> None:
    """An agent's own thread may run on until the kill: ``settled`` counts it at once rather
    than wait out its deadline. Fails if it waits (the thread's own 10 s run out first)."""

    def body() -> None:
        release, waited_out = threading.Event(), []

        def agents() -> None:
            if not release.wait(10):
                waited_out.append(True)

        thread = threading.Thread(target=agents)
        thread.start()
        count = threads.settled(60)
        release.set()
        thread.join()
        assert (count, waited_out) == (1, []), (count, waited_out)

    _in_a_child(body)


def test_a_thread_is_quiet_only_inside_quiet_and_active_hands_back_what_it_found() -> None:
    """``active()`` inside ``quiet()`` is quiet again after; outside it, it makes nothing
    quiet: a thread that handles some output but never declared itself quiet (a kind-3
    agent's pump without ``quiet()``) must still leave a point to a killed life. Counted in
    a forked child: this process may have threads of its own (xdist's)."""

    def body() -> None:
        counted: list[int] = []
        go, done = threading.Event(), threading.Event()

        def pause() -> None:  # the main thread counts while this one waits here
            go.clear()
            done.set()
            go.wait()

        def thread_body() -> None:
            with threads.active():
                pass
            pause()
            with threads.quiet():
                with threads.active():
                    pass
                pause()

        worker = threading.Thread(target=thread_body)
        worker.start()
        for _ in range(2):
            done.wait()
            done.clear()
            counted.append(threads.settled(0))
            go.set()
        worker.join()
        assert counted == [1, 0], counted

    _in_a_child(body)


def test_a_quiet_thread_does_not_act_while_a_snapshot_is_copied(tmp_path: Path) -> None:
    """A quiet thread writes only under the gate, and a snapshot holds it through its copy:
    a write of two halves, made under the gate with a pause between them, is never half in
    a copy. Without the gate held, most copies caught the first half alone."""
    case, into = _case(tmp_path), tmp_path / "snapshots"
    notes = case / "world" / "workspace" / "notes.txt"

    def clean_life() -> None:
        stop = threading.Event()

        def writer() -> None:
            with threads.quiet():
                while not stop.is_set():
                    with threads.GATE, notes.open("a") as out:
                        out.write("first half ")
                        out.flush()
                        time.sleep(0.002)
                        out.write("second half\n")
                    time.sleep(0.0005)

        thread = threading.Thread(target=writer)
        thread.start()
        snapshots = Snapshotter(case, into, 1)
        for index in range(20):
            snapshots.take(parse_point(f"after_running[call_{index}]"))
        stop.set()
        thread.join()

    _in_a_child(clean_life)
    copies = [entry for entry in _manifest(into) if "dir" in entry]
    assert len(copies) == 20  # a quiet thread is no reason to skip
    halves = [
        entry["point"]
        for entry in copies
        if (into / entry["dir"] / "world" / "workspace" / "notes.txt").read_text().endswith("first half ")
    ]
    assert halves == []


def test_a_case_with_a_postgres_store_is_not_snapshotted(tmp_path: Path) -> None:
    case, into = _case(tmp_path), tmp_path / "snapshots"
    (case / postgres.RECORD).write_text("{}")
    _in_a_child(lambda: Snapshotter(case, into, 1).take(parse_point("after_running[call_1]")))
    assert "PostgreSQL" in _manifest(into)[0]["skipped"]


def test_agents_off_the_snapshot_path_say_why() -> None:
    class Plain:
        name = "plain"

    class Threads:
        name = "threads"
        snapshots = True
        concurrent_calls = True

    class Ours:
        name = "ours"
        snapshots = True

    assert "does not declare" in unfaithful(Plain(), "fork")
    assert "at once" in unfaithful(Threads(), "fork")
    assert "spawn" in unfaithful(Ours(), "spawn")
    assert unfaithful(Ours(), "fork") == ""


def test_a_different_verdict_is_named_case_by_case() -> None:
    def case(point: str, status: str, lives: int = 2) -> CaseRecord:
        column = point.partition("[")[0]
        return CaseRecord(
            "a.yaml::" + point, "a", "a.yaml", (), (), point, column, status, False, 0.0, lives, ""
        )

    plain = Results(agent="reference", cases=(case("clean", "passed"), case("after_running[c]", "passed")))
    snapshotted = Results(
        agent="reference", cases=(case("clean", "passed"), case("after_running[c]", "failed", lives=3))
    )
    assert compare(plain, snapshotted) == [
        "a.yaml::after_running[c]: status: 'passed' without snapshots, 'failed' with; "
        "lives: 2 without snapshots, 3 with"
    ]
    assert compare(plain, Results(agent="reference", cases=plain.cases[:1])) == [
        "a.yaml::after_running[c]: only in the plain run"
    ]


def test_a_part_left_out_is_not_compared_and_the_rest_still_is() -> None:
    """An agent's journal with wall-clock times differs between any two runs: left out by
    its path, its file contents are not compared, the world's counts still are."""

    def results(journal: str, emails: int) -> Results:
        world = {"emails": emails, "files": {".memo/journal.jsonl": journal}}
        record = CaseRecord(
            "a.yaml::clean", "a", "a.yaml", (), (), "clean", "clean", "passed", False, 0.0, 1, "",
            observed={"world": world},
        )  # fmt: skip
        return Results(agent="memo", cases=(record,))

    leave_out = ("observed.world.files", "no.such.part")
    assert compare(results('{"at": 1.5}', 1), results('{"at": 2.25}', 1), leave_out=leave_out) == []
    assert compare(results('{"at": 1.5}', 1), results('{"at": 2.25}', 1)) != []
    [line] = compare(results('{"at": 1.5}', 1), results('{"at": 2.25}', 2), leave_out=leave_out)
    assert "'emails': 1" in line and "'emails': 2" in line and "journal" not in line


@given(
    events=st.lists(st.sampled_from(["boundary", "append", "model_request"]), max_size=10), torn=st.booleans()
)
def test_a_recovering_life_snapshots_the_points_recovery_window_names_in_its_trace(
    tmp_path_factory: pytest.TempPathFactory, events: list[str], torn: bool
) -> None:
    """The recovering life decides as it passes each point; ``recovery_window`` reads the
    whole trace afterwards (its rule: the points before the first model request, all of
    them if it asked before passing any; appends only with torn writes). Both must name the
    same points, or a second crash would come from no snapshot (run plainly: slower, not
    wrong) or a snapshot no item reads."""
    where = tmp_path_factory.mktemp("window")
    taker = Snapshotter(where, where / "into", 2, WINDOW_TORN if torn else WINDOW)
    trace: list[dict[str, Any]] = []
    taken: list[CrashPoint] = []
    for index, kind in enumerate(events):
        call = f"call_{index}"
        if kind == "model_request":
            trace.append({"life": 2, "event": "model_request"})
            taker.model_request()
            continue
        if kind == "boundary":
            point = CrashPoint("after_running", call)
            trace.append(
                {"life": 2, "event": "boundary", "boundary": point.boundary, "call": call, "occurrence": 1}
            )
        else:
            point = CrashPoint(TORN_WRITE, call, 1, "unknown")
            trace.append({"life": 2, "event": "append", "call": call, "label": "unknown", "occurrence": 1})
        if taker.in_window(kind == "append"):
            taken.append(point)
    assert taken == recovery_window(trace, torn=torn)
