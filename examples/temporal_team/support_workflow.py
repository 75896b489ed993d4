"""The team's agent loop as a Temporal workflow, the way Temporal's samples write an LLM agent:
the workflow is deterministic orchestration only; the model call and every tool are activities
(called by name, so this module imports nothing the workflow sandbox refuses), each with a
start-to-close timeout and Temporal's retry policy.

The timeouts are short on purpose (3 s a model call or a tool; Temporal's samples use 30 s or
more): a worker killed while an activity runs is noticed by the server only when the activity's
start-to-close timeout passes, and then the activity is retried on the next worker. A team sets
them from its tools' real durations (and a heartbeat timeout for long ones); crashmatrix's lives
wait them out.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

MODEL_TIMEOUT = timedelta(seconds=3)
TOOL_TIMEOUT = timedelta(seconds=3)
# Retried after a timeout or an error, a few times: a tool's own error is told to the model.
RETRIES = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5)


@workflow.defn
class SupportWorkflow:
    @workflow.run
    async def run(self, messages: list[dict[str, Any]]) -> str:
        messages = list(messages)
        while True:
            reply: dict[str, Any] = await workflow.execute_activity(
                "ask_model", messages, start_to_close_timeout=MODEL_TIMEOUT, retry_policy=RETRIES
            )
            messages.append(reply)
            calls = reply.get("tool_calls") or []
            if not calls:
                return str(reply.get("content") or "")
            for call in calls:
                function = call["function"]
                try:
                    result = await workflow.execute_activity(
                        function["name"],
                        json.loads(function["arguments"] or "{}"),
                        start_to_close_timeout=TOOL_TIMEOUT,
                        retry_policy=RETRIES,
                    )
                except ActivityError as error:  # the model is told, as a Tool Result
                    result = f"Error: {error.cause or error}"
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(result)})
