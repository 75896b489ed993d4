"""crashmatrix's way into the team's agent (support_agent.py, and fixed.py, unchanged): the
agent and the session its app runs it with. ``adapter.yaml`` names ``crashmatrix_factory:build``,
``adapter_fixed.yaml`` ``crashmatrix_factory:build_fixed``; the ``_postgres`` ones keep the
conversation in PostgreSQL (``options: {store: postgres}``: ``ctx.sqlalchemy_url`` is the case's
own database), as the team runs it in production."""

import fixed
import support_agent
from agents import SQLiteSession


def build(ctx):  # type: ignore[no-untyped-def]
    return support_agent.agent, SQLiteSession("customer-42", "conversations.db")


def build_fixed(ctx):  # type: ignore[no-untyped-def]
    return fixed.agent, SQLiteSession("customer-42", "conversations.db")


def build_postgres(ctx):  # type: ignore[no-untyped-def]
    from agents.extensions.memory import SQLAlchemySession

    return support_agent.agent, SQLAlchemySession.from_url(
        "customer-42", url=ctx.sqlalchemy_url, create_tables=True
    )


def build_fixed_postgres(ctx):  # type: ignore[no-untyped-def]
    from agents.extensions.memory import SQLAlchemySession

    return fixed.agent, SQLAlchemySession.from_url("customer-42", url=ctx.sqlalchemy_url, create_tables=True)
