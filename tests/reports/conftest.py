"""Fixtures for the report tests: a hand-written results file with every kind of cell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from crashmatrix.reports.results import Results, load_results

DATA = Path(__file__).parent / "data"
FIXTURE = DATA / "two_scenarios.json"


@pytest.fixture
def raw_results() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return loaded


@pytest.fixture
def results() -> Results:
    return load_results(FIXTURE)
