"""crashmatrix's way into the team's agent (support_agent.py, fixed.py, dbos_agent.py and
dbos_fixed.py, unchanged): the agent and the message store its app runs it with; for a
DBOSAgent, DBOS configured as the app's ``main`` does, on the case's own system database.
``adapter.yaml`` names ``crashmatrix_factory:build``, ``adapter_fixed.yaml``
``crashmatrix_factory:build_fixed``, ``adapter_dbos.yaml`` and ``adapter_dbos_fixed.yaml``
``build_dbos`` and ``build_dbos_fixed``."""

import warnings

import fixed
import support_agent


def build(ctx):  # type: ignore[no-untyped-def]
    return support_agent.agent, support_agent.MessageStore("conversations.db")


def build_fixed(ctx):  # type: ignore[no-untyped-def]
    return fixed.agent, support_agent.MessageStore("conversations.db")


def build_dbos(ctx):  # type: ignore[no-untyped-def]
    from dbos import DBOS

    with warnings.catch_warnings():  # 2.68 deprecates DBOSAgent for DBOSDurability: the team's choice
        warnings.filterwarnings("ignore", message=".*DBOSAgent. is deprecated")
        import dbos_agent  # here, not above: its DBOSAgent registers with DBOS when imported

    DBOS(config={"name": "support-agent", "system_database_url": ctx.system_database_url})
    return dbos_agent.durable, support_agent.MessageStore("conversations.db")


def build_dbos_fixed(ctx):  # type: ignore[no-untyped-def]
    from dbos import DBOS

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*DBOSAgent. is deprecated")
        import dbos_fixed

    DBOS(config={"name": "support-agent", "system_database_url": ctx.system_database_url})
    return dbos_fixed.durable, support_agent.MessageStore("conversations.db")
