"""An agent's output is kept bounded (harness.lives.capped_log): the first and the last bytes,
and one line saying how many were left out between them."""

from __future__ import annotations

import os
import time
from pathlib import Path

from crashmatrix.harness.lives.capped_log import CappedLog, cap_file, compact, left_out, watch

HEAD, TAIL = 1000, 1000


def _numbered(count: int) -> bytes:
    return b"".join(b"%09d\n" % n for n in range(count))  # 10 bytes a line


def test_a_short_log_is_kept_whole(tmp_path: Path) -> None:
    with CappedLog(tmp_path / "out.log", head=HEAD, tail=TAIL) as log:
        log.write(b"hello\n")
        log.write(b"world\n")
    assert (tmp_path / "out.log").read_bytes() == b"hello\nworld\n"


def test_a_flood_keeps_its_head_and_tail_and_says_how_much_went(tmp_path: Path) -> None:
    data = _numbered(100_000)  # 1 MB in 700-byte writes
    with CappedLog(tmp_path / "out.log", head=HEAD, tail=TAIL) as log:
        for start in range(0, len(data), 700):
            log.write(data[start : start + 700])
            assert log.size <= HEAD + 2 * TAIL + 200  # bounded all along, not just at the end
    kept = (tmp_path / "out.log").read_bytes()
    marker = f"\n[crashmatrix: {left_out(kept, HEAD)} bytes of output left out here]\n".encode()
    assert kept.startswith(data[:HEAD] + marker)
    tail = kept[HEAD + len(marker) :]
    assert TAIL <= len(tail) <= 2 * TAIL + 200
    assert data.endswith(tail)
    assert left_out(kept, HEAD) == len(data) - HEAD - len(tail)  # every byte accounted for


def test_a_later_life_appends_to_the_same_capped_log(tmp_path: Path) -> None:
    path = tmp_path / "out.log"
    with CappedLog(path, head=HEAD, tail=TAIL) as log:
        log.write(_numbered(1000))
    with CappedLog(path, head=HEAD, tail=TAIL) as log:
        log.write(b"life 2\n")
    kept = path.read_bytes()
    assert kept.endswith(b"life 2\n")
    assert left_out(kept, HEAD) + len(kept) - len(
        f"\n[crashmatrix: {left_out(kept, HEAD)} bytes of output left out here]\n"
    ) == 10_000 + len(b"life 2\n")


def test_a_file_others_append_to_is_cut_while_it_grows_and_says_at_least(tmp_path: Path) -> None:
    path = tmp_path / "life-1.stderr"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)  # like the agent's fd 2
    capping = watch(path, every=0.01, head=HEAD, tail=TAIL)
    try:
        for _ in range(50):
            os.write(fd, _numbered(1000))
            time.sleep(0.005)
        time.sleep(0.1)  # no cut under way: a line appended during one may be lost ("at least")
        os.write(fd, b"the last line\n")
    finally:
        capping.stop()
        os.close(fd)
    kept = path.read_bytes()
    assert len(kept) <= HEAD + 2 * TAIL + 200
    assert kept.startswith(_numbered(100))  # its head
    assert b"[crashmatrix: at least " in kept
    assert kept.endswith(b"the last line\n")


def test_a_flood_faster_than_the_watch_is_cut_when_it_stops(tmp_path: Path) -> None:
    path = tmp_path / "life-1.stderr"
    capping = watch(path, every=60, head=HEAD, tail=TAIL)  # it never looks on its own here
    with open(path, "ab") as stderr:
        stderr.write(_numbered(100_000))
    capping.stop()  # the life ended: its last cut
    assert len(path.read_bytes()) <= HEAD + 2 * TAIL + 200


def test_a_life_killed_before_its_last_cut_is_cut_later(tmp_path: Path) -> None:
    path = tmp_path / "life-1.stderr"
    path.write_bytes(_numbered(100_000))
    cap_file(path, head=HEAD, tail=TAIL)
    kept = path.read_bytes()
    assert len(kept) <= HEAD + 2 * TAIL + 200
    assert kept.endswith(_numbered(100_000)[-TAIL:])
    cap_file(tmp_path / "never-written.stderr")  # nothing there: nothing to do


def test_compact_leaves_a_file_under_its_bound_alone(tmp_path: Path) -> None:
    path = tmp_path / "small"
    path.write_bytes(b"x" * (HEAD + 2 * TAIL))
    fd = os.open(path, os.O_RDWR)
    try:
        assert compact(fd, HEAD + 2 * TAIL, head=HEAD, tail=TAIL) == HEAD + 2 * TAIL
    finally:
        os.close(fd)
    assert path.read_bytes() == b"x" * (HEAD + 2 * TAIL)
