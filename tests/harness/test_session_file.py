"""harness.session_file: durable appends, and a reader that tells a torn tail from corruption."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.core.records import CompactionEntry, ExecutionRecord, MessageEntry
from crashmatrix.harness.core.session_log import FORMAT_VERSION, encode_line, prompt_view
from crashmatrix.harness.errors import SessionCorruption
from crashmatrix.harness.session_file import SessionWriter, read_session

DATA = Path(__file__).parent / "data"
NORMAL = DATA / "seed000_normal_write.jsonl"
RECOVERY = DATA / "seed000_crash_recovery.jsonl"

USER: dict[str, Any] = {"type": "message", "message": {"role": "user", "content": "hi"}}
FINAL: dict[str, Any] = {"type": "message", "message": {"role": "assistant", "content": "bye"}}


def line(record: dict[str, Any]) -> bytes:
    return encode_line(record)


# --- reading seed 000's traces -------------------------------------------------------


@pytest.mark.parametrize(("path", "count"), [(NORMAL, 7), (RECOVERY, 12)])
def test_seed_000_traces_read_back_completely(path: Path, count: int) -> None:
    log = read_session(path)
    assert len(log.entries) == count
    assert log.torn_tail is None
    assert log.size == path.stat().st_size
    assert [e.line for e in log.entries] == list(range(1, count + 1))


def test_seed_000_normal_write_has_the_documented_record_sequence() -> None:
    entries = read_session(NORMAL).entries
    kinds = [
        e.message.role if isinstance(e, MessageEntry) else e.status  # type: ignore[union-attr]
        for e in entries
    ]
    assert kinds == ["user", "assistant", "approved", "running", "succeeded", "tool", "assistant"]
    succeeded = entries[4]
    assert isinstance(succeeded, ExecutionRecord)
    assert succeeded.result == {
        "status": "succeeded",
        "execution_id": "exec_ef1a380b3439469ea9677bbd74c2e8a3",
        "path": "ledger-demo.txt",
        "bytes_written": 12,
    }


def test_prompt_view_shows_only_the_message_records() -> None:
    lines = NORMAL.read_text(encoding="utf-8").splitlines()
    view = prompt_view(read_session(NORMAL).entries)
    expected = [json.loads(text)["message"] for text in lines if json.loads(text)["type"] == "message"]
    assert len(view) == 4
    assert view == expected


def test_prompt_view_of_the_recovery_trace_hides_all_six_ledger_lines() -> None:
    view = prompt_view(read_session(RECOVERY).entries)
    assert len(view) == 6
    assert all("execution_id" not in message for message in view)


@pytest.mark.parametrize("path", [NORMAL, RECOVERY])
def test_re_encoding_each_seed_record_gives_the_same_json(path: Path) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    for raw, entry in zip(lines, read_session(path).entries, strict=True):
        encoded = encode_line(entry.to_json())
        assert encoded.endswith(b"\n") and encoded.count(b"\n") == 1
        assert json.loads(encoded) == json.loads(raw)


def test_encode_line_is_compact_and_keeps_non_ascii() -> None:
    assert encode_line({"a": "文件", "b": 1}) == '{"a":"文件","b":1}\n'.encode()


def test_a_missing_file_is_an_empty_session(tmp_path: Path) -> None:
    log = read_session(tmp_path / "absent.jsonl")
    assert log.entries == () and log.torn_tail is None


def test_an_empty_file_has_no_entries(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"")
    log = read_session(path)
    assert log.entries == () and log.torn_tail is None and log.size == 0


def test_a_compaction_record_is_kept_uninterpreted(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    record = {"type": "compaction", "summary": "earlier talk", "kept_from": 3}
    path.write_bytes(line(USER) + line(record))
    entry = read_session(path).entries[1]
    assert isinstance(entry, CompactionEntry)
    assert entry.to_json() == record
    assert prompt_view(read_session(path).entries) == [USER["message"]]


# --- torn tails and corruption ------------------------------------------------------


def test_a_torn_final_line_is_dropped_and_reported_with_line_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good = line(USER) + line(FINAL)
    fragment = line(USER)[:17]
    path.write_bytes(good + fragment)
    log = read_session(path)
    assert len(log.entries) == 2
    assert log.torn_tail is not None
    assert (log.torn_tail.line, log.torn_tail.offset, log.torn_tail.fragment) == (3, len(good), fragment)
    assert log.size == len(good)
    assert f"s.jsonl:3: (byte {len(good)})" in log.torn_tail.describe()


def test_a_complete_record_without_its_newline_is_still_torn(tmp_path: Path) -> None:
    # The writer fsyncs after the newline, so a line without it was never acknowledged.
    path = tmp_path / "s.jsonl"
    path.write_bytes(line(USER) + line(FINAL).rstrip(b"\n"))
    log = read_session(path)
    assert len(log.entries) == 1 and log.torn_tail is not None


def test_a_garbage_line_in_the_middle_is_corruption_naming_path_line_and_byte(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    first = line(USER)
    path.write_bytes(first + b"{not json\n" + line(FINAL))
    with pytest.raises(SessionCorruption) as caught:
        read_session(path)
    error = caught.value
    assert (error.path, error.line, error.byte) == (path, 2, len(first))
    assert str(error).startswith(f"{path}:2: (byte {len(first)}) line is not JSON")
    assert "\n" not in str(error)


def test_invalid_utf8_is_corruption_at_the_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    first = line(USER)
    bad = b'{"type":"message","message":{"role":"user","content":"\xff"}}\n'
    path.write_bytes(first + bad)
    with pytest.raises(SessionCorruption, match="not valid UTF-8") as caught:
        read_session(path)
    assert caught.value.line == 2
    assert caught.value.byte == len(first) + bad.index(b"\xff")


def test_an_empty_line_inside_the_session_is_corruption(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(line(USER) + b"\n" + line(FINAL))
    with pytest.raises(SessionCorruption, match="empty line") as caught:
        read_session(path)
    assert caught.value.line == 2


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ({"type": "tool_execution", "execution_id": "e1", "status": "running"}, "lacks tool_call_id"),
        ({"type": "message"}, "no 'message' object"),
        ({"type": "message", "message": {"content": "x"}}, "malformed"),
        ({"type": "message", "message": {"role": "assistant", "tool_calls": [{"id": "c"}]}}, "malformed"),
        ({"type": "message", "message": {"role": "assistant", "tool_calls": ["c"]}}, "malformed"),
        ({"type": "message", "message": {"role": "assistant", "tool_calls": "abc"}}, "malformed"),
        ({"type": "message", "message": {"role": 5}}, "malformed"),
        ({"type": "checkpoint"}, "unknown record type 'checkpoint'"),
        ({"message": {}}, "unknown record type None"),
        (["not", "an", "object"], "must be a JSON object"),
    ],
)
def test_a_record_with_missing_or_bad_fields_is_corruption(tmp_path: Path, record: Any, problem: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(line(USER) + encode_line(record))
    with pytest.raises(SessionCorruption, match=problem) as caught:
        read_session(path)
    assert caught.value.line == 2


def test_a_newer_format_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(line({**USER, "format_version": FORMAT_VERSION + 1}))
    with pytest.raises(SessionCorruption, match=f"format_version {FORMAT_VERSION + 1}"):
        read_session(path)


def test_the_current_format_version_is_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(line({**USER, "format_version": FORMAT_VERSION}))
    assert len(read_session(path).entries) == 1


@pytest.mark.parametrize(
    "content",
    [
        b"",
        line(USER),
        line(USER) + b'{"type":"mess',
        line(USER) + b"garbage\n" + line(FINAL),
        b"\xff\n",
    ],
)
def test_the_reader_never_modifies_the_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(content)
    before = os.stat(path)
    with contextlib.suppress(SessionCorruption):
        read_session(path)
    assert path.read_bytes() == content
    assert os.stat(path).st_mtime_ns == before.st_mtime_ns
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


# --- the writer ---------------------------------------------------------------------


class FsyncSpy:
    """Counts fsyncs by what they were called on (a file or a directory)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        real = os.fsync

        def spy(fd: int) -> None:
            import stat

            self.calls.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
            real(fd)

        monkeypatch.setattr(os, "fsync", spy)


