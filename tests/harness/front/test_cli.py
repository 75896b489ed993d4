"""The ``crashmatrix`` command line as a user runs it: each command through ``main()``, what
the console script calls, in this process (what it prints read at the file descriptors);
one test runs the console script itself, in a process of its own."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from crashmatrix.harness.core.tool_side import TOOL_SIDE_KINDS
from crashmatrix.harness.front import cli

from ...scenario_data import email_once

pytestmark = pytest.mark.slow

EXPECT = {
    "after_running": {"outcome": {"call_1": "side_effect_uncertain"}, "world": {"emails": 0}},
    "after_side_effect": {"outcome": {"call_1": "side_effect_uncertain"}, "world": {"emails": 1}},
}
SCENARIO = email_once(recovery_crashes=False, expect=EXPECT)


@dataclass(frozen=True)
class Done:
    """A command's exit status and what it printed, as a process running it would show them."""

    returncode: int
    stdout: str
    stderr: str


Crashmatrix = Callable[..., Done]


@pytest.fixture
def crashmatrix(capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Crashmatrix:
    """``crashmatrix ARGS`` run from ``cwd``: ``main(ARGS)`` in this process, as the console
    script and ``python -m`` call it (``raise SystemExit(main())``), a few seconds less than a
    new interpreter and fork server per command. Its lives are still real processes, forked
    from a warm server and SIGKILLed; the console script itself is proven once, below."""
    # main() puts the current directory on sys.path (a team's agent module is found there).
    monkeypatch.setattr(sys, "path", list(sys.path))

    def run(*args: str, cwd: Path) -> Done:
        monkeypatch.chdir(cwd)
        capfd.readouterr()
        try:
            code = cli.main(list(args))
        except SystemExit as exit_:  # argparse's usage errors
            code = exit_.code if isinstance(exit_.code, int) else 1
        out, err = capfd.readouterr()
        return Done(code, out, err)

    return run


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "email.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    return path


def test_run_one_point_by_bare_boundary_keeps_the_case_directory(
    crashmatrix: Crashmatrix, scenario: Path, tmp_path: Path
) -> None:
    keep = tmp_path / "kept"
    done = crashmatrix(
        "run", str(scenario), "--crash", "after_side_effect", "--keep", str(keep), cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "email.yaml::after_side_effect[call_1] ... passed" in done.stdout
    assert "1 passed, 0 failed" in done.stdout
    case = keep / "after_side_effect[call_1]"
    assert (case / "world" / "workspace" / ".agent_state" / "session-case.jsonl").is_file()
    assert (case / "trace.jsonl").is_file()


def test_run_without_crash_runs_the_whole_matrix_and_fails_with_exit_1_on_a_wrong_expectation(
    crashmatrix: Crashmatrix, scenario: Path, tmp_path: Path
) -> None:
    wrong = {**EXPECT, "after_side_effect": {**EXPECT["after_side_effect"], "world": {"emails": 2}}}
    scenario.write_text(email_once(recovery_crashes=False, expect=wrong), encoding="utf-8")
    done = crashmatrix("run", str(scenario), cwd=tmp_path)
    assert done.returncode == 1
    assert "email.yaml::clean ... passed" in done.stdout
    assert "MISMATCH world.emails: expected 2, observed 1" in done.stdout
    assert "rerun: crashmatrix run email.yaml --crash 'after_side_effect[call_1]'" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_an_unknown_point_is_a_one_line_usage_error_listing_the_points(
    crashmatrix: Crashmatrix, scenario: Path, tmp_path: Path
) -> None:
    done = crashmatrix("run", str(scenario), "--crash", "after_lunch", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert (
        "--crash 'after_lunch': the clean run never reaches it; points: after_model_reply[call_1]"
        in done.stderr
    )


def test_validate_reports_each_bad_file_on_one_line_and_exits_2(
    crashmatrix: Crashmatrix, scenario: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    fax = email_once(
        edits=[("tools: [send_email]", "tools: [send_fax]")], recovery_crashes=False, expect=EXPECT
    )
    bad.write_text(fax, encoding="utf-8")
    done = crashmatrix("validate", str(scenario), str(bad), cwd=tmp_path)
    assert done.returncode == 2
    assert f"{scenario}: ok" in done.stdout
    assert f"{bad}:2:9: tools[0]: unknown tool 'send_fax'" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_points_lists_the_points_a_clean_run_records(
    crashmatrix: Crashmatrix, scenario: Path, tmp_path: Path
) -> None:
    done = crashmatrix("points", str(scenario), cwd=tmp_path)
    assert done.returncode == 0
    points = done.stdout.split()
    assert points[:2] == ["after_model_reply[call_1]", "after_tool_call_saved[call_1]"]
    assert {"after_running[call_1]", "torn_write[call_1:running]", "after_tool_result[call_1]"} <= set(points)
    # Then the tool-side cases: the email's call reached the mock tools, each kind fails it once.
    assert [p for p in points if p.partition("[")[0] in TOOL_SIDE_KINDS] == [
        f"{kind}[call_1]" for kind in TOOL_SIDE_KINDS
    ]


def test_points_that_records_no_point_says_why_on_one_line_and_exits_1(
    crashmatrix: Crashmatrix, tmp_path: Path
) -> None:
    # The example notes agent, its one boundary rule misspelt: the rule never holds, the
    # clean run passes no boundary, and an empty list must not read as "nothing to crash".
    example = Path(__file__).resolve().parents[3] / "examples" / "python_agent"
    text = (example / "adapter.yaml").read_text(encoding="utf-8").split("\nboundaries:\n")[0]
    adapter = tmp_path / "adapter.yaml"
    adapter.write_text(
        text.replace("script: agent.py", f"script: {example / 'agent.py'}")
        + "\nboundaries:\n  - function: append_entry\n    boundary: after_running\n"
        "    where: [{argument: record, key: status, equals: runing}]\n"
        "    call_id: {argument: record, key: tool_call_id}\n",
        encoding="utf-8",
    )
    scenario = example / "scenario.yaml"
    done = crashmatrix("points", str(scenario), "--agent", str(adapter), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    # The loopback model's reply is still an edge, and its session appends are still torn
    # where it fsyncs them: neither shows that a boundary rule ever held.
    assert done.stdout.split() == [
        "after_model_reply[call_write]",
        *(f"torn_write[call_write:{label}]" for label in ("approved", "running", "succeeded", "tool_result")),
    ]
    assert done.stderr == (
        f"crashmatrix: {scenario}: the clean run passed no boundary, so it records no crash point "
        "at a boundary; "
        f"check that the scenario's model calls a tool and that {adapter}'s boundaries: "
        "(function:, where:, call_id:) match what the agent calls\n"
    )


def test_mutants_prints_the_kill_matrix_and_exits_0_when_every_chosen_mutant_dies(
    crashmatrix: Crashmatrix,
) -> None:
    root = Path(__file__).resolve().parents[3]
    done = crashmatrix("mutants", "--mutant", "ledger_in_prompt", cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ledger_in_prompt" in done.stdout and "K" in done.stdout


def test_run_replays_a_power_loss_and_a_second_crash_while_recovering(
    crashmatrix: Crashmatrix, scenario: Path, tmp_path: Path
) -> None:
    power = crashmatrix("run", str(scenario), "--crash", "power@after_side_effect", cwd=tmp_path)
    assert power.returncode == 0, power.stdout + power.stderr
    assert "email.yaml::power@after_side_effect[call_1] ... passed" in power.stdout
    twice = crashmatrix(
        "run",
        str(scenario),
        "--crash",
        "after_side_effect",
        "--second",
        "before_tool_result[call_1]",
        cwd=tmp_path,
    )
    assert twice.returncode == 0, twice.stdout + twice.stderr
    assert "after_side_effect[call_1] then before_tool_result[call_1] ... passed" in twice.stdout
    lonely = crashmatrix("run", str(scenario), "--second", "before_tool_result[call_1]", cwd=tmp_path)
    assert lonely.returncode == 2 and "--second needs --crash" in lonely.stderr


def test_explore_is_wired_and_finds_nothing_wrong_with_the_reference_agent(
    crashmatrix: Crashmatrix, tmp_path: Path
) -> None:
    done = crashmatrix(
        "explore", "--examples", "2", "--seed", "3", "--out", str(tmp_path / "found"), cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = tmp_path / "found"
    assert not found.exists() or not list(found.glob("*.yaml"))  # nothing found, nothing written


def test_run_shares_each_first_crash_between_a_point_its_recovery_and_its_power_item(
    crashmatrix: Crashmatrix,
    scenario: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario.write_text(email_once(expect=EXPECT), encoding="utf-8")  # recovery crashes: the default
    # To look into the run's scratch directory before it is removed: the seam copies it
    # aside (its janitor removes the directory itself once the run returns).
    scratch: list[Path] = []

    def keep_a_copy(base: Path) -> None:
        scratch.append(shutil.copytree(base, tmp_path / "scratch", symlinks=True))

    monkeypatch.setattr(cli, "_discard", keep_a_copy)
    done = crashmatrix("run", str(scenario), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert out.rstrip().endswith("case directories removed (--keep DIR keeps them)")
    recovery = [line for line in out.splitlines() if "::recovery@" in line]
    assert recovery and all(line.endswith("passed") for line in recovery)
    # The whole matrix has the power column, as under pytest.
    power = [line for line in out.splitlines() if "::power@" in line]
    assert len(power) > len(recovery) and all(line.endswith("passed") for line in power)
    [base] = scratch
    # One first crash per recovery or power point, run once for P and the items that start
    # with it; P is judged in its own copy (a published first crash is only ever copied).
    shared = {p.parent.name: p.parent for p in base.glob("first-crashes/*/*/crashed")}
    crashed = sorted(shared)
    starts = {line.split("::recovery@")[1].split(" ")[0] for line in recovery}
    starts |= {line.split("::power@")[1].split(" ")[0] for line in power}
    assert crashed == sorted(starts)
    for name in crashed:
        trace = (shared[name] / "first" / "trace.jsonl").read_bytes()
        assert (base / name / "trace.jsonl").read_bytes() == trace and trace.count(b'"event": "start"') == 2
    kept = crashmatrix("run", str(scenario), "--keep", str(tmp_path / "kept"), cwd=tmp_path)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert not (tmp_path / "kept" / "first-crashes").exists()  # --keep: every case whole
    assert all((tmp_path / "kept" / name).is_dir() for name in crashed)


def test_a_bad_adapter_declaration_is_one_line_and_exit_2_before_anything_runs(
    crashmatrix: Crashmatrix, scenario: Path, tmp_path: Path
) -> None:
    broken = Path(__file__).parents[1] / "data" / "broken" / "a01_effect_query_invalid.yaml"
    keep = tmp_path / "kept"
    done = crashmatrix("run", str(scenario), "--agent", str(broken), "--keep", str(keep), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert (
        done.stderr.count("\n") == 1 and "effects[0].sqlite.query: the query is not valid SQL" in done.stderr
    )
    assert not keep.exists()  # nothing ran


def _failure(lines: list[str]) -> list[str]:
    """What a failure says, without its execution ids (new in every run): each mismatch,
    each broken invariant's name, each problem."""
    said = [line.strip() for line in lines]
    return [
        line.partition(":")[0] if line.startswith("INVARIANT") else line
        for line in said
        if line.startswith(("MISMATCH", "INVARIANT", "problem:"))
    ]


def test_the_rerun_line_of_a_failed_recovery_case_fails_again_at_the_same_second_crash(
    crashmatrix: Crashmatrix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # blind_retry passes after_approved alone; only a second crash while it recovers shows
    # the bug, so a rerun line without that second crash would print "1 passed".
    root = Path(__file__).resolve().parents[3]
    mutant = "crashmatrix.reference_agent.mutants:blind_retry"
    node = "scenarios/send_email/send_once.yaml::recovery@after_approved[call_mail]"
    first = crashmatrix("run", node, "--agent", mutant, "--keep", str(tmp_path / "first"), cwd=root)
    assert first.returncode == 1, first.stdout + first.stderr
    lines = first.stdout.splitlines()
    assert "send_once.yaml::recovery@after_approved[call_mail] ... failed" in lines
    rerun = [line.removeprefix("  rerun: ") for line in lines if line.startswith("  rerun: ")]
    assert len(rerun) == 1, first.stdout
    words = shlex.split(rerun[0])
    assert words[:3] == ["crashmatrix", "run", "scenarios/send_email/send_once.yaml"]
    assert words[3:9] == [
        "--crash",
        "after_approved[call_mail]",
        "--second",
        "after_running[call_mail]",
        "--agent",
        mutant,
    ]
    start = lines.index("  second crash at after_running[call_mail]: FAILED") + 1
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("    "))
    expected = _failure(lines[start:end])
    assert expected  # else the comparison below would hold for any rerun
    assert f"    rerun: {rerun[0]}" in lines[start:end]  # each second crash has its own line

    # The printed line, run exactly as printed: no directory is named in it, the case is kept
    # in a new one of its own (two reruns on one machine never share one).
    assert "--keep" not in words
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # $TMPDIR, as this process read it
    again = crashmatrix(*words[1:], cwd=root)
    assert again.returncode == 1, again.stdout + again.stderr
    relines = again.stdout.splitlines()
    assert "send_once.yaml::after_approved[call_mail] then after_running[call_mail] ... failed" in relines
    [kept] = scratch.glob("crashmatrix-case-*")
    assert "0 passed, 1 failed; case directories under " + str(kept) in relines
    assert any(kept.iterdir())  # the case is there to read
    assert _failure(relines) == expected
    # Its own rerun line is itself: rerunning a rerun reproduces the same case again.
    assert f"  rerun: {rerun[0]}" in relines


@pytest.mark.slow
def test_the_console_script_imports_a_teams_agent_module_from_the_current_directory(
    scenario: Path, tmp_path: Path
) -> None:
    # `crashmatrix run ... --agent=team_agent:make`, as a rerun line prints it, from the
    # project's directory: a console script's sys.path lacks it unless crashmatrix adds it.
    (tmp_path / "team_agent.py").write_text(
        "from crashmatrix.harness.agents.reference import ReferenceAdapter\n"
        "def make():\n    return ReferenceAdapter()\n",
        encoding="utf-8",
    )
    script = Path(sys.executable).parent / "crashmatrix"
    done = subprocess.run(
        [str(script), "run", str(scenario), "--crash", "clean", "--agent=team_agent:make"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 0 failed" in done.stdout


@pytest.mark.slow
def test_a_relative_keep_directory_is_where_the_user_stands(crashmatrix: Crashmatrix, tmp_path: Path) -> None:
    # A life works in its case's workspace: a relative --keep taken as it is meant another
    # place there ("the clean run never reaches it; points: none").
    root = Path(__file__).resolve().parents[3]
    scenario = root / "scenarios" / "send_email" / "send_once.yaml"
    done = crashmatrix(
        "run", str(scenario), "--crash", "after_side_effect[call_mail]", "--keep", "kept", cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith(f"1 passed, 0 failed; case directories under {tmp_path / 'kept'}")
    assert (tmp_path / "kept" / "after_side_effect[call_mail]").is_dir()
