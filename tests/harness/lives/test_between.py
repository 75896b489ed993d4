"""Faults between lives (harness.lives.between): a colleague's edit is the harness's write,
never an effect of the agent whose own world it lands in."""

from __future__ import annotations

import json
from pathlib import Path

from crashmatrix.harness.agents.effects import EFFECT_KIND, EXISTING_KIND, HARNESS_KIND, EffectProbe
from crashmatrix.harness.agents.foreign import load_foreign_adapter
from crashmatrix.harness.input.scenario import load_scenario
from crashmatrix.harness.lives.between import apply_between_lives
from crashmatrix.harness.lives.casedir import fresh_case
from crashmatrix.mock_tools.world import World

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "golden" / "harness_writes" / "adapter.yaml"
CONFLICT = ROOT / "scenarios" / "write_file" / "external_change_conflict.yaml"


def test_a_colleagues_edit_is_recorded_as_the_harnesss_and_the_next_life_sees_nothing_new(
    tmp_path: Path,
) -> None:
    adapter = load_foreign_adapter(GOLDEN)  # effects: files "*.txt" as write_file, ...
    scenario = load_scenario(CONFLICT)  # seeds notes.txt; between lives a colleague rewrites it
    case = tmp_path / "case"
    fresh_case(case, scenario)
    workspace = adapter.workspace(case)

    def probe(where: str, *, baseline: bool = False) -> None:
        with World(case / "world") as world:
            EffectProbe(adapter.spec.effects, workspace, world, lambda: 0).probe(where, baseline=baseline)

    probe("start of life 1", baseline=True)  # the seeded notes.txt: the world before the agent
    apply_between_lives(case, scenario, session_editable=False, agent=str(GOLDEN))
    probe("start of life 2")
    with World(case / "world") as world:
        assert world.events(EFFECT_KIND) == []
        [seeded] = world.events(EXISTING_KIND)
        harness = [(e.detail["change"], e.detail["by"]) for e in world.events(HARNESS_KIND)]
    assert json.loads(seeded.detail["record"])["path"] == "notes.txt"
    # The seeded draft went and the colleague's text came: both the harness's doing.
    assert sorted(harness) == [("added", "external_write"), ("removed", "external_write")]
    assert (workspace / "notes.txt").read_text() == "edited by a colleague\n"


def test_without_an_agent_that_probes_its_world_the_edit_is_only_the_worlds_event(tmp_path: Path) -> None:
    scenario = load_scenario(CONFLICT)
    fresh_case(tmp_path / "case", scenario)
    apply_between_lives(tmp_path / "case", scenario, agent="reference")
    with World(tmp_path / "case" / "world") as world:
        assert [e.kind for e in world.events()] == ["external_write"]


OWN_SESSION = ROOT / "tests" / "golden" / "own_session_tamper" / "adapter.yaml"
TAMPERED = ROOT / "scenarios" / "faults" / "create_order_arguments_tampered.yaml"


def _own_session_case(tmp_path: Path) -> tuple[Path, Path]:
    """A case of the golden own-session agent after life 1 saved call_chair in its own shape."""
    adapter = load_foreign_adapter(OWN_SESSION)
    case = tmp_path / "case"
    fresh_case(case, load_scenario(TAMPERED))
    session = adapter.workspace(case) / ".own" / "session.jsonl"
    session.parent.mkdir(parents=True)
    call = {
        "id": "call_chair",
        "type": "function",
        "function": {"name": "create_order", "arguments": '{"item":"chair","quantity":1}'},
    }
    lines = [
        {"kind": "chat", "role": "user", "content": "Order 1 chair"},
        {"kind": "chat", "role": "assistant", "content": "", "tool_calls": [call]},
        {"kind": "step", "callId": "call_chair", "stepId": "s1", "status": "approved"},
    ]
    session.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return case, session


