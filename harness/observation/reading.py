"""Reading what a finished case left behind."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = []


def _world_view(case_dir: Path) -> tuple[dict[str, Any], list[Any]]:
    from crashmatrix.mock_tools.world import World

    with World(case_dir / "world") as world:
        snapshot = world.snapshot()
        events = world.events()
    view: dict[str, Any] = dict(snapshot.counts)
    files: dict[str, str | None] = {}
    for path in snapshot.files:
        files[path] = snapshot.file_text(path)
    view["files"] = files
    return view, events


def _between_lives(case_dir: Path) -> dict[str, Any]:
    path = case_dir / "between_lives.json"
    return dict(json.loads(path.read_text())) if path.exists() else {}


def _requests(case_dir: Path, mark: Mapping[str, Any]) -> list[dict[str, Any]]:
    path = case_dir / "model_requests.jsonl"
    if not path.exists():
        return []
    requests = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if mark.get("shifts"):
        # Sent before the harness edited the session: they cannot match the edited file.
        requests = requests[mark["requests_before"] :]
    return requests


def _in_edited_coordinates(events: list[Any], mark: Mapping[str, Any]) -> list[Any]:
    """Translate ``session_bytes`` of events recorded before the harness edited the session
    into the edited file's offsets, so "running was on disk first" is judged truthfully."""
    shifts = mark.get("shifts") or []
    if not shifts:
        return events
    out = []
    for event in events:
        if event.seq <= mark["events_before"]:
            grown = sum(delta for end, delta in shifts if event.session_bytes >= end)
            event = dataclasses.replace(event, session_bytes=event.session_bytes + grown)
        out.append(event)
    return out
