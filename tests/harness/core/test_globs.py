"""Globs read as pathlib and shells read them: ``*`` within a segment, ``**`` across any."""

from __future__ import annotations

import fnmatch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crashmatrix.harness.core.globs import matches


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        ("notes.txt", "*.txt", True),
        ("notes/old.txt", "*.txt", False),  # fnmatch said True: * crossed the /
        ("outbox/new/1.eml", "outbox/new/*.eml", True),
        ("outbox/tmp/1.eml", "outbox/new/*.eml", False),
        ("outbox/new/1.eml", "outbox/**/*.eml", True),
        ("outbox/1.eml", "outbox/**/*.eml", True),  # ** is also no segment at all
        ("outbox/a/b/c/1.eml", "outbox/**/*.eml", True),
        ("dist/a/b.js", "dist/**", True),
        ("dist", "dist/**", False),
        ("a.log", "?.log", True),
        ("ab.log", "?.log", False),
        ("x1.txt", "x[0-9].txt", True),
        ("xa.txt", "x[!0-9].txt", True),
        ("x1.txt", "x[!0-9].txt", False),
        ("x[.txt", "x[.txt", True),  # an unclosed bracket is itself
        ("a.b", "a?b", True),
        ("a+b", "a+b", True),  # regex characters are literal
    ],
)
def test_a_glob_names_the_paths_a_shell_would(path: str, pattern: str, expected: bool) -> None:
    assert matches(path, pattern) is expected


SEGMENT = st.text(alphabet="abc.-_", min_size=1, max_size=4)


@given(st.lists(SEGMENT, min_size=1, max_size=3), st.text(alphabet="abc.*?", min_size=1, max_size=5))
def test_within_one_segment_it_agrees_with_fnmatch(segments: list[str], pattern: str) -> None:
    # A pattern without / and a path of one segment: the two readings agree.
    path = segments[0]
    assert matches(path, pattern) is fnmatch.fnmatchcase(path, pattern)


@given(st.lists(SEGMENT, min_size=2, max_size=4))
def test_star_never_crosses_a_slash_and_double_star_always_does(segments: list[str]) -> None:
    path = "/".join(segments)
    assert not matches(path, "*")
    assert matches(path, "**")
    assert matches(path, segments[0] + "/**")
