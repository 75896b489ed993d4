"""crashmatrix's way into the team's agent (support_agent.py, and fixed.py, unchanged): the
agent and the message store its app runs it with. ``adapter.yaml`` names
``crashmatrix_factory:build``, ``adapter_fixed.yaml`` ``crashmatrix_factory:build_fixed``."""

import fixed
import support_agent


def build(ctx):  # type: ignore[no-untyped-def]
    return support_agent.agent, support_agent.MessageStore("conversations.db")


def build_fixed(ctx):  # type: ignore[no-untyped-def]
    return fixed.agent, support_agent.MessageStore("conversations.db")
