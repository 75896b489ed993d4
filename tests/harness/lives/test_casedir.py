"""harness.lives.casedir: nothing a run makes is left in $TMPDIR unless it was asked to keep it.

The fast tests hold the template cache to that; the slow ones run pytest (with xdist workers)
and ``crashmatrix run`` in a private TMPDIR and look at what is left there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives import casedir
from crashmatrix.harness.lives.casedir import fresh_case, prepare_case, remove_templates, session_path_of

from ...pytest_runs import SUBPROCESS_TIMEOUT, run_inprocess
from ...xdist_run import parallel_run

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[3]
SCENARIO = ROOT / "scenarios" / "send_email" / "send_once.yaml"


def _template_roots() -> list[Path]:
    root = casedir._TEMPLATES._root
    return [root] if root is not None and root.exists() else []


def test_removed_templates_are_made_again_for_the_next_case(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIO)
    prepare_case(tmp_path / "a", scenario)
    [root] = _template_roots()
    remove_templates()
    assert not root.exists()
    prepare_case(tmp_path / "b", scenario)  # the cache does not hand out a removed template
    assert (tmp_path / "b" / "world" / "world.sqlite").is_file()
    remove_templates()


def test_a_forked_child_exiting_does_not_remove_its_parents_templates(tmp_path: Path) -> None:
    # A life or the fork server inherits the exit handler; only the maker may remove them.
    prepare_case(tmp_path / "a", load_scenario(SCENARIO))
    [root] = _template_roots()
    pid = os.fork()
    if pid == 0:  # the child runs the handler its parent registered, as its exit would
        casedir._remove_own(root, os.getppid())
        os._exit(0)
    os.waitpid(pid, 0)
    assert root.exists()
    casedir._remove_own(root, os.getpid())
    assert not root.exists()


def test_a_fresh_case_keeps_no_template(tmp_path: Path) -> None:
    remove_templates()
    fresh_case(tmp_path / "case", load_scenario(SCENARIO))
    assert (tmp_path / "case" / "world" / "world.sqlite").is_file()
    assert not session_path_of(tmp_path / "case").exists()  # no session yet, as prepare_case
    assert _template_roots() == []


def _left(tmpdir: Path) -> list[str]:
    return sorted(p.name for p in tmpdir.iterdir())


@pytest.mark.slow
def test_an_in_process_pytest_run_removes_its_templates_at_session_finish(pytester: pytest.Pytester) -> None:
    shutil.copy(SCENARIO, pytester.path / "send_once.yaml")
    options = ("-p", "no:cacheprovider", "--no-report", "--crash-boundary", "after_running")
    run = run_inprocess(pytester, "send_once.yaml", *options)
    assert run.ret == 0, "\n".join(run.outlines[-20:])
    # This process made templates for the run's cases and lives on: the plugin removed them.
    assert _template_roots() == []


@pytest.mark.slow
def test_pytest_with_workers_leaves_nothing_in_tmpdir(tmp_path_factory: pytest.TempPathFactory) -> None:
    # pytest scenarios -n 2 with its own $TMPDIR (tests/xdist_run.py: the run test_plugin_report
    # reads for its report): workers, their fork servers and templates, every case kind's lives
    # (crash, power loss, double resume), the report.
    run = parallel_run(tmp_path_factory)
    assert run.result.ret == 0, "\n".join(run.result.outlines[-20:])
    run.result.stdout.fnmatch_lines(["created: 2/2 workers"])
    assert _left(run.tmpdir) == []


@pytest.mark.slow
def test_crashmatrix_run_of_one_case_keeps_only_that_case_in_a_new_directory_and_says_where(
    tmp_path: Path,
) -> None:
    # A case named with --crash (a rerun line) is kept, each run in a directory of its own
    # (two reruns on one machine never share one); nothing else of the run is left.
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    crashmatrix = Path(sys.executable).with_name("crashmatrix")
    kept = []
    for _ in range(2):
        done = subprocess.run(
            [str(crashmatrix), "run", str(SCENARIO), "--crash", "recovery@after_approved[call_mail]"],
            env={**os.environ, "TMPDIR": str(tmpdir)},
            capture_output=True,
            text=True,
            timeout=SUBPROCESS_TIMEOUT,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        new = [name for name in _left(tmpdir) if name not in kept]
        assert len(new) == 1 and new[0].startswith("crashmatrix-case-"), _left(tmpdir)
        assert done.stdout.rstrip().endswith(f"case directories under {tmpdir / new[0]}")
        assert (tmpdir / new[0] / "recovery@after_approved[call_mail]").is_dir()
        kept += new
    assert _left(tmpdir) == sorted(kept)


@pytest.mark.slow
def test_crashmatrix_run_ended_by_sigterm_mid_case_leaves_nothing_in_tmpdir(tmp_path: Path) -> None:
    """A cancelled CI job or a timeout sends SIGTERM: the run stops as on Ctrl-C (exit 130),
    its scratch directory, templates and fork server with it (the whole matrix: its case
    directories are scratch)."""
    import signal

    from ...waiting import texts_under, wait_until

    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    crashmatrix = Path(sys.executable).with_name("crashmatrix")
    # This mutant's second life blocks for ever once it has set the torn line aside: the
    # signal lands mid-case, with a life only a deadline would end.
    run = subprocess.Popen(
        [
            str(crashmatrix),
            "run",
            str(SCENARIO),
            "--agent",
            "crashmatrix.reference_agent.mutants:torn_tail_blocks_forever",
        ],
        env={**os.environ, "TMPDIR": str(tmpdir)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        # $TMPDIR also holds the fork server's warm-up life, removed while we look.
        def second_life_started() -> bool:
            return run.poll() is not None or any(
                '"life": 2' in trace for trace in texts_under(tmpdir, "trace.jsonl")
            )

        assert wait_until(second_life_started, within=SUBPROCESS_TIMEOUT), _left(tmpdir)
        assert run.poll() is None, run.communicate()[0].decode(errors="replace")
        run.send_signal(signal.SIGTERM)
        output, _ = run.communicate(timeout=SUBPROCESS_TIMEOUT)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, output.decode(errors="replace")
    assert b"crashmatrix: interrupted" in output
    assert _left(tmpdir) == []


# An agent that, once given its turn, writes files into its workspace without end: whenever the
# run stops, a life is writing into a case directory.
SCRIBBLER = """\
import itertools
import sys

