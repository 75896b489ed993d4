"""Scenario test data: one YAML file per scenario under ``tests/data/``, and the variations
tests need, built from it instead of copied.

``email_once`` is the scenario of the plugin, report, CLI, interrupt and crash-case tests: one
user turn, one ``send_email`` call (``call_1``), a final answer. Tests add top-level keys
(``cover``, ``recovery_crashes``, ``expect``, ``approvals``) or edit its text to break it on
purpose; positions in its error messages are pinned by tests (``turns`` is line 3, ``tools``
line 2), so new keys go at the end of the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

__all__ = ["DATA", "email_once", "scenario_text"]

DATA = Path(__file__).parent / "data"


def scenario_text(name: str, *, edits: Sequence[tuple[str, str]] = (), **keys: object) -> str:
    """``tests/data/NAME.yaml`` with each ``(old, new)`` of ``edits`` applied (``old`` must occur
    exactly once: an edit that matches nothing would leave the test checking the unedited
    file) and ``keys`` appended as top-level keys, in the order given."""
    path = DATA / f"{name}.yaml"
    text = path.read_text(encoding="utf-8")
    for old, new in edits:
        count = text.count(old)
        if count != 1:
            raise ValueError(f"{path.name}: {old!r} occurs {count} times, an edit needs exactly one")
        text = text.replace(old, new)
    if keys:
        text += yaml.safe_dump(keys, sort_keys=False, default_flow_style=False)
    return text


def email_once(*, edits: Sequence[tuple[str, str]] = (), **keys: object) -> str:
    """The ``email_once`` scenario (``tests/data/email_once.yaml``), varied as ``scenario_text``."""
    return scenario_text("email_once", edits=edits, **keys)


# A scenario whose one tool, create_ticket, has its contract in the directory beside it
# (``contracts_dir: contracts``): for tests of contract directories.
TICKET_SCENARIO = """name: ticket
tools: [create_ticket]
contracts_dir: contracts
turns: ["File it"]
model:
  - when: {role: user}
    reply:
      tool_calls:
        - {id: call_1, name: create_ticket, arguments: {title: Broken}}
  - when: {tool: create_ticket}
    reply: {content: "Done."}
"""
