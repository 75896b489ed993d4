"""The docs are kept honest by tests: every relative link and every repository path they name
resolves, every ``docs/*.md`` the source points to exists, every recovery outcome is
documented, and every count they state is the code's.

A count the docs state is checked against what it counts, so adding a mutant, a broken file
or a scenario fails here until the sentence that counts them says the new number.
Exploration's kills need a real run: ``tests/harness/front/test_explore.py`` checks them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from crashmatrix.harness.core.evals import CRASH_QUESTIONS
from crashmatrix.harness.core.records import entry_from_json
from crashmatrix.harness.verdict.invariants import INVARIANTS, Evidence, not_applicable
from crashmatrix.reference_agent.mutants import MUTANTS
from crashmatrix.reference_agent.recovery import OUTCOMES

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "scenarios" / "README.md"])
DOCS += [ROOT / "tests" / "README.md"]
# Folders a path in the docs starts with when it names a file of this repository.
TOP = ("harness", "mock_tools", "reference_agent", "reports", "scenarios", "tests", "docs", "examples")
TOP += ("benchmarks", ".ci")
# Written by every run, absent from a fresh clone.
GENERATED = ("reports/latest",)

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\s]+)`")
DOCS_POINTER = re.compile(r"\bdocs/[\w.-]+\.md\b")


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _ids(paths: list[Path]) -> list[str]:
    return [str(p.relative_to(ROOT)) for p in paths]


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_every_relative_link_resolves(doc: Path) -> None:
    broken = []
    for target in LINK.findall(_text(doc)):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a URL (none should be needed: the docs work offline) or an anchor
        if not (doc.parent / target.partition("#")[0]).exists():
            broken.append(target)
    assert broken == [], f"{doc.relative_to(ROOT)} links to missing files"


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_every_repository_path_in_code_spans_exists(doc: Path) -> None:
    # `harness/front/cases.py`, `tests/harness/data/broken/`, or a module's attribute
    # (`harness/lives/injector.run_case`); globs and placeholders are not paths.
    missing = []
    for span in CODE.findall(_text(doc)):
        path = span.rstrip("/")
        if path.split("/")[0] not in TOP or "/" not in path or re.search(r"[*<>{}\[\]$]", path):
            continue
        if path in GENERATED or (ROOT / path).exists():
            continue
        module = path.rsplit(".", 1)[0] + ".py"
        if "." in path and (ROOT / module).is_file():
            continue
        missing.append(span)
    assert missing == [], f"{doc.relative_to(ROOT)} names files that do not exist"


def test_every_docs_page_the_source_points_to_exists() -> None:
    sources = [
        p
        for folder in (
            "harness",
            "mock_tools",
            "reference_agent",
            "reports",
            "benchmarks",
            "examples",
            "tests",
        )
        for p in (ROOT / folder).rglob("*")
        if p.suffix in (".py", ".md", ".yaml") and "data" not in p.relative_to(ROOT).parts
    ]
    pointers = {
        (str(path.relative_to(ROOT)), pointer)
        for path in [*sources, *DOCS]
        for pointer in DOCS_POINTER.findall(_text(path))
    }
    assert pointers, "the pattern finds nothing: it no longer matches how the source points to docs"
    assert sorted((where, page) for where, page in pointers if not (ROOT / page).is_file()) == []


def test_every_recovery_outcome_is_documented_in_the_outcome_table() -> None:
    # scenarios/README.md, "## Outcomes": one row per outcome, in OUTCOMES' order.
    section = _text(ROOT / "scenarios" / "README.md").split("\n## Outcomes\n", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE)
    assert documented == list(OUTCOMES)


def _stated(doc: str, pattern: str) -> list[int]:
    """Every number ``pattern``'s group captures in ``doc``; at least one, or the sentence
    that states it was reworded and this test must follow."""
    found = [int(n) for n in re.findall(pattern, _text(ROOT / doc))]
    assert found, f"{doc} no longer says {pattern!r}"
    return found


def test_the_readme_counts_every_mutant() -> None:
    assert set(_stated("README.md", r"(\d+) deliberately broken agents")) == {len(MUTANTS)}


def test_the_readme_counts_every_broken_file_message() -> None:
    broken = list((ROOT / "tests" / "harness" / "data" / "broken").glob("*.yaml"))
    assert _stated("README.md", r"pins (\d+) such messages") == [len(broken)]


def test_the_scenario_readme_counts_every_scenario() -> None:
    suite = ROOT / "scenarios"
    scenarios = [p for p in suite.rglob("*.yaml") if "contracts" not in p.relative_to(suite).parts]
    assert _stated("scenarios/README.md", r"holds (\d+) scenarios") == [len(scenarios)]


def test_the_exploration_doc_counts_its_kills_out_of_every_mutant() -> None:
    text = _text(ROOT / "docs" / "exploration.md")
    (killed, of) = re.findall(r"\*\*(\d+) of (\d+) killed\*\*", text)[0]
    names = re.search(r"Killed: ([\w,\s]+)\.\s+Survivors?: ([\w,\s]+?) \(", text)
    assert names, "docs/exploration.md no longer lists the killed mutants and the survivors"
    kills, survivors = ({n.strip() for n in group.split(",")} for group in names.groups())
    assert (int(killed), int(of)) == (len(kills), len(MUTANTS))
    assert kills | survivors == set(MUTANTS) and not kills & survivors


def test_the_quick_start_puts_crashmatrix_on_path_before_any_command_uses_it() -> None:
    # The README's commands and every rerun line a failure prints call the bare
    # ``crashmatrix``: only an active venv makes that name exist after the quick start.
    readme = _text(ROOT / "README.md")
    quick, rest = readme.split("\n## Quick start\n", 1)[1].split("\n## ", 1)
    blocks = re.findall(r"```bash\n(.*?)```", quick, re.S)
    assert blocks and all(re.search(r"\. \.venv/bin/activate && pip install", block) for block in blocks)
    assert "crashmatrix run " in rest  # what the activation is for
    assert not re.search(r"(?<![\w/.])\.venv/bin/(pip|pytest|crashmatrix) ", quick)  # one way, not two


def test_adapters_md_says_what_each_check_needs_and_quotes_the_codes_reasons() -> None:
    section = _text(ROOT / "docs" / "adapters.md").split("\n## What each check needs from your agent\n")[1]
    rows = [row.split(" | ") for row in section.split("\n## ")[0].splitlines() if row.startswith("| `")]
    invariants = {CODE.findall(check)[0]: said for check, _, said in rows if "(scorecard" not in check}
    questions = {CODE.findall(check)[0] for check, _, _ in rows if "(scorecard" in check}
    assert set(invariants) == set(INVARIANTS) and questions == set(CRASH_QUESTIONS)
    # Every reason the code gives when an agent does not give a check what it needs: no
    # ledger (WHY as the docs write it), no files, no process tracking, unobserved effects.
    call = {"id": "c", "type": "function", "function": {"name": "send_email", "arguments": "{}"}}
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "", "tool_calls": [call]}]
    entries = [entry_from_json({"type": "message", "message": m}) for m in messages]
    facts = Evidence(
        entries=entries,
        offsets=[1, 2],
        events=(),
        requests=(),
        turns=("go",),
        contracts={},
        has_ledger=False,
        no_ledger="WHY",
        watched=frozenset(),
        survivors=None,
        files=None,
    )
    reasons = not_applicable(facts)
    assert {name for name, _ in reasons} == set(INVARIANTS) - {
        "one_tool_result_per_call",
        "no_user_message_from_recovery",
        "turn_ends_with_final",
        "no_ledger_in_prompt",
        "no_success_without_answer",
        "reads_report_real_content",
        "loser_stops_cleanly",
        "torn_fragments_accounted",
    }
    for name, why in reasons:
        said = invariants[name]
        assert f'"{why}"' in said or said.startswith("the same as `"), (name, why)