print("> ", end="", flush=True)
sys.stdin.readline()
for n in itertools.count():
    with open(f"scribble-{n % 500}.txt", "w") as out:
        out.write("x")
"""
SCRIBBLER_ADAPTER = """\
name: scribbler
command: ["{python}", "-u", "{here}/agent.py"]
cwd: workspace
tools: harness
input: {prompt: "> "}
results: crashmatrix
catalogue: {send_email: {}}
"""


@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_crashmatrix_run_ended_by_a_signal_while_a_life_writes_into_its_case_leaves_nothing_in_tmpdir(
    tmp_path: Path, how: str
) -> None:
    """The run's lives are stopped before its scratch directory is removed: a life left running
    created files behind the removal's walk and kept crashmatrix-run-* (every time with this
    agent; 1 in 12 SIGTERMs of the test above under load). SIGKILLed, the run cannot clean up:
    the directory's janitor (harness.lives.janitor) removes it once the run and its lives die."""
    import signal

    from ...waiting import wait_until

    (tmp_path / "agent.py").write_text(SCRIBBLER, encoding="utf-8")
    (tmp_path / "adapter.yaml").write_text(SCRIBBLER_ADAPTER, encoding="utf-8")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    crashmatrix = Path(sys.executable).with_name("crashmatrix")
    command = [str(crashmatrix), "run", str(SCENARIO), "--agent", str(tmp_path / "adapter.yaml")]
    run = subprocess.Popen(
        command, env={**os.environ, "TMPDIR": str(tmpdir)}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        # The clean case's life writes on (until its deadline): the signal lands mid-write.
        def scribbling() -> bool:  # os.walk: directories may go while it looks
            made = sum(name.startswith("scribble-") for _, _, files in os.walk(tmpdir) for name in files)
            return run.poll() is not None or made >= 100

        scribbled = wait_until(scribbling, within=SUBPROCESS_TIMEOUT)
        assert scribbled and run.poll() is None, _left(tmpdir)
        run.send_signal(getattr(signal, how))
        output, _ = run.communicate(timeout=SUBPROCESS_TIMEOUT)
    finally:
        if run.poll() is None:
            run.kill()
    if how == "SIGTERM":
        assert run.returncode == 130, output.decode(errors="replace")
        assert _left(tmpdir) == []
    else:
        assert run.returncode == -signal.SIGKILL, output.decode(errors="replace")
        # The janitor works once the run is gone: the time a loaded machine takes.
        assert wait_until(lambda: _left(tmpdir) == [], within=SUBPROCESS_TIMEOUT), _left(tmpdir)