def test_creating_a_session_fsyncs_the_file_and_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = FsyncSpy(monkeypatch)
    with SessionWriter(tmp_path / "s.jsonl"):
        pass
    assert sorted(spy.calls) == ["dir", "file"]


def test_opening_an_existing_session_does_not_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(line(USER))
    spy = FsyncSpy(monkeypatch)
    with SessionWriter(path):
        pass
    assert spy.calls == []


def test_each_append_writes_one_line_and_fsyncs_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.jsonl"
    with SessionWriter(path) as writer:
        spy = FsyncSpy(monkeypatch)
        writer.append(USER)
        assert spy.calls == ["file"]
        assert path.read_bytes() == line(USER)
        writer.append(FINAL)
        assert spy.calls == ["file", "file"]
    assert path.read_bytes() == line(USER) + line(FINAL)


def test_appended_entries_read_back_equal(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "s.jsonl"
    records = [json.loads(text) for text in RECOVERY.read_text(encoding="utf-8").splitlines()]
    with SessionWriter(path) as writer:
        for entry in read_session(RECOVERY).entries:
            writer.append_entry(entry)
    assert [e.to_json() for e in read_session(path).entries] == records


def test_the_writer_hands_each_line_to_before_append_first(tmp_path: Path) -> None:
    seen: list[tuple[Path, bytes, bytes]] = []
    path = tmp_path / "s.jsonl"

    def hook(where: Path, data: bytes) -> None:
        seen.append((where, data, path.read_bytes()))

    with SessionWriter(path, before_append=hook) as writer:
        writer.append(USER)
    assert seen == [(path, line(USER), b"")]


def test_the_writer_sets_a_torn_tail_aside_and_the_next_append_reads_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    good = line(USER)
    fragment = line(FINAL)[:9]
    path.write_bytes(good + fragment)
    with SessionWriter(path) as writer:
        assert writer.repaired is not None
        assert (writer.repaired.offset, writer.repaired.fragment) == (len(good), fragment)
        assert path.read_bytes() == good
        writer.append(FINAL)
    kept = tmp_path / f"s.jsonl.torn-{len(good)}"
    assert kept.read_bytes() == fragment
    log = read_session(path)
    assert log.torn_tail is None
    assert [e.to_json() for e in log.entries] == [USER, FINAL]


def test_a_file_that_is_only_a_fragment_is_set_aside_whole(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type":')
    with SessionWriter(path) as writer:
        writer.append(USER)
    assert (tmp_path / "s.jsonl.torn-0").read_bytes() == b'{"type":'
    assert [e.to_json() for e in read_session(path).entries] == [USER]


def test_a_second_tear_at_the_same_offset_does_not_overwrite_the_first_fragment(tmp_path: Path) -> None:
    # Depth-2 crashes: the recovering life's first append can be torn at the very offset
    # where the previous life's fragment was cut. Both fragments must survive.
    path = tmp_path / "s.jsonl"
    good = line(USER)
    path.write_bytes(good + b"first fragment")
    SessionWriter(path).close()
    with path.open("ab") as handle:
        handle.write(b"second fragment")
    SessionWriter(path).close()
    kept = sorted(p.read_bytes() for p in tmp_path.iterdir() if p.name != "s.jsonl")
    assert kept == [b"first fragment", b"second fragment"]
    assert path.read_bytes() == good


def test_a_clean_file_is_not_touched_by_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(line(USER))
    with SessionWriter(path) as writer:
        assert writer.repaired is None
    assert path.read_bytes() == line(USER)
    assert [p.name for p in tmp_path.iterdir()] == ["s.jsonl"]
