"""``crashmatrix doctor``: every check proves it can see the agent, or is named blind.

The fast tests judge plants from violations (``harness.verdict.coverage``) and carry a blind
check into the invariants; the slow ones plant into real cases of the reference agent, of a
deliberately blinded adapter, and run the plugin's once-per-session self-check.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from crashmatrix.harness.core.boundaries import BOUNDARIES
from crashmatrix.harness.core.records import (
    ExecutionRecord,
    Message,
    MessageEntry,
    ToolCall,
)
from crashmatrix.harness.front import doctor
from crashmatrix.harness.front.cli import main
from crashmatrix.harness.front.doctor import run_doctor
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.injector import LifeLauncher
from crashmatrix.harness.verdict.coverage import (
    BLIND,
    FIRES,
    NOT_APPLICABLE,
    PLANTS,
    Coverage,
    PlantResult,
    Proof,
    judge_plant,
)
from crashmatrix.harness.verdict.invariants import Evidence, Violation, check_all, not_applicable

from ...pytest_runs import run_inprocess

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[3]
DESK = ROOT / "examples" / "desk_agent"
ADAPTERS_DOC = ROOT / "docs" / "adapters.md"
# The adapters whose doctor tables docs/adapters.md shows, one per kind.
DOC_AGENTS = ("reference", "examples/desk_agent/adapter.yaml", "examples/blackbox_agent/adapter.yaml")

# -- fast: judging a plant, and a blind check in the verdict -------------------------------

PLANT = PLANTS[2]  # second_tool_result -> one_tool_result_per_call


def test_a_plant_fires_only_when_its_check_gives_more_violations_than_the_clean_case() -> None:
    old = Violation("one_tool_result_per_call", "already broken in the clean case")
    new = Violation("one_tool_result_per_call", "tool call 'c' has 2 Tool Results")
    fired = judge_plant(PLANT, baseline=[], planted=[new], inapplicable=[], where="line 6 again")
    assert (fired.state, fired.detail) == (FIRES, new.message)
    same = judge_plant(PLANT, baseline=[old], planted=[old], inapplicable=[], where="line 6 again")
    assert same.state == BLIND and "did not fire" in same.detail
    other = Violation("turn_ends_with_final", "the session ends with a tool message")
    silent = judge_plant(PLANT, baseline=[], planted=[other], inapplicable=[], where="w")
    assert (silent.state, silent.also) == (BLIND, ("turn_ends_with_final",))


def test_a_check_the_evidence_cannot_judge_is_not_applicable_with_the_verdicts_reason() -> None:
    result = judge_plant(
        PLANTS[4], baseline=[], planted=[], inapplicable=[(PLANTS[4].check, "no ledger")], where="w"
    )
    assert (result.state, result.detail) == (NOT_APPLICABLE, "no ledger")


def _coverage(*states: str, per_call: bool = False) -> Coverage:
    results = tuple(
        PlantResult(p.name, p.check, state, f"why {p.name}", per_call=per_call and state == BLIND)  # type: ignore[arg-type]
        for p, state in zip(PLANTS, states, strict=False)
    )
    return Coverage("agent-x", "send_email/send_once.yaml", results)


def test_the_summary_counts_the_checks_that_apply_and_names_the_blind_ones() -> None:
    assert _coverage(*[FIRES] * 5).summary() == "doctor: 5/5 checks can fire on agent-x"
    mixed = _coverage(FIRES, BLIND, FIRES, FIRES, NOT_APPLICABLE)
    assert mixed.summary() == (
        "doctor: 3/4 checks can fire on agent-x; blind: turn_ends_with_final; "
        "n.a.: no_result_for_other_arguments"
    )
    assert not mixed.ok and _coverage(*[FIRES] * 5).ok
    assert Coverage.from_json(mixed.to_json()) == mixed
    assert mixed.blind_reasons() == {
        "turn_ends_with_final": "doctor: this adapter cannot show turn_ends_with_final (why torn_last_line)"
    }
    # An unwatched tool's effects: already not applicable call by call, never for every call.
    assert _coverage(BLIND, per_call=True).blind_reasons() == {}


def test_an_unproven_adapter_claim_is_a_blind_spot_named_in_the_summary_and_the_table() -> None:
    fired = Proof("crash_point", "crash point after_running[c] is reachable", FIRES, "killed there")
    silent = Proof(
        "rule",
        "boundary rule a.yaml:30:5 (send_email -> after_side_effect) fires",
        BLIND,
        "never fired in send_email/send_once.yaml: HANDLERS['send_email'] holds the original",
    )
    skipped = Proof("expectation", "expectation code[c] is judged", NOT_APPLICABLE, "results: seed004")
    proven = _coverage(*[FIRES] * 5)
    both = Coverage(proven.agent, proven.scenario, proven.results, proofs=(fired, silent, skipped))
    assert Coverage(proven.agent, proven.scenario, proven.results, proofs=(fired, skipped)).ok
    assert not both.ok and both.blind_proofs == (silent,)
    assert both.summary() == (
        "doctor: 5/5 checks can fire on agent-x; 1/2 adapter claims proven "
        "(unproven: boundary rule a.yaml:30:5 (send_email -> after_side_effect) fires)"
    )
    assert both.blind_reasons() == {}  # no invariant made blind: the matrix names the rule
    rows = both.table().splitlines()
    assert rows[-2] == (
        "| a run of a scenario that calls it | boundary rule a.yaml:30:5 (send_email -> after_side_effect) "
        "fires | NO (blind): never fired in send_email/send_once.yaml: "
        "HANDLERS['send_email'] holds the original |"
    )
    assert Coverage.from_json(both.to_json()) == both


STATUSES = ("approved", "running", "succeeded")


def _evidence(**blind: str) -> Evidence:
    call = ToolCall("c1", "send_email", '{"to": "a"}')
    entries = [
        MessageEntry(Message("user", "hi")),
        MessageEntry(Message("assistant", "", tool_calls=(call,))),
        *(ExecutionRecord("e1", "c1", status, "send_email", "k", "h") for status in STATUSES),
        MessageEntry(Message("tool", '{"ok": true}', tool_call_id="c1")),
        MessageEntry(Message("tool", '{"ok": true}', tool_call_id="c1")),  # a second Tool Result
        MessageEntry(Message("assistant", "Sent.")),
    ]
    return Evidence(entries, [-1] * len(entries), [], [], ["hi"], {}, blind=blind)


def test_a_check_the_doctor_found_blind_is_not_applicable_with_its_reason_never_run() -> None:
    assert "one_tool_result_per_call" in [v.invariant for v in check_all(_evidence())]
    why = "doctor: this adapter cannot show one_tool_result_per_call (planted, yet it did not fire)"
    blinded = _evidence(one_tool_result_per_call=why)
    assert "one_tool_result_per_call" not in [v.invariant for v in check_all(blinded)]
    assert ("one_tool_result_per_call", why) in not_applicable(blinded)


def test_an_unknown_agent_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--agent", "no_such_agent"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--agent='no_such_agent'" in err


# -- slow: real lives --------------------------------------------------------------------


@pytest.fixture(scope="module")
def launcher() -> Iterator[LifeLauncher]:
    yield LifeLauncher(
        "fork", preload=["crashmatrix.harness.agents.reference", "crashmatrix.mock_tools.toolbox"]
    )


@pytest.fixture(scope="module")
def reference(launcher: LifeLauncher, tmp_path_factory: pytest.TempPathFactory) -> Coverage:
    return run_doctor("reference", launcher=launcher, work=tmp_path_factory.mktemp("doctor"))


@pytest.mark.slow
@pytest.mark.parametrize("plant", [p.name for p in PLANTS])
def test_each_plant_fires_its_check_on_the_reference_agent(reference: Coverage, plant: str) -> None:
    result = next(r for r in reference.results if r.plant == plant)
    assert result.state == FIRES, result
    assert result.where  # it says where it planted


@pytest.mark.slow
def test_the_reference_agent_is_fully_covered(reference: Coverage) -> None:
    assert reference.ok, reference.summary()
    assert reference.summary().startswith("doctor: 5/5 checks can fire on reference; ")
    # Every column of send_once's clean run is crashed for real, every expectation key judged.
    crashed = {p.subject.split()[2].partition("[")[0] for p in reference.proofs if p.kind == "crash_point"}
    assert crashed == {*BOUNDARIES, "torn_write"} - {"after_tool_call_pending", "during_side_effect"}, crashed
    judged = [p.subject for p in reference.proofs if p.kind == "expectation"]
    assert "expectation world.emails is judged" in judged and len(judged) == 5, judged
    assert {p.state for p in reference.proofs} == {FIRES}


@pytest.mark.slow
def test_a_check_whose_scenario_lacks_what_it_needs_is_planted_into_one_that_has_it(
    launcher: LifeLauncher, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # write_file_recovery makes no non-idempotent call: at-most-once cannot be planted there.
    recovery = load_scenario(ROOT / "scenarios" / "write_file" / "write_file_recovery.yaml")
    pinned = run_doctor("reference", launcher=launcher, work=tmp_path / "pinned", scenario=recovery.path)
    effect = next(r for r in pinned.results if r.plant == "duplicate_effect")
    assert effect.state == NOT_APPLICABLE and "calls no non-idempotent tool" in effect.detail
    # Chosen by the doctor, it is planted into the suite's first scenario that has one.
    monkeypatch.setattr(doctor, "doctor_scenario", lambda adapter: recovery)
    chosen = run_doctor("reference", launcher=launcher, work=tmp_path / "chosen")
    effect = next(r for r in chosen.results if r.plant == "duplicate_effect")
    assert (chosen.scenario, effect.state, effect.scenario) == (
        "write_file/write_file_recovery.yaml",
        FIRES,
        "send_email/send_once.yaml",
    ), effect
    assert "(in send_email/send_once.yaml)" in chosen.table()
    assert chosen.ok, chosen.summary()


@pytest.mark.slow
def test_an_adapter_that_declares_no_effects_is_blind_to_a_duplicate_effect(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    text = (DESK / "adapter.yaml").read_text(encoding="utf-8")
    blinded, removed = re.subn(r"\neffects:\n(?:  .*\n)+", "\n", text)
    assert removed == 1
    (tmp_path / "adapter.yaml").write_text(blinded, encoding="utf-8")
    (tmp_path / "agent.py").write_text((DESK / "agent.py").read_text(encoding="utf-8"), encoding="utf-8")
    coverage = run_doctor(str(tmp_path / "adapter.yaml"), launcher=launcher, work=tmp_path / "cases")
    effect = next(r for r in coverage.results if r.plant == "duplicate_effect")
    assert effect.state == BLIND and "not observed" in effect.detail, effect
    assert "blind: non_idempotent_at_most_once" in coverage.summary()
    assert not coverage.ok


@pytest.mark.slow
def test_the_plugin_runs_the_doctor_once_and_prints_one_line(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CRASHMATRIX_CACHE_DIR", str(tmp_path / "cache"))
    source = ROOT / "scenarios" / "send_email" / "send_once.yaml"
    pytester.makefile(".yaml", **{"scenarios/email": source.read_text(encoding="utf-8")})
    args = ("scenarios", "-p", "no:cacheprovider", "--no-report", "--crash-boundary", "after_running")
    result = run_inprocess(pytester, *args)
    result.stdout.fnmatch_lines(
        ["crashmatrix doctor: 5/5 checks can fire on reference; * adapter claims proven"]
    )
    assert len(list((tmp_path / "cache").glob("doctor-*.json"))) == 1  # found once, cached
    off = run_inprocess(pytester, *args, "--no-doctor")
    assert "crashmatrix doctor" not in off.stdout.str()


def _doc_tables() -> dict[str, str]:
    """Each agent's table in docs/adapters.md, by the ``--agent`` its heading names."""
    text = ADAPTERS_DOC.read_text(encoding="utf-8")
    section = text.partition("<!-- doctor tables: begin -->")[2].partition("<!-- doctor tables: end -->")[0]
    found = re.findall(r"`crashmatrix doctor --agent (\S+)`\n\n((?:\|.*\n)+)\n(doctor: .*)\n", section)
    return {agent: f"{table.strip()}\n\n{summary}" for agent, table, summary in found}


