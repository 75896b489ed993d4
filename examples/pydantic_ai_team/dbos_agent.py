"""support_agent.py's agent made durable the way PydanticAI's docs show it with DBOS: the same
tools and model, wrapped in ``DBOSAgent`` (``pydantic_ai.durable_exec.dbos``), so each
``run`` is a DBOS workflow and each model request a DBOS step, checkpointed in DBOS's system
database (SQLite here); a restarted process's ``DBOS.launch()`` recovers the run it was in.

The app runs each turn as a workflow of its own under an id it can find again (``turn-N``),
saves the run's new messages in the same store as support_agent.py when the run returns, and
after a restart saves the result DBOS recovered. DBOSAgent runs function tools inline in the
workflow, not as steps: a tool killed after its effect is run again by the recovered run --
the email sent twice. ``dbos_fixed.py`` makes each tool's effect a keyed ``@DBOS.step``.
"""

from __future__ import annotations

import asyncio

from dbos import DBOS, SetWorkflowID
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSAgent
from pydantic_ai.models.openai import OpenAIChatModel
from support_agent import INSTRUCTIONS, MessageStore, create_order, send_email

agent = Agent(
    OpenAIChatModel("gpt-4o-mini"),
    instructions=INSTRUCTIONS,
    name="support",  # DBOS names the run's workflow and steps after it
    tools=[send_email, create_order],
)
durable = DBOSAgent(agent)


async def main() -> None:
    DBOS(config={"name": "support-agent", "system_database_url": "sqlite:///dbos.sqlite"})
    DBOS.launch()  # recovers the run a killed process left pending
    store = MessageStore("conversations.db")
    turn = 0
    while True:
        turn += 1
        with SetWorkflowID(f"turn-{turn}"):
            result = await durable.run(input("> "), message_history=store.get_messages())
        store.add_messages(result.new_messages_json())
        print(result.output)


if __name__ == "__main__":
    asyncio.run(main())
