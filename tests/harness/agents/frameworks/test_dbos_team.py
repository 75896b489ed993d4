"""The DBOS example (examples/dbos_team/), crashed at DBOS's seams and resumed by DBOS's own
recovery: the team's workflow with tools as steps and no keys sends the approved email (and
places the order) twice after a kill between the tool's effect and its step row's commit --
DBOS re-runs a step it has no row for (at-least-once) -- while a kill after the commit is
replayed from the row and green; ``fixed.py`` (keys from the workflow and step ids, reconciled
by lookup) is green at every first crash of the same scenarios."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crashmatrix.harness.agents.loading import load_adapter
from crashmatrix.harness.core.boundaries import parse_point
from crashmatrix.harness.front.cases import run_point
from crashmatrix.harness.input.scenario import load_scenario

from ....launchers import warm_launcher
from ....pytest_runs import case_outcomes

pytest.importorskip("dbos")
pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[4]
TEAM = ROOT / "examples" / "dbos_team"
SCENARIOS = [
    ROOT / "scenarios" / "send_email" / "send_once.yaml",
    ROOT / "scenarios" / "create_order" / "keyed_once.yaml",
]
CALLS = {"send_once": "call_mail", "keyed_once": "call_order"}


def test_the_step_re_run_after_the_effect_is_a_failing_cell_and_the_replay_is_not(
    pytester: pytest.Pytester,
) -> None:
    # The cells below only (not after_model_reply: no step of DBOS's there).
    cases = case_outcomes(
        pytester, TEAM / "adapter.yaml", SCENARIOS, "--no-recovery-crashes", "-k", "not after_model_reply"
    )
    for stem, call in CALLS.items():
        assert cases[stem][f"after_side_effect[{call}]"][0] == "failed", cases[stem]
        for point in (
            "clean",
            f"after_tool_call_saved[{call}]",
            f"after_running[{call}]",
            f"before_tool_result[{call}]",
        ):
            assert cases[stem][point][0] == "passed", (stem, point, cases[stem][point])


def test_the_failure_says_dbos_ran_the_send_twice(tmp_path: Path) -> None:
    result = run_point(
        load_scenario(SCENARIOS[0]),
        parse_point("after_side_effect[call_mail]"),
        warm_launcher(TEAM / "adapter.yaml"),  # the matrix runs' server: the agent warm in it
        tmp_path / "case",
        agent=str(TEAM / "adapter.yaml"),
        deadline=120.0,
    )
    verdict = result.verdict
    assert verdict.status == "failed"
    assert verdict.observed.world["emails"] == 2
    [violation] = [v for v in verdict.violations if v.invariant == "non_idempotent_at_most_once"]
    assert "caused 2 side effects" in violation.message
    # Both sends are the one step's: DBOS committed a single send_email row, after the re-run.
    from crashmatrix.harness.agents.frameworks import dbos as d

    [turn] = d.read_turns(tmp_path / "case" / "world" / "workspace" / d.DB_NAME)
    assert [s.name for s in turn.steps] == ["ask_model", "send_email", "ask_model"]


def test_the_fixed_agent_is_green_at_every_first_crash(pytester: pytest.Pytester) -> None:
    # Second crashes during recovery are left to the documented matrix run (docs/frameworks.md).
    cases = case_outcomes(pytester, TEAM / "adapter_fixed.yaml", SCENARIOS, "--no-recovery-crashes")
    for stem in CALLS:
        outcomes = {case: outcome for case, (outcome, _) in cases[stem].items()}
        assert "failed" not in outcomes.values(), (stem, outcomes)
        assert outcomes[f"after_side_effect[{CALLS[stem]}]"] == "passed"


# -- DBOS's system database on PostgreSQL, a real server ------------------------------------------


PG_ADAPTERS = (TEAM / "adapter_postgres.yaml", TEAM / "adapter_fixed_postgres.yaml")


def _pg_run(postgres_url: str, adapter: str, scenario: Path, point: str, tmp_path: Path) -> Any:
    # A fork server started after the server (its own preload list: fork servers are shared per
    # list), so its lives inherit CRASHMATRIX_POSTGRES_URL, as the plugin starts it first; one
    # for both adapters, each loaded warm in it.
    return run_point(
        load_scenario(scenario),
        parse_point(point),
        warm_launcher(*PG_ADAPTERS, preload=("psycopg",)),
        tmp_path / adapter,
        agent=str(TEAM / f"{adapter}.yaml"),
        deadline=120.0,
    )


def test_on_postgres_the_step_re_run_sends_twice_and_the_steps_are_read_from_the_server(
    postgres_url: str, tmp_path: Path
) -> None:
    from crashmatrix.harness.agents.frameworks import dbos as d

    adapter = load_adapter(str(TEAM / "adapter_postgres.yaml"))
    assert adapter.servers == ("postgres",)  # type: ignore[attr-defined]  # started before anything forks
    result = _pg_run(postgres_url, "adapter_postgres", SCENARIOS[0], "after_side_effect[call_mail]", tmp_path)
    assert result.verdict.status == "failed"
    assert result.verdict.observed.world["emails"] == 2
    workspace = Path(result.case_dir) / "world" / "workspace"
    assert (Path(result.case_dir) / d.STORE_NAME).read_text() == "postgres"
    assert not (workspace / d.DB_NAME).exists()  # nothing of DBOS's table on disk
    assert [r["message"]["role"] for r in d.read_records(workspace)] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.stem for s in SCENARIOS])
def test_on_postgres_the_fixed_agent_stays_green_past_the_effect(
    postgres_url: str, tmp_path: Path, scenario: Path
) -> None:
    point = f"after_side_effect[{CALLS[scenario.stem]}]"
    result = _pg_run(postgres_url, "adapter_fixed_postgres", scenario, point, tmp_path)
    verdict = result.verdict
    assert verdict.status == "passed", verdict.mismatches or verdict.violations or verdict.problems


def test_the_doctors_faults_land_in_dboss_step_rows(tmp_path: Path) -> None:
    """``crashmatrix doctor`` plants into the rows ``read_records`` reads: the final answer's
    row never committed fires ``turn_ends_with_final``; a second result for one call cannot be
    a DBOS row (not applicable, with why), never blind."""
    from crashmatrix.harness.front.doctor import run_doctor

    agent = TEAM / "adapter.yaml"
    coverage = run_doctor(str(agent), launcher=warm_launcher(agent), work=tmp_path)
    states = {result.check: result.state for result in coverage.results}
    assert coverage.blind == (), coverage.table()
    assert states["turn_ends_with_final"] == "fires", coverage.table()
    assert states["non_idempotent_at_most_once"] == "fires", coverage.table()
    assert states["one_tool_result_per_call"] != "fires", coverage.table()


def test_pydantic_ais_dbos_agent_runs_every_function_tool_of_a_recovered_run_again(tmp_path: Path) -> None:
    """examples/dbos_team/pydantic_ai_dbos_agent.py, as docs/frameworks.md runs it: killed after
    both tools' effects (they run concurrently, in either order), the run recovered by
    DBOS.launch() replays the model's reply from its step row and runs both function tools
    again (they are not steps), the one that had finished before the kill included."""
    pytest.importorskip("pydantic_ai")
    import subprocess
    import sys

    script = TEAM / "pydantic_ai_dbos_agent.py"
    effects: list[list[str]] = []  # each life's, sorted: the two calls of one reply run concurrently
    for argument in ("kill", "resume"):
        subprocess.run(
            [sys.executable, str(script), argument], cwd=tmp_path, capture_output=True, timeout=300
        )
        lines = (tmp_path / "effects.txt").read_text(encoding="utf-8").splitlines()
        effects.append(sorted(lines[sum(map(len, effects)) :]))
    requests = (tmp_path / "model_calls.txt").read_text(encoding="utf-8").splitlines()
    assert effects == [["email alice@example.com", "order desk"]] * 2
    assert len(requests) == 2  # the reply with the calls was replayed, not asked again
