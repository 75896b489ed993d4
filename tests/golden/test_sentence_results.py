"""Golden: an agent whose tools answer in sentences is judged on what they say (issue 30).

``sentence_results/agent.py`` returns "mail to ... queued", "ALREADY SENT: ..." (its outbox
already holds the call's mail) and "mail not queued: ..." (from an except handler); its
recovery looks in the outbox before sending again and finishes a cut turn:

* ``adapter.yaml`` is the one ``crashmatrix init`` writes for it, unedited: ``results:`` rules
  read from those sentences. Every case of ``send_once.yaml`` is green, the send crashed
  included (one email in its outbox, the model told it was sent before).
* the same adapter with ``results: auto`` (what init wrote before) reads every sentence as
  "error": the clean case is red, "told error, but it happened" -- the false red.
* its twin (``SENTENCE_MAILER_BUG=resend``) sends again after a restart: red at the send.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from crashmatrix.harness.front.agent_code import read_agent
from crashmatrix.harness.front.init import draft, input_modes, suite_tools
from crashmatrix.harness.input.suite import BUILTIN_SUITE
from crashmatrix.reports.results import Results, load_results

from ..planted import plant
from ..pytest_runs import run_inprocess

pytestmark = pytest.mark.slow
pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent / "sentence_results"
SEND_ONCE = BUILTIN_SUITE / "send_email" / "send_once.yaml"


def _run(pytester: pytest.Pytester, adapter: Path, *options: str) -> Results:
    target = pytester.path / "scenarios" / "send_once.yaml"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(SEND_ONCE, target)
    result = run_inprocess(
        pytester, "scenarios", f"--agent={adapter}", "-p", "no:cacheprovider", "--no-doctor", *options
    )
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    assert results.cases, result.stdout.str()
    return results


def test_the_adapter_is_the_one_init_writes(tmp_path: Path) -> None:
    written = draft(read_agent(HERE / "agent.py"), suite_tools(), here=HERE, input_modes=input_modes())
    assert yaml.safe_load(written.text) == yaml.safe_load((HERE / "adapter.yaml").read_text(encoding="utf-8"))
    assert not written.todos


def test_its_sentences_read_by_the_rules_init_wrote_are_green_in_every_case(
    pytester: pytest.Pytester,
) -> None:
    results = _run(pytester, HERE / "adapter.yaml")
    assert {case.status for case in results.cases} == {"passed"}, [(c.point, c.status) for c in results.cases]
    (sent,) = [case for case in results.cases if case.point == "after_side_effect[call_mail]"]
    assert sent.observed and sent.observed["world"]["emails"] == 1


def test_read_as_auto_its_sentences_are_a_false_red(pytester: pytest.Pytester, tmp_path: Path) -> None:
    data = yaml.safe_load((HERE / "adapter.yaml").read_text(encoding="utf-8"))
    data["results"] = "auto"
    data["python"]["script"] = str(HERE / "agent.py")
    auto = tmp_path / "auto.yaml"
    auto.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    results = _run(pytester, auto, "-k", "clean")  # the one cell this claim is about
    assert [case.point for case in results.cases] == ["clean"]
    (clean,) = results.cases
    assert clean.status == "failed"
    assert "told_the_truth" in {v["invariant"] for v in clean.violations}


def test_its_resend_twin_is_red_at_the_send(pytester: pytest.Pytester, tmp_path: Path) -> None:
    twin = plant(HERE, "adapter.yaml", "SENTENCE_MAILER_BUG", "resend", tmp_path / "twin")
    # The clean case and the crash at the send: the cells this claim is about.
    results = _run(pytester, twin, "-k", "clean or after_side_effect and not power and not recovery")
    assert sorted(case.point for case in results.cases) == ["after_side_effect[call_mail]", "clean"]
    (clean,) = [case for case in results.cases if case.point == "clean"]
    assert clean.status == "passed"
    (sent,) = [case for case in results.cases if case.point == "after_side_effect[call_mail]"]
    assert sent.status == "failed"
    assert "non_idempotent_at_most_once" in {v["invariant"] for v in sent.violations}
