"""``crashmatrix init`` end to end: the adapter it writes for an agent of each common shape
runs, and its first crash case gives the true verdict (each test agent's naive recovery does
its effect again: red, "no double effect"); for every kind-2/3 example, the clean run it
makes passes a boundary, or init names its TODOs. Slow: lives are real processes."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from crashmatrix.harness.front.cli import main as cli
from crashmatrix.harness.front.init import main_init
from crashmatrix.harness.input.suite import BUILTIN_SUITE

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
AGENTS = Path(__file__).parent / "data" / "init_agents"
EXAMPLES = sorted(
    path.parent / "agent.py"
    for path in (ROOT / "examples").glob("*/adapter.yaml")
    if re.search(r"^(python|command):", path.read_text(encoding="utf-8"), re.MULTILINE)
)
GOLDEN = sorted((ROOT / "tests" / "golden").glob("*/agent.py"))
# The agents whose adapter init writes whole, with no hand edit: a working adapter is exit 0.
# The others (memo_agent's Maildir outbox and the order service URL its tools are handed,
# seed000_agent's session named from an id, real_shell's session and shell) must name what
# they lack as TODOs.
WHOLE = {
    "examples/blackbox_agent",
    "examples/desk_agent",
    "examples/http_agent",
    "examples/python_agent",
    "examples/state_agent",
    "golden/approvals",
    "golden/dispatch_dict",
    "golden/harness_writes",
    "golden/no_ledger",
    "golden/own_session_tamper",
    "golden/planned_first",
    "golden/scorecard_classes",
    "golden/sentence_results",
    "golden/torn_session",
}
_BOUNDARY_POINT = re.compile(r"^  (?!torn_write|after_model_reply)\w+\[", re.MULTILINE)


@pytest.mark.parametrize(
    ("agent", "scenario", "crash"),
    [
        # a REPL, its mail tool in a dispatch dict under its own names, an outbox JSONL
        ("repl_mailer.py", "send_email/send_once.yaml", "after_side_effect[call_mail]"),
        # a function-call entry point, @tool registry, SQLite conversation and orders
        ("order_bot.py", "create_order/keyed_once.yaml", "before_tool_result[call_order]"),
        # readline REPL, a ledger in its JSONL session, orders over HTTP
        ("ledger_orders.py", "create_order/keyed_once.yaml", "after_side_effect[call_order]"),
        # one process per message, the message in argv
        ("oneshot_cli.py", "send_email/send_once.yaml", "after_side_effect[call_mail]"),
        # a dispatch dict written where it is used, sentences for Tool Results
        ("inline_mailer.py", "send_email/send_once.yaml", "after_side_effect[call_mail]"),
        # schemas from a comprehension over tuples, an if/elif on the tool's name, sentences
        ("spec_orders.py", "create_order/keyed_once.yaml", "after_side_effect[call_order]"),
        # schemas from a helper over tuples, a match on the tool's name, sentences
        ("match_mailer.py", "send_email/send_once.yaml", "after_side_effect[call_mail]"),
    ],
)
def test_the_adapter_init_writes_gives_a_first_true_verdict(
    agent: str, scenario: str, crash: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "adapter.yaml"
    status = main_init([str(AGENTS / agent), "--out", str(out)])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "clean case: passed" in printed
    assert crash in printed  # the point the bug shows at is one a clean run reaches
    status = cli(
        [
            "run",
            str(ROOT / "scenarios" / scenario),
            "--agent",
            str(out),
            "--crash",
            crash,
            "--keep",
            str(tmp_path / "case"),
        ]
    )
    verdict = capsys.readouterr().out
    assert status == 1, verdict
    assert "INVARIANT non_idempotent_at_most_once" in verdict
    assert re.search(r"MISMATCH world\.(emails|orders): expected 1, observed 2", verdict), verdict


@pytest.mark.parametrize("agent", EXAMPLES + GOLDEN, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_every_example_gets_a_clean_run_past_a_boundary_or_named_todos(
    agent: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main_init([str(agent), "--out", str(tmp_path / "adapter.yaml")])
    printed = capsys.readouterr().out
    todos = [line for line in printed.splitlines() if line.startswith("TODO: ")]
    if f"{agent.parent.parent.name}/{agent.parent.name}" in WHOLE:
        assert status == 0, printed
    if status == 0:
        assert "clean case: passed" in printed and _BOUNDARY_POINT.search(printed), printed
        assert not any("(blocks a run)" in line for line in todos)
    else:
        assert status == 1 and todos, printed


def test_the_careful_twin_is_green_in_every_case_with_the_adapter_init_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """careful_mailer is repl_mailer whose recovery looks in its outbox first and finishes a
    cut turn: init's adapter, unedited, must give it no red anywhere (no false red), where
    repl_mailer is red at after_side_effect (above)."""
    out = tmp_path / "adapter.yaml"
    assert main_init([str(AGENTS / "careful_mailer.py"), "--out", str(out), "--no-run"]) == 0
    capsys.readouterr()
    status = cli(["run", str(ROOT / "scenarios" / "send_email" / "send_once.yaml"), "--agent", str(out)])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert re.search(r"^(\d+) passed, 0 failed", printed, re.MULTILINE), printed
    assert "after_side_effect[call_mail] ... passed" in printed
    assert "recovery@after_side_effect[call_mail] ... passed" in printed


def test_the_five_minute_agent_copied_alone_gets_a_whole_adapter_and_its_true_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/five-minutes.md's walk: shop_agent.py copied into a folder of its own, ``crashmatrix
    init shop_agent.py`` there. Its tools return sentences (f"sent to {to}"): read as auto they
    were "error", and the clean case failed ("told error, but it happened"). The adapter init
    writes, unedited, names the double send counted in the agent's own outbox, and nothing
    else at the send."""
    folder = tmp_path / "shop"
    folder.mkdir()
    shutil.copy(ROOT / "examples" / "five_minutes" / "shop_agent.py", folder)
    monkeypatch.chdir(folder)
    status = main_init(["shop_agent.py"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "TODO" not in printed and "# TODO" not in (folder / "adapter.yaml").read_text(encoding="utf-8")
    assert "clean case: passed" in printed

    def run(crash: str) -> tuple[int, str, Path]:
        keep = tmp_path / "cases" / re.sub(r"\W", "_", crash)
        argv = ["run", str(BUILTIN_SUITE / "send_email" / "send_once.yaml"), "--agent", "adapter.yaml"]
        status = cli([*argv, "--crash", crash, "--keep", str(keep)])
        return status, capsys.readouterr().out, keep

    status, verdict, keep = run("after_side_effect[call_mail]")
    assert status == 1, verdict
    assert "MISMATCH world.emails: expected 1, observed 2" in verdict
    assert "INVARIANT non_idempotent_at_most_once" in verdict
    (outbox,) = (keep / "after_side_effect[call_mail]").glob("**/workspace/shop/outbox.jsonl")
    assert len(outbox.read_text(encoding="utf-8").splitlines()) == 2
    status, verdict, _ = run("clean")
    assert status == 0 and "send_once.yaml::clean ... passed" in verdict, verdict
    # Killed after the Tool Result is saved, the email went out once and the model was told
    # it did: nothing is judged of the send. The case is still red, for a true reason the
    # walk names: the naive recovery never answers the cut turn (turn_ends_with_final).
    status, verdict, _ = run("after_tool_result[call_mail]")
    assert "MISMATCH" not in verdict and "told_the_truth" not in verdict, verdict
    assert re.findall(r"INVARIANT (\w+)", verdict) == ["turn_ends_with_final"], verdict
