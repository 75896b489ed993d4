"""The conversation as the model saw it, for agents whose session the harness cannot read.

Every request an agent sends carries the conversation it has rebuilt so far; the last one,
plus the scripted model's answer to it (the model is stateless, so the answer can be asked
again), is the whole conversation of the case as far as the model knows it: the Tool Results
it was given, the user messages it saw, whether the turn ended with a final answer. That is
enough for the checks that are about the conversation; the checks that need the agent's own
ledger or byte offsets are reported as not applicable.

Pure: a function of the request log and the scenario's rules.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from crashmatrix.harness.core.dialect import NATIVE, Dialect
from crashmatrix.harness.core.records import Entry, Message, MessageEntry
from crashmatrix.harness.core.script import NoRuleMatched, Rule, reply_message, reply_to
from crashmatrix.harness.core.session_log import SessionLog

__all__ = ["conversation_from_requests"]


def conversation_from_requests(
    requests: Sequence[Mapping[str, Any]],
    rules: Sequence[Rule],
    *,
    dialect: Dialect = NATIVE,
    path: Path = Path("(model requests)"),
) -> SessionLog:
    """The last request's messages and the model's answer to it, as session entries with no
    byte offsets (-1). No request at all: an empty conversation."""
    if not requests:
        return SessionLog(path, ())
    messages = [m for m in requests[-1].get("messages") or () if isinstance(m, Mapping)]
    raw: list[Mapping[str, Any]] = list(messages)
    # A refused last request has no answer: the turn did not end, and the checks say so.
    with contextlib.suppress(NoRuleMatched):
        raw.append(reply_message(reply_to(rules, messages, dialect), dialect))
    entries: list[Entry] = []
    for index, message in enumerate(raw):
        try:
            entries.append(MessageEntry(Message.from_json(message), line=index + 1))
        except (ValueError, TypeError, KeyError):
            continue  # a message the model would have refused: nothing to judge in it
    return SessionLog(path, tuple(entries), None, 0, tuple(-1 for _ in entries))
