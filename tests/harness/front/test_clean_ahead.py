"""harness.front.collection.clean_ahead: an xdist worker's thread that runs clean cases ahead
of its collection never runs beside a framework team's load (which builds the team's agent in
this process, in a scratch working directory: the thread's relative paths would read from
there), and never loads the adapter itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import crashmatrix.harness.front.collection as collection


class _Config:
    def __init__(self, agent: str) -> None:
        self.stash = pytest.Stash()
        self.workerinput = {"workerid": "gw1", "workercount": 2}
        self.agent = agent

    def getoption(self, name: str) -> Any:
        return {"agent": self.agent, "case_deadline": 30.0}[name]


class _Adapter:
    name = "team"
    capabilities = None

    def __init__(self, framework: object | None) -> None:
        self.framework = framework


def _started(monkeypatch: pytest.MonkeyPatch, adapter: _Adapter) -> list[str]:
    started: list[str] = []
    loads: list[str] = []

    class _Thread:
        def __init__(self, target: Any, name: str, daemon: bool) -> None:
            self.name = name

        def start(self) -> None:
            started.append(self.name)

    monkeypatch.setattr(collection, "first_crashes", lambda config: object())
    monkeypatch.setattr(collection, "launcher_for", lambda config: object())
    monkeypatch.setattr(collection, "adapter_for", lambda spec: loads.append(spec) or adapter)
    monkeypatch.setattr(collection, "capabilities_of", lambda adapter: None)
    monkeypatch.setattr(collection.threading, "Thread", _Thread)
    collection.clean_ahead(_Config("team.yaml"), lambda: [Path("scenarios/a.yaml")])  # type: ignore[arg-type]
    assert loads == ["team.yaml"]  # loaded once, before any thread
    return started


def test_a_framework_team_gets_no_thread_beside_its_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _started(monkeypatch, _Adapter(framework=object())) == []


def test_any_other_agent_gets_its_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _started(monkeypatch, _Adapter(framework=None)) == ["crashmatrix-clean-ahead"]