def test_a_tamper_edits_the_saved_call_in_the_agents_own_session_and_keeps_what_it_asked_before(
    tmp_path: Path,
) -> None:
    case, session = _own_session_case(tmp_path)
    apply_between_lives(case, load_scenario(TAMPERED), session_editable=False, agent=str(OWN_SESSION))
    saved = json.loads(session.read_text().splitlines()[1])
    assert json.loads(saved["tool_calls"][0]["function"]["arguments"]) == {"item": "chair", "quantity": 12}
    marks = json.loads((case / "between_lives.json").read_text())
    assert marks["applied"] == [
        {
            "fault": "tamper_arguments",
            "acted": True,
            "detail": "edited the saved arguments of call_chair in session.jsonl line 2",
        }
    ]
    [(_end, grown)] = marks["shifts"]
    # In the normalised copy's offsets: its line holds the arguments as a JSON string too.
    old, new = '{"item":"chair","quantity":1}', json.dumps({"item": "chair", "quantity": 12})
    assert grown == len(json.dumps(new)) - len(json.dumps(old))
    with World(case / "world") as world:
        [fault] = world.events("fault")
    assert (fault.tool, fault.tool_call_id) == ("create_order", "call_chair")
    assert fault.detail == {"fault": "tamper_arguments", "arguments_before": '{"item":"chair","quantity":1}'}


def test_a_tamper_that_finds_no_saved_call_in_the_agents_own_session_says_so(tmp_path: Path) -> None:
    case, session = _own_session_case(tmp_path)
    session.write_text(session.read_text().splitlines()[0] + "\n")  # only the user's message
    apply_between_lives(case, load_scenario(TAMPERED), session_editable=False, agent=str(OWN_SESSION))
    [applied] = json.loads((case / "between_lives.json").read_text())["applied"]
    assert applied == {
        "fault": "tamper_arguments",
        "acted": False,
        "detail": "no saved tool call call_chair in session.jsonl",
    }
    with World(case / "world") as world:
        assert world.events("fault") == []


def test_an_adapter_that_cannot_edit_its_agents_session_leaves_the_tamper_unacted_saying_why(
    tmp_path: Path,
) -> None:
    scenario = load_scenario(TAMPERED)
    fresh_case(tmp_path / "case", scenario)
    # The reference agent's adapter edits crashmatrix's file, which it does not offer here.
    apply_between_lives(tmp_path / "case", scenario, session_editable=False, agent="reference")
    [applied] = json.loads((tmp_path / "case" / "between_lives.json").read_text())["applied"]
    assert applied["acted"] is False
    assert (
        applied["detail"]
        == "the agent keeps its own session and its adapter cannot edit a saved tool call in it"
    )


MEMO = ROOT / "examples" / "memo_agent" / "adapter.yaml"  # catalogue: order(product, count)


def test_a_tamper_writes_the_arguments_under_the_names_the_agents_catalogue_gives_them(
    tmp_path: Path,
) -> None:
    adapter = load_foreign_adapter(MEMO)
    case = tmp_path / "case"
    fresh_case(case, load_scenario(TAMPERED))
    journal = adapter.workspace(case) / ".memo" / "journal.jsonl"
    journal.parent.mkdir(parents=True)
    call = {
        "id": "call_chair",
        "type": "function",
        "function": {"name": "order", "arguments": '{"product":"chair","count":1}'},
    }
    journal.write_text(
        json.dumps({"entry": "chat", "role": "assistant", "content": "", "tool_calls": [call]}) + "\n"
    )
    apply_between_lives(case, load_scenario(TAMPERED), session_editable=False, agent=str(MEMO))
    [saved] = json.loads(journal.read_text())["tool_calls"]
    # The scenario says {item: chair, quantity: 12}; memo_agent reads product and count.
    assert json.loads(saved["function"]["arguments"]) == {"product": "chair", "count": 12}
    with World(case / "world") as world:
        [fault] = world.events("fault")
    assert (fault.tool, fault.detail["arguments_before"]) == ("order", '{"product":"chair","count":1}')
