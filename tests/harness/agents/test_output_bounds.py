"""An agent's output is bounded (issue 26, part K): what it prints is kept as its head and its
tail (``harness.lives.capped_log``), prompts are matched on the last few kilobytes only once
it stops printing, so an agent printing 200 MB finishes as fast as it prints, is judged on what
it does (not "hung"), and leaves logs of a few MiB."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.agents.conversation import _PROMPT_WINDOW, _Console
from crashmatrix.harness.agents.supervised import _pump
from crashmatrix.harness.front.cases import Enumeration, enumerate_points, run_point
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.capped_log import HEAD, TAIL, CappedLog, left_out
from crashmatrix.harness.lives.injector import LifeLauncher

ROOT = Path(__file__).resolve().parents[3]
FLOOD = Path(__file__).resolve().parent / "data" / "flood_agent" / "adapter.yaml"
BLACKBOX = ROOT / "examples" / "blackbox_agent"
BOUND = HEAD + 2 * TAIL + 200  # a capped log's size at most


class _Answers:
    """A Conversation's ``answer`` as the console and the pump call it, recording each call."""

    def __init__(self, prompt: str, answer: str) -> None:
        self.prompt, self.answer_text, self.calls = prompt, answer, 0
        self.unanswered = None

    def answer(self, output: str, *, waiting: bool) -> str | None:
        self.calls += 1
        assert len(output) <= _PROMPT_WINDOW  # only the tail is ever matched
        if waiting or output.endswith(self.prompt):
            answer, self.answer_text = self.answer_text, ""
            return answer
        return None


def test_an_in_process_agent_printing_a_flood_keeps_a_bounded_log_and_still_gets_its_answer(
    tmp_path: Path,
) -> None:
    answers = _Answers("> ", "Order 1 chair\n")
    with CappedLog(tmp_path / "agent-1.log") as log:
        console = _Console(answers, log)  # type: ignore[arg-type]
        line = b"flood " * 10 + b"\n"
        for _ in range(100_000):  # 6.1 MB in 61-byte prints
            console.write(line.decode())
        assert sum(len(p) for p in console.pending) <= 2 * _PROMPT_WINDOW + len(line)
        console.write("> ")
        assert console.readline() == "Order 1 chair\n"
    kept = (tmp_path / "agent-1.log").read_bytes()
    assert len(kept) <= BOUND
    assert kept.endswith(b"> Order 1 chair\n")
    assert left_out(kept) > 0


@pytest.mark.slow
def test_a_black_box_printing_a_flood_keeps_a_bounded_log_and_still_gets_its_answer(tmp_path: Path) -> None:
    flood = "import sys\nsys.stdout.write('flood ' * 5_000_000)\nsys.stdout.write('> ')\nsys.stdout.flush()\n"
    flood += "print('got', input())\n"
    process = subprocess.Popen(
        [sys.executable, "-c", flood], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    answers = _Answers("> ", "yes\n")
    _pump(process, answers, tmp_path / "agent-1.log")  # type: ignore[arg-type]
    assert process.wait() == 0
    kept = (tmp_path / "agent-1.log").read_bytes()
    assert len(kept) <= BOUND
    assert kept.endswith(b"> yes\ngot yes\n")
    assert answers.calls >= 1  # each on the last _PROMPT_WINDOW characters only (_Answers)


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher("fork", preload=["crashmatrix.mock_tools.toolbox"])


@pytest.fixture(scope="module")
def enumerated(
    launcher: LifeLauncher, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[Path], Enumeration]:
    """Each adapter's clean run (its enumeration), run once for the module: the kind-2 one is
    both a claim of its own (it passes with bounded logs) and where the killed life's point
    comes from; each of its lives prints 400 MB, so running it twice cost a few seconds."""
    runs: dict[Path, Enumeration] = {}

    def enumerate_once(adapter: Path) -> Enumeration:
        if adapter not in runs:
            work = tmp_path_factory.mktemp("clean")
            runs[adapter] = enumerate_points(
                load_scenario(BLACKBOX / "scenario.yaml"), launcher, work, agent=str(adapter)
            )
        return runs[adapter]

    return enumerate_once


@pytest.mark.slow
@pytest.mark.parametrize(
    ("adapter", "stderr"),
    [(FLOOD, "agent-1.stderr"), (FLOOD.with_name("adapter-in-process.yaml"), "life-1.stderr")],
    ids=["kind 3", "kind 2"],
)
def test_an_agent_printing_200_mb_then_answering_correctly_passes_with_bounded_logs(
    adapter: Path, stderr: str, enumerated: Callable[[Path], Enumeration]
) -> None:
    enum = enumerated(adapter)
    case = enum.clean_case()
    assert case.verdict.status == "passed", (case.verdict.status, case.verdict.problems)
    assert enum.points  # it reached its crash points too
    sizes = {p.name: os.path.getsize(p) for p in case.case_dir.iterdir() if p.suffix in (".log", ".stderr")}
    assert {"agent-1.log", stderr} <= set(sizes)
    assert all(size <= BOUND for size in sizes.values()), sizes
    stdout = (case.case_dir / "agent-1.log").read_bytes()
    assert stdout.startswith(b"flood flood ")
    assert left_out(stdout) > 190 * 1024 * 1024
    assert b"[crashmatrix: at least " in (case.case_dir / stderr).read_bytes()


@pytest.mark.slow
def test_a_life_killed_after_its_flood_leaves_bounded_logs_and_recovers(
    launcher: LifeLauncher, enumerated: Callable[[Path], Enumeration], tmp_path: Path
) -> None:
    adapter = FLOOD.with_name("adapter-in-process.yaml")
    enum = enumerated(adapter)  # the clean run the kind-2 item above asserts on
    point = next(p for p in enum.points if p.boundary == "after_running")
    # Life 1 runs from the start and floods again: the life killed here is its own.
    case = run_point(enum.scenario, point, launcher, tmp_path / "case", agent=str(adapter))
    assert case.verdict.status == "passed", (case.verdict.status, case.verdict.problems)
    # Life 1 was SIGKILLed at the point, after its flood: its logs are bounded all the same.
    sizes = {p.name: os.path.getsize(p) for p in case.case_dir.iterdir() if p.suffix in (".log", ".stderr")}
    assert {"agent-1.log", "agent-2.log", "life-1.stderr", "life-2.stderr"} <= set(sizes)
    assert all(size <= BOUND for size in sizes.values()), sizes
