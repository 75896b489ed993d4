"""The doctor's cached findings hold while the agent's own files are unchanged: the key is
made of those files (a framework agent's: the team's module, not the framework's package)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from crashmatrix.harness.front.doctor import _agent_files, cache_key


def test_a_framework_agents_files_are_the_teams_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "team_graph.py").write_text("def build(ctx):\n    return None\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _agent_files("langgraph:team_graph:build") == [tmp_path / "team_graph.py"]


def test_the_key_changes_when_the_teams_module_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tmp_path / "team_agent_for_key.py"
    module.write_text("def build(ctx):\n    return 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = "openai-agents:team_agent_for_key:build"
    before = cache_key(spec)
    assert cache_key(spec) == before  # the same files, the same key
    module.write_text("def build(ctx):\n    return 2\n", encoding="utf-8")
    sys.modules.pop("team_agent_for_key", None)
    assert cache_key(spec) != before
