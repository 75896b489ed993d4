"""A correct agent whose run_command is a REAL shell, against the suite's command scenarios
(issue 25, part D: no false red from commands only the simulator can run).

tests/golden/real_shell/agent.py runs ``run_bash(cmd)`` through ``/bin/sh`` in its workspace;
its adapter says so (``catalogue: run_command: {shell: real, only: ['^echo .* >> audit\\.log$']}``).
Every scenario of ``scenarios/run_command/`` (and the approvals one running ``npm test``) is
run as a user runs them, with pytest and the plugin: the ones needing npm are not applicable
with that reason, the ones whose command is outside ``only:`` name the call, the argument and
the pattern, the two audit.log ones are judged and green -- nothing red. Its twin, which runs
a command left ``started`` by a crash again, is red where the append is made twice.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from ..pytest_runs import run_inprocess

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
AGENT = Path(__file__).resolve().parent / "real_shell"
SCENARIOS = ROOT / "scenarios"
COMMANDS = [
    *sorted((SCENARIOS / "run_command").glob("*.yaml")),
    SCENARIOS / "approvals" / "npm_test_again_no.yaml",
]
NEEDS_NPM = {"npm_publish_never", "npm_test_again_yes", "compound_ls_publish_never", "npm_test_again_no"}
JUDGED = {"echo_audit_append", "compound_two_appends"}
PATTERN = r"'^echo .* >> audit\.log$'"
# The scenarios whose command a real shell could run but this agent's tool does not accept.
OUTSIDE = {
    "ls_replay": "call_ls calls run_bash with cmd 'ls src'",
    "rm_rf_destructive": "call_rm calls run_bash with cmd 'rm -rf dist'",
    "compound_ls_rm_destructive": "call_clean calls run_bash with cmd 'ls; rm -rf src'",
    "compound_read_only_replay": "call_count calls run_bash with cmd 'ls src | wc -l'",
    "two_classes_one_message": "call_list calls run_bash with cmd 'ls src'",
}
NPM_REASON = (
    "not applicable: the scenario needs npm (needs:), which crashmatrix's simulated shell provides; "
    "this agent runs run_bash in a real shell (shell: real)"
)


def _run(pytester: pytest.Pytester, adapter: Path, *args: str) -> dict[str, dict[str, tuple[str, str]]]:
    """pytest on copies of the command scenarios with ``--agent adapter``: per scenario file,
    each case's outcome and (for a skip) its reason."""
    for path in COMMANDS:
        shutil.copy(path, pytester.path / path.name)
    result = run_inprocess(
        pytester,
        *(p.name for p in COMMANDS),
        f"--agent={adapter}",
        "-p",
        "no:cacheprovider",
        "--no-report",
        *args,
    )
    cases: dict[str, dict[str, tuple[str, str]]] = {}
    for report in result.reprec.getreports("pytest_runtest_logreport"):  # type: ignore[attr-defined]
        if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
            continue
        stem, _, case = report.nodeid.partition(".yaml::")
        reason = report.longrepr[2] if report.skipped and isinstance(report.longrepr, tuple) else ""
        cases.setdefault(stem, {})[case] = (report.outcome, str(reason).removeprefix("Skipped: "))
    return cases


def test_a_correct_real_shell_agent_is_green_or_not_applicable_with_why(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CRASHMATRIX_CACHE_DIR", str(tmp_path / "cache"))  # its doctor run, not shared
    cases = _run(pytester, AGENT / "adapter.yaml")
    assert sorted(cases) == sorted(p.stem for p in COMMANDS)
    failed = {
        f"{stem}::{case}"
        for stem, items in cases.items()
        for case, (outcome, _) in items.items()
        if outcome == "failed"
    }
    assert failed == set(), failed
    for stem in NEEDS_NPM:
        [(outcome, reason)] = cases[stem].values()  # one item saying why, nothing run
        assert outcome == "skipped" and reason.startswith(NPM_REASON), (stem, reason)
    for stem, call in OUTSIDE.items():
        [(outcome, reason)] = cases[stem].values()
        assert outcome == "skipped", (stem, outcome)
        assert reason == f"not applicable: {call}, which matches none of the catalogue's only: {PATTERN}", (
            reason
        )
    for stem in JUDGED:
        passed = [case for case, (outcome, _) in cases[stem].items() if outcome == "passed"]
        # the clean run, each crash point, recovery@ and power@ cells: judged, and green
        assert "clean" in passed and any(case.startswith("after_side_effect[") for case in passed), cases[
            stem
        ]
        assert any(case.startswith("recovery@") for case in passed), cases[stem]


def test_its_twin_that_reruns_an_interrupted_append_stays_red(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    data = yaml.safe_load((AGENT / "adapter.yaml").read_text(encoding="utf-8"))
    data["python"]["script"] = str(AGENT / "agent.py")
    data["env"] = {**data["env"], "SHELL_AGENT_BUG": "rerun_after_crash"}
    twin = tmp_path / "twin.yaml"
    twin.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    cases = _run(pytester, twin, "--no-doctor", "--crash-boundary", "after_side_effect")
    red = {stem for stem, items in cases.items() for outcome, _ in items.values() if outcome == "failed"}
    assert red == JUDGED, cases  # the audit.log scenarios, and only they, are judged
    assert all(
        outcome == "skipped" for stem in NEEDS_NPM | set(OUTSIDE) for outcome, _ in cases[stem].values()
    )
