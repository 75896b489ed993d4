"""The scripted model as a service: answers chat-completion requests by the scenario's rules
and logs every request body (one ``write`` per line, so the log survives the agent's SIGKILL)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from crashmatrix.harness.core.dialect import NATIVE, Dialect
from crashmatrix.harness.core.script import (
    NoRuleMatched,
    Reply,
    Rule,
    chat_completion,
    reply_to,
)

__all__ = ["ScriptedModel"]


@dataclass
class ScriptedModel:
    rules: Sequence[Rule]
    log_path: Path | None = None
    model: str = "crashmatrix-scripted"
    requests: list[dict[str, Any]] = field(default_factory=list)
    # Told of every request before it is answered: the life's trace records where, among
    # the boundaries, the agent asked the model (``harness.plan.enumeration.recovery_window``).
    on_request: Callable[[], None] | None = None
    # The agent's words for tools and results (the suite's own by default).
    dialect: Dialect = NATIVE
    # What the model says where the script has no rule, instead of refusing the request (400):
    # None (a scenario's script is the whole conversation). A tool-side case sets it: the fault
    # makes the agent tell the model something its script never planned (a failure, an
    # uncertain send), and such a case is judged by the invariants alone, so the model ends the
    # turn in plain words rather than failing a correct agent's life.
    unscripted: str | None = None

    def reply(self, messages: Sequence[Mapping[str, Any]]) -> Reply:
        return reply_to(self.rules, messages, self.dialect)

    def _log(self, body: Mapping[str, Any], raw: bytes | None = None) -> None:
        self.requests.append(dict(body))
        if self.log_path is None:
            return
        # The bytes as they came when they fit on one line: re-encoding them cost as much
        # as parsing them.
        if raw is not None and b"\n" not in raw:
            line = raw + b"\n"
        else:
            line = (json.dumps(body, ensure_ascii=False) + "\n").encode("utf-8")
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def handle(self, request: httpx.Request) -> httpx.Response:
        """The ``POST /chat/completions`` endpoint (used as a respx side effect)."""
        try:
            body = json.loads(request.content or b"{}")
        except ValueError:
            return httpx.Response(400, json={"error": {"message": "request body is not JSON"}})
        self._log(body, request.content if isinstance(body, dict) else None)
        if self.on_request is not None:
            self.on_request()
        messages = body.get("messages") or []
        try:
            reply = self.reply(messages)
        except NoRuleMatched as error:
            if self.unscripted is None:
                refusal = {"error": {"message": str(error), "type": "crashmatrix_no_rule"}}
                return httpx.Response(400, json=refusal)
            reply = Reply(content=self.unscripted)
        completion = chat_completion(reply, model=self.model, serial=len(self.requests), dialect=self.dialect)
        return httpx.Response(200, json=completion)
