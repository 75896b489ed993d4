"""World events: every side effect (and every fired fault) a case's world saw, in one global
order. The mock tools' world records them (``mock_tools.world``); an observation carries
them; the invariants judge them.

``session_bytes`` is the size of the agent's session file when the event happened (-1 when
unknown), so "the ledger's ``running`` line was on disk before the effect" can be checked.
``pid`` is the process whose action caused it (the harness's own edits between lives are
not an agent's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["HARNESS_EFFECT_KIND", "NON_SIDE_EFFECT_KINDS", "WorldEvent"]

# A change the harness made to the agent's own world (a colleague's edit between lives, a
# power loss rolling files back), found by an effect probe right after it: never the agent's.
HARNESS_EFFECT_KIND = "effect_harness"
# Event kinds that are not a side effect of the agent's tools: an armed fault firing,
# another writer touching the workspace, a read, what the agent's own world already held
# before its first life (``effect_existing``: the baseline of an effect probe), and what the
# harness changed in it.
NON_SIDE_EFFECT_KINDS = frozenset({"fault", "external_write", "read", "effect_existing", HARNESS_EFFECT_KIND})


@dataclass(frozen=True, slots=True)
class WorldEvent:
    """One side effect (or fired fault), in global order."""

    seq: int
    kind: str
    tool: str
    tool_call_id: str | None
    execution_id: str | None
    idempotency_key: str | None
    session_bytes: int
    detail: Mapping[str, Any]
    pid: int

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "tool": self.tool,
            "tool_call_id": self.tool_call_id,
            "execution_id": self.execution_id,
            "idempotency_key": self.idempotency_key,
            "session_bytes": self.session_bytes,
            "detail": dict(self.detail),
            "pid": self.pid,
        }
