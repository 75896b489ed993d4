"""harness.lives.gate: a concurrent life is held at its first step until the harness closes
its end of the gate, and only there; a life that comes after the release passes at once.
The lives are forks of this test process (milliseconds: a fast test)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from crashmatrix.harness.lives.gate import GatedTracer
from crashmatrix.harness.lives.tracer import Tracer, read_trace
from tests.waiting import wait_until


def _gate(tmp_path: Path) -> tuple[Path, int]:
    gate = tmp_path / "gate.fifo"
    os.mkfifo(gate)
    return gate, os.open(gate, os.O_RDWR | os.O_NONBLOCK)


def _life(tmp_path: Path, gate: Path, life: int, holder: int | None = None) -> int:
    pid = os.fork()
    if pid == 0:  # the life: two steps, the first held
        try:
            if holder is not None:  # a real life never has the harness's end (forked elsewhere)
                os.close(holder)
            tracer = GatedTracer(Tracer(tmp_path / "trace.jsonl", life, None), str(gate))
            tracer.boundary("after_running", "call_1")
            tracer.before_append(tmp_path / "session.jsonl", b'{"type": "message"}\n')
        finally:
            os._exit(0)
    return pid


def _events(tmp_path: Path, life: int) -> list[str]:
    return [str(e["event"]) for e in read_trace(tmp_path) if e.get("life") == life]


def test_a_life_waits_at_its_first_step_until_the_gate_opens(tmp_path: Path) -> None:
    gate, holder = _gate(tmp_path)
    pid = _life(tmp_path, gate, 2, holder)
    try:
        assert wait_until(lambda: _events(tmp_path, 2) == ["gate"], within=10.0), _events(tmp_path, 2)
        assert os.waitpid(pid, os.WNOHANG) == (0, 0), "the life went on before the release"
        assert _events(tmp_path, 2) == ["gate"]  # held before its boundary was even counted
    finally:
        os.close(holder)  # the release
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    # Held once: its second step is not held again; every session line is noted as its own.
    assert _events(tmp_path, 2) == ["gate", "boundary", "wrote"]


def test_a_life_that_reaches_the_gate_after_the_release_passes_at_once(tmp_path: Path) -> None:
    gate, holder = _gate(tmp_path)
    os.close(holder)
    pid = _life(tmp_path, gate, 3)
    if not wait_until(lambda: os.waitpid(pid, os.WNOHANG) != (0, 0), within=10.0):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise AssertionError(f"a late life blocked at an opened gate: {_events(tmp_path, 3)}")
    assert _events(tmp_path, 3) == ["gate", "boundary", "wrote"]


def test_two_requests_of_one_life_arriving_at_once_are_held_by_one_gate(tmp_path: Path) -> None:
    # A process agent's first requests reach the life's loopback server on two threads (the
    # model and a service at once): one gate event, and neither passes before the release.
    gate, holder = _gate(tmp_path)
    tracer = GatedTracer(Tracer(tmp_path / "trace.jsonl", 2, None), str(gate))
    passed: list[str] = []
    threads = [
        threading.Thread(target=lambda name=name: (tracer.hold(), passed.append(name)), daemon=True)
        for name in ("chat", "mail")
    ]
    try:
        for thread in threads:
            thread.start()
        assert wait_until(lambda: _events(tmp_path, 2) == ["gate"], within=10.0), _events(tmp_path, 2)
        time.sleep(0.05)  # the second request, had it not been held, would have passed by now
        assert passed == []
    finally:
        os.close(holder)  # the release
    for thread in threads:
        thread.join(10)
    assert sorted(passed) == ["chat", "mail"] and _events(tmp_path, 2) == ["gate"]
