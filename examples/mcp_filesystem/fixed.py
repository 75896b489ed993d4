"""agent.py without its planted bug: a call whose server went away before answering is never
retried blindly. The server may have died after it acted (``edit_file`` is not idempotent: the
same edit applied twice adds the line twice), so the model is told the truth, that the edit
may or may not have happened, and the agent connects again for the calls after it."""

from __future__ import annotations

import asyncio
from typing import Any

from agent import Agent, ServerGone, main, uncertain


class FixedAgent(Agent):
    async def execute(self, name: str, arguments: dict[str, Any]) -> str:
        try:
            return await self.server.call(name, arguments)
        except ServerGone:
            await self.server.reopen()  # for the next call; this one is not sent again
            return uncertain(name, "the MCP server went away before it answered")
        except Exception as error:
            return uncertain(name, f"no readable answer: {type(error).__name__}")


if __name__ == "__main__":
    asyncio.run(main(FixedAgent))
