"""``pytest SCENARIO --agent=langgraph:...`` / ``--agent=openai-agents:...`` as a user types it
(docs/frameworks.md): the whole collection, double-resume and tool-side plans included, with
a kind-1 framework adapter. Each adapter's unit tests call ``run_point`` directly and never
passed through it, so a collection that failed on every scenario went unseen."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crashmatrix.harness.plan.enumeration import DOUBLE_COLUMN, DOUBLE_FRAMEWORK
from crashmatrix.reports.results import Results, load_results

from ....pytest_runs import run_inprocess

ROOT = Path(__file__).resolve().parents[4]
SEND_ONCE = ROOT / "scenarios" / "send_email" / "send_once.yaml"


def collected_and_clean(pytester: pytest.Pytester, agent: str) -> Results:
    """The built-in ``send_once`` collected with ``agent`` and its clean case run (``-k``:
    the collection is what is tested, and every plan is made whatever ``-k`` selects); the
    double-resume column said not reachable, with the framework store's reason."""
    shutil.copy(SEND_ONCE, pytester.path / SEND_ONCE.name)
    result = run_inprocess(
        pytester, SEND_ONCE.name, f"--agent={agent}", "-k", "clean", "-p", "no:cacheprovider", "--no-doctor"
    )
    printed = result.stdout.str()
    assert result.parseoutcomes().get("passed") == 1, printed[-3000:]
    assert "error" not in result.parseoutcomes(), printed[-3000:]
    results = load_results(pytester.path / "reports" / "latest" / "matrix.json")
    assert [case.point for case in results.cases] == ["clean"]
    (double,) = [gap for gap in results.not_run if gap.boundary == DOUBLE_COLUMN]
    assert double.state == "not_reachable" and double.why.endswith(DOUBLE_FRAMEWORK), double
    return results
