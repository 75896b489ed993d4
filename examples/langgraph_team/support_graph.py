"""A support agent written the way LangGraph's docs show it: ``@tool`` functions writing the
team's own world, a ``ChatOpenAI`` model built from the environment (``OPENAI_API_KEY`` /
``OPENAI_BASE_URL``), a ``StateGraph`` whose ``ToolNode`` runs the tools the model asks for,
and a checkpointer the app hands it (``SqliteSaver`` in ``main``, ``PostgresSaver`` in
production), the conversation resumed on one ``thread_id``.

Its tools are the team's: ``send_email`` appends to its outbox (``outbox.jsonl``, fsynced) and
``create_order`` inserts into its own orders table (``orders.db``). Nothing here knows
crashmatrix: ``langgraph_factory.py`` hands this graph the case's checkpointer and
``adapter.yaml`` says where its effects show. ``fixed.py`` is the same agent made crash-safe.
"""

from __future__ import annotations

import json
import os
import sqlite3
from typing import Any

from langchain_core.messages import SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

OUTBOX = "outbox.jsonl"
ORDERS_DB = "orders.db"
INSTRUCTIONS = "You are a support assistant. Use the tools to do what the customer asks."


@tool
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email.

    Args:
        to: The recipient's address.
        subject: The subject line.
        body: The text of the email.
    """
    with open(OUTBOX, "a", encoding="utf-8") as outbox:
        outbox.write(json.dumps({"to": to, "subject": subject, "body": body}) + "\n")
        outbox.flush()
        os.fsync(outbox.fileno())
    return f"Email sent to {to}."


@tool
def create_order(item: str, quantity: int) -> str:
    """Place an order.

    Args:
        item: What to order.
        quantity: How many.
    """
    with sqlite3.connect(ORDERS_DB) as db:
        db.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT, quantity INTEGER)")
        order = db.execute("INSERT INTO orders (item, quantity) VALUES (?, ?)", (item, quantity)).lastrowid
    return f"Order {order} placed: {quantity} x {item}."


TOOLS = [send_email, create_order]


def build_graph(checkpointer: Any, tools: list[Any] = TOOLS) -> Any:
    """The ReAct loop of LangGraph's docs: the model, then the tools it asked for, until it
    answers without a tool call."""
    model = ChatOpenAI(model="gpt-4o-mini").bind_tools(tools)

    def assistant(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke([SystemMessage(INSTRUCTIONS), *state["messages"]])]}

    graph = StateGraph(MessagesState)
    graph.add_node("assistant", assistant)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "assistant")
    graph.add_conditional_edges("assistant", tools_condition)
    graph.add_edge("tools", "assistant")
    return graph.compile(checkpointer=checkpointer)


def main() -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    with SqliteSaver.from_conn_string("checkpoints.sqlite") as saver:
        agent = build_graph(saver)
        config = {"configurable": {"thread_id": "customer-42"}}
        while True:
            reply = agent.invoke({"messages": [("user", input("> "))]}, config)
            print(reply["messages"][-1].content)


if __name__ == "__main__":
    main()