@pytest.mark.slow
def test_the_coverage_tables_in_docs_adapters_are_the_doctors_output(
    launcher: LifeLauncher, tmp_path: Path
) -> None:
    documented = _doc_tables()
    assert sorted(documented) == sorted(DOC_AGENTS)
    for agent in DOC_AGENTS:
        coverage = run_doctor(agent, launcher=launcher, work=tmp_path / agent.replace("/", "_"))
        # Where it planted names case-specific ids (execution ids, byte offsets): the table
        # shows what fired and why not, which are stable.
        assert documented[agent] == f"{coverage.table()}\n\n{coverage.summary()}", agent


def test_a_deletion_is_no_effect_the_doctor_can_plant_twice_and_it_says_so(tmp_path: Path) -> None:
    # A file probe's effect may be a file going (rm -rf): the doctor cannot copy a file that
    # is gone; it says so in one line instead of a traceback, and another scenario may serve.
    from types import SimpleNamespace

    from crashmatrix.harness.agents.effects import EffectSpec
    from crashmatrix.harness.agents.session_records import CannotPlant

    spec = EffectSpec("run_command", "files", "dist/*")
    case = SimpleNamespace(adapter=SimpleNamespace(spec=SimpleNamespace(effects=(spec,))))
    (tmp_path / "world" / "workspace").mkdir(parents=True)
    detail = {"source": spec.label, "identity": "dist/app.js:abc:1|inode=2", "change": "deleted"}
    with pytest.raises(CannotPlant, match=r"^the effect is dist/app\.js going \(a deletion\)"):
        doctor._duplicate_in_source(case, tmp_path, detail)  # type: ignore[arg-type]
