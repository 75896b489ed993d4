"""harness.core.classifier: only plain, allowlisted reads are ever auto-replayed (seed 004)."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crashmatrix.harness.core.classifier import READ_ONLY_PROGRAMS, CommandVerdict, classify_command

SEED_004 = [
    ("ls src", "idempotent", "auto", "read_only"),
    ("ls", "idempotent", "auto", "read_only"),
    ("npm test", "conditional", "ask", "test"),
    ("pnpm test", "conditional", "ask", "test"),
    ("yarn test", "conditional", "ask", "test"),
    ("npm install", "non_idempotent", "never", "install"),
    ("npm publish", "non_idempotent", "never", "publish"),
    ("rm -rf dist", "non_idempotent", "never", "destructive"),
    ("prisma migrate deploy", "non_idempotent", "never", "migration"),
    ("echo x >> audit.log", "non_idempotent", "never", "append"),
]


@pytest.mark.parametrize(("command", "idempotency", "policy", "kind"), SEED_004)
def test_seed_004_examples_get_the_seed_classes(
    command: str, idempotency: str, policy: str, kind: str
) -> None:
    verdict = classify_command(command)
    assert (verdict.idempotency, verdict.replay_policy, verdict.kind) == (idempotency, policy, kind)


SAFE = [
    "pwd",
    "ls -la src",
    "cat README.md",
    "wc -l src/main.py",
    "head -n 20 notes.txt",
    "tail -n 5 log.txt",
    "rg --line-number TODO src",
    "grep -rn needle src",
    "find . -type f -name main.py",
    "sed -n 1,5p file.txt",
    "sed -n p file.txt",
    "  ls   src  ",
    "ls user@host:path a+b c=d e,f",
]


@pytest.mark.parametrize("command", SAFE)
def test_plain_allowlisted_reads_are_auto(command: str) -> None:
    verdict = classify_command(command)
    assert (verdict.idempotency, verdict.replay_policy, verdict.kind) == ("idempotent", "auto", "read_only")


HOSTILE = [
    ("ls; rm -rf x", "destructive"),
    ("ls;rm -rf x", "destructive"),
    ("ls && npm publish", "publish"),
    ("ls || npm publish", "publish"),
    ("ls | sh", "wrapper"),
    ("npm publish; rm -rf x", "destructive"),
    ("ls | wc -l | xargs rm", "wrapper"),
    ("ls;", "compound"),
    ("ls ;; ls", "compound"),
    ("ls |& cat", "compound"),
    ("ls; ls *.py", "compound"),
    ("ls & npm publish", "compound"),
    ("ls &", "compound"),
    ("(ls)", "compound"),
    ("ls\nrm -rf /", "compound"),
    ("ls\rrm -rf /", "compound"),
    ("ls $(npm publish)", "substitution"),
    ("ls `npm publish`", "substitution"),
    ("ls ${HOME}", "substitution"),
    ("ls $HOME", "substitution"),
    ("ls '$HOME'", "substitution"),
    ("cat <(npm publish)", "substitution"),
    ("ls >(tee x)", "substitution"),
    ("ls > out", "redirect"),
    ("ls 2> err", "redirect"),
    ("ls 2>&1", "redirect"),
    ("cat < in", "redirect"),
    ("cat <<EOF", "redirect"),
    ("cat x >| y", "redirect"),
    ("echo sent >> audit.log", "append"),
    ("FOO=1 ls", "unknown"),
    ("PATH=. ls", "unknown"),
    ("l\u0455", "unknown"),  # Cyrillic dze looks like s
    ("\uff4c\uff53", "unknown"),  # fullwidth ls
    ("ls\u200b", "unknown"),  # zero-width space
    ("ls\u00a0src", "unknown"),  # no-break space
    ("ls\x00src", "unknown"),
    ("ls\tsrc", "unknown"),
    ("ls\x1b[2J", "unknown"),
    ("", "empty"),
    ("   ", "empty"),
    ("/bin/ls", "unknown"),
    ("./ls", "unknown"),
    ('l"s"', "unknown"),
    ("'ls'", "unknown"),
    ("l\\s", "unknown"),
    ('ls "unbalanced', "unknown"),
    ("ls *.py", "unknown"),
    ("ls ~", "unknown"),
    ("ls {a,b}", "unknown"),
    ("ls # comment", "unknown"),
    ("find . -delete", "destructive"),
    ("find . -exec rm x +", "unknown"),
    ("find . -execdir rm x +", "unknown"),
    ("find . -ok rm x +", "unknown"),
    ("find . -fprint out", "write"),
    ("find . -fprintf out x", "write"),
    ("sed -i s/a/b/ f", "write"),
    ("sed -ni p f", "write"),
    ("sed s/a/b/w f", "unknown"),
    ("sed -n 1e f", "unknown"),
    ("tail -f log", "unknown"),
    ("tail -F log", "unknown"),
    ("tail --follow=name log", "unknown"),
    ("rg --pre=sh x", "unknown"),
    ("rg --pre sh x", "unknown"),
    ("rg -z x", "unknown"),
    ("npm test -- --coverage '*'", "unknown"),
    ("npm run build", "unknown"),
    ("npx prisma migrate deploy", "migration"),
    ("git push", "publish"),
    ("git clean -fdx", "destructive"),
    ("pip install requests", "install"),
    ("sudo ls", "wrapper"),
    ("xargs rm", "wrapper"),
    ("env ls", "wrapper"),
    ("curl http://x", "network"),
    ("mv a b", "write"),
    ("touch x", "write"),
    ("LS", "unknown"),
    ("echo hello", "unknown"),
    ("python -c print", "unknown"),
]


@pytest.mark.parametrize(("command", "kind"), HOSTILE)
def test_hostile_commands_are_never_replayed(command: str, kind: str) -> None:
    verdict = classify_command(command)
    assert (verdict.idempotency, verdict.replay_policy) == ("non_idempotent", "never")
    assert verdict.kind == kind, verdict.reason


def test_append_reason_names_the_double_append() -> None:
    assert "'>>'" in classify_command("echo x >> audit.log").reason


def test_reason_is_one_sentence_naming_the_offending_character() -> None:
    reason = classify_command("l\u0455").reason
    assert "U+0455" in reason
    assert "\n" not in reason and reason.endswith(".")


def test_verdict_is_a_frozen_slotted_value() -> None:
    verdict = classify_command("ls")
    assert not hasattr(verdict, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.kind = "x"  # type: ignore[misc]


def test_a_non_string_command_is_refused_not_raised() -> None:
    verdict = classify_command(123)  # type: ignore[arg-type]
    assert verdict.replay_policy == "never"


# Characters that make a command never auto, wherever they are; ';', '&&', '||' and '|'
# only join parts that are each judged on their own (below).
METACHARACTERS = "<>$`\n()"
SEPARATORS = re.compile(r"\s*(?:;|&&|\|\||\|)\s*")


@given(st.text(), st.sampled_from(METACHARACTERS), st.text())
def test_any_shell_metacharacter_prevents_auto(prefix: str, meta: str, suffix: str) -> None:
    verdict = classify_command(prefix + meta + suffix)
    assert verdict.replay_policy != "auto"
    assert verdict.idempotency != "idempotent"


READ_ONLY_COMPOUND = ["ls | wc -l", "pwd && ls", "pwd; ls src", "cat README.md | grep -n x", "ls nope || pwd"]


@pytest.mark.parametrize("command", READ_ONLY_COMPOUND)
def test_a_compound_of_read_only_parts_is_auto(command: str) -> None:
    verdict = classify_command(command)
    assert (verdict.idempotency, verdict.replay_policy, verdict.kind) == ("idempotent", "auto", "read_only")


@pytest.mark.parametrize(
    ("command", "policy", "kind"),
    [
        ("ls; rm -rf src", "never", "destructive"),  # seed 004's prefix regex calls this read-only
        ("ls && npm publish", "never", "publish"),
        ("pwd | npm install", "never", "install"),
        ("npm publish; rm -rf x; ls", "never", "destructive"),  # a destructive part names the whole
        ("ls && npm test", "ask", "test"),
        ("npm test | wc -l", "ask", "test"),
    ],
)
def test_a_compound_command_is_as_bad_as_its_worst_part(command: str, policy: str, kind: str) -> None:
    verdict = classify_command(command)
    assert (verdict.replay_policy, verdict.kind) == (policy, kind)
    assert "part" in verdict.reason


@given(
    st.lists(
        st.sampled_from([*SAFE, *READ_ONLY_COMPOUND, *(c for c, *_ in SEED_004)]), min_size=1, max_size=4
    ),
    st.lists(st.sampled_from([";", " && ", " || ", " | ", "; "]), min_size=3, max_size=3),
)
def test_a_compound_is_auto_exactly_when_every_part_is(parts: list[str], seps: list[str]) -> None:
    command = (
        "".join(p + s for p, s in zip(parts, seps, strict=False)) + parts[-1] if len(parts) > 1 else parts[0]
    )
    every_part_auto = all(classify_command(p).replay_policy == "auto" for p in SEPARATORS.split(command))
    assert (classify_command(command).replay_policy == "auto") == every_part_auto


@given(st.text(), st.characters(min_codepoint=0x80), st.text())
def test_any_non_ascii_character_prevents_auto(prefix: str, char: str, suffix: str) -> None:
    verdict = classify_command(prefix + char + suffix)
    assert (verdict.idempotency, verdict.replay_policy) == ("non_idempotent", "never")


@given(
    st.sampled_from(SAFE),
    st.sampled_from([";", "&&", "||", "|", "&", "\n", " ; ", " && ", "$(", "`", ">", ">>", "<"]),
    st.text(),
)
def test_an_allowlisted_command_composed_with_anything_is_auto_only_if_every_part_is(
    safe: str, sep: str, tail: str
) -> None:
    for command in (safe + sep + tail, tail + sep + safe):
        if classify_command(command).replay_policy == "auto":
            assert sep.strip() in (";", "&&", "||", "|")
            assert all(classify_command(part).replay_policy == "auto" for part in SEPARATORS.split(command))


@given(st.text())
def test_classify_never_raises_and_is_deterministic(text: str) -> None:
    first = classify_command(text)
    assert isinstance(first, CommandVerdict)
    assert first == classify_command(text)
    assert first.reason and "\n" not in first.reason


@given(st.text())
def test_auto_only_for_allowlisted_programs_with_plain_words(text: str) -> None:
    verdict = classify_command(text)
    if verdict.replay_policy == "auto":
        for part in SEPARATORS.split(text):
            assert part.split()[0] in READ_ONLY_PROGRAMS
        assert all(c.isascii() and (c.isalnum() or c in " -_./=,:@+;|&") for c in text)
