"""Golden: an adapter rule that never fires is named, never read as "not reached" (issue 26).

``dispatch_dict/agent.py`` looks its tools up in a dict built at import (``HANDLERS``), so it
calls the original ``send_email``, never the module attribute a kind-2 adapter wraps:

* ``adapter.yaml`` wraps ``send_email`` for ``after_side_effect``. The rule never fires: the
  send's column is not reachable for the scenario, and the reason names the rule's
  ``adapter.yaml:line`` and ``HANDLERS['send_email']`` (before: an empty cell "not reached",
  and the notes of the other columns claimed the agent reaches after_side_effect). The doctor
  exits 1 naming the rule.
* ``adapter-fixed.yaml`` wraps ``dispatch``, which the agent calls by name: the send is
  crashed and green; the doctor proves every rule.
* its twin (``DISPATCH_AGENT_BUG=blind_resend``, the fixed adapter) sends again after a
  restart and stays red at after_side_effect.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crashmatrix.harness.front.cli import main
from crashmatrix.harness.input.suite import BUILTIN_SUITE
from crashmatrix.reports.results import Results, load_results

from ..planted import plant
from ..pytest_runs import run_inprocess

pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent / "dispatch_dict"
SEND_ONCE = BUILTIN_SUITE / "send_email" / "send_once.yaml"
RULE = f"{HERE / 'adapter.yaml'}:30:5"


def _run(pytester: pytest.Pytester, adapter: Path) -> Results:
    target = pytester.path / "scenarios" / "send_once.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(SEND_ONCE, target)
    result = run_inprocess(
        pytester, "scenarios", f"--agent={adapter}", "-p", "no:cacheprovider", "--no-doctor"
    )
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    assert results.cases, result.stdout.str()
    return results


def test_a_rule_on_a_function_the_agent_calls_through_a_dict_makes_its_column_not_reachable_with_why(
    pytester: pytest.Pytester,
) -> None:
    results = _run(pytester, HERE / "adapter.yaml")
    assert {case.status for case in results.cases} == {"passed"}, [(c.point, c.status) for c in results.cases]
    assert not [case for case in results.cases if case.point.startswith("after_side_effect")]
    (gap,) = [gap for gap in results.not_run if gap.boundary == "after_side_effect"]
    assert gap.state == "not_reachable" and gap.points == ("call_mail",), gap
    assert gap.why.startswith(f"boundary rule {RULE} (send_email -> after_side_effect) never fired")
    assert "HANDLERS['send_email']" in gap.why and "never called through its module attribute" in gap.why
    # No other column's note says the agent reaches after_side_effect.
    others = [gap.why for gap in results.not_run if gap.boundary != "after_side_effect"]
    assert others and not [why for why in others if "after_side_effect" in why], others


def test_the_doctor_exits_1_naming_the_rule_that_never_fired(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--agent", str(HERE / "adapter.yaml")]) == 1
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if RULE in line and line.startswith("|")]
    assert "NO (blind)" in row and "HANDLERS['send_email']" in row, row
    assert f"unproven: boundary rule {RULE} (send_email -> after_side_effect) fires" in out


def test_wrapping_the_function_it_calls_by_name_crashes_the_send_and_is_green(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _run(pytester, HERE / "adapter-fixed.yaml")
    sent = [case for case in results.cases if case.point == "after_side_effect[call_mail]"]
    assert [case.status for case in sent] == ["passed"], sent
    assert sent[0].observed and sent[0].observed["world"]["emails"] == 1
    assert not [gap for gap in results.not_run if gap.boundary == "after_side_effect"]
    assert {case.status for case in results.cases} <= {"passed", "not_applicable"}
    assert main(["doctor", "--agent", str(HERE / "adapter-fixed.yaml")]) == 0
    assert "NO (blind)" not in capsys.readouterr().out


def test_its_blind_resend_twin_is_red_after_the_send(pytester: pytest.Pytester, tmp_path: Path) -> None:
    twin = plant(HERE, "adapter-fixed.yaml", "DISPATCH_AGENT_BUG", "blind_resend", tmp_path / "twin")
    results = _run(pytester, twin)
    (sent,) = [case for case in results.cases if case.point == "after_side_effect[call_mail]"]
    assert sent.status == "failed"
    assert "non_idempotent_at_most_once" in {v["invariant"] for v in sent.violations}
