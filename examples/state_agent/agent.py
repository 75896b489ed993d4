"""state-agent: an office assistant whose whole state is one SQLite database.

It knows nothing about crashmatrix. There is no JSONL session: the conversation and the
tool execution ledger are rows of ``.state/state.db`` (table ``log``: an autoincrement id
and a TEXT column holding one record as JSON, in seed 000's shapes: ``{"type": "message",
"message": ...}`` and ``{"type": "tool_execution", "execution_id", "tool_call_id", "status",
...}``). Each record is its own transaction, committed with ``PRAGMA synchronous=FULL``:
once ``Store.save_*`` returns, the row survives a crash or a power cut.

Its two tools are plain functions that call real services in production:
``send_email(to, subject, body)`` posts to a mail relay (no key: every request is one more
email) and ``create_order(item, quantity, key)`` posts to an order API with an
``Idempotency-Key`` header (the API keeps at most one order per key). Both return a small
dict, and raise ``TimeoutError`` when the request went out and no answer came back.

Recovery is seed 000's table: a call with no ledger or left ``approved`` is routed again
(approval asked again); one left ``running`` is closed ``unknown`` first, then decided by
its contract (seed 004): an order is placed again as a NEW execution under the SAME
idempotency key (the API deduplicates), an email is never resent and the model is told
SIDE_EFFECT_UNCERTAIN; a terminal status has its stored result published again. Then the
turn goes on from the saved conversation, with no new user message. A call whose new
execution the user refuses after an earlier one may have acted is uncertain, not rejected.

A tool call is a call SITE, not an id: providers reuse ids (``call_0`` in every turn), so a
call owns only the records after the assistant message that made it, up to the next user
message or the next assistant message reusing its id; its key names the site too.

``STATE_AGENT_BUG`` plants one bug, for the tests of a crash harness: new_key_per_attempt,
blind_retry_after_unknown, running_after_effect, retry_non_idempotent, duplicate_tool_result.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

from openai import OpenAI

BUG = os.environ.get("STATE_AGENT_BUG", "")
DATABASE = Path(os.environ.get("STATE_AGENT_DB", ".state/state.db"))
MAIL_API = os.environ.get("STATE_AGENT_MAIL_API", "https://mail.example.com").rstrip("/")
ORDERS_API = os.environ.get("STATE_AGENT_ORDERS_API", "https://orders.example.com").rstrip("/")
TERMINAL = ("rejected", "succeeded", "failed", "unknown")
TOOL_NAMES = ("send_email", "create_order")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_email",
            "description": "Send an email.",
            "parameters": {
                "type": "object",
                "required": ["to", "subject", "body"],
                "properties": {
                    "to": {"type": "string"},
                    "subject": {"type": "string"},
                    "body": {"type": "string"},
                },
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "create_order",
            "description": "Place an order.",
            "parameters": {
                "type": "object",
                "required": ["item", "quantity"],
                "properties": {"item": {"type": "string"}, "quantity": {"type": "integer"}},
            },
        },
    },
]


def arguments_sha256(arguments: dict[str, Any]) -> str:
    """Seed 000's recipe (sorted keys, compact JSON), so a judge can recompute it."""
    canonical = json.dumps(arguments, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# -- the tools: real services in production ------------------------------------------------


def _post(url: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    """POST JSON; a refusal is an answer ({"ok": False, ...}), a lost answer raises TimeoutError."""
    data = json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return {"ok": True, **json.load(response)}
    except urllib.error.HTTPError as error:
        return {
            "ok": False,
            "code": f"HTTP_{error.code}",
            "error": error.read()[:300].decode("utf-8", "replace"),
        }
    except urllib.error.URLError as error:
        if isinstance(error.reason, ConnectionRefusedError):
            # Nobody listened: nothing was sent, so nothing happened.
            return {"ok": False, "code": "UNAVAILABLE", "error": str(error.reason)}
        # urllib wraps what broke while the request was being sent: part of it may be out.
        raise TimeoutError(f"{url}: no answer ({error.reason})") from error
    except OSError as error:  # sent, and the connection died before the answer
        raise TimeoutError(f"{url}: no answer ({error})") from error


def send_email(to: str, subject: str, body: str) -> dict[str, Any]:
    """Send one email through the relay. Not idempotent: two calls are two emails."""
    return _post(f"{MAIL_API}/emails", {"to": to, "subject": subject, "body": body}, {})


def create_order(item: str, quantity: int, key: str) -> dict[str, Any]:
    """Place an order; the API keeps at most one order per ``key`` and replays its answer."""
    return _post(f"{ORDERS_API}/orders", {"item": item, "quantity": quantity}, {"Idempotency-Key": key})


def rejected(execution_id: str) -> dict[str, Any]:
    """The receipt of a refusal: a function of the execution alone, so recovery can rebuild it."""
    return {"ok": False, "code": "REJECTED", "execution_id": execution_id, "content": "the user said no"}


def may_have_acted(history: list[dict[str, Any]]) -> str:
    """The latest execution in a call's ``history`` that may have acted (left running or
    closed unknown), or ""."""
    return next((r["execution_id"] for r in reversed(history) if r["status"] in ("running", "unknown")), "")


def scope_end(records: list[dict[str, Any]], index: int, call_id: str) -> int:
    """Where the call made at ``index`` stops owning the records: the next user message, or
    the next assistant message that reuses its id."""
    for later in range(index + 1, len(records)):
        message = records[later].get("message") or {}
        if message.get("role") == "user" or call_id in [c["id"] for c in message.get("tool_calls") or ()]:
            return later
    return len(records)


# -- the state database ----------------------------------------------------------------------


class Store:
    """The conversation and the ledger, one row a record, in order."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode: every record gets its own explicit transaction below.
        self.db = sqlite3.connect(path, isolation_level=None)
        # FULL: the journal and the database are synced at every commit, so a committed row
        # is on disk when save_* returns; a crash mid-transaction is rolled back on open.
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS log (id INTEGER PRIMARY KEY AUTOINCREMENT, record TEXT NOT NULL)"
        )

    def _insert(self, record: dict[str, Any]) -> None:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("INSERT INTO log (record) VALUES (?)", (json.dumps(record, ensure_ascii=False),))
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def save_message(self, message: dict[str, Any]) -> None:
        self._insert({"type": "message", "message": message})

    def save_execution(self, record: dict[str, Any]) -> None:
        self._insert({"type": "tool_execution", **record})

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(text) for (text,) in self.db.execute("SELECT record FROM log ORDER BY id")]

    def messages(self) -> list[dict[str, Any]]:
        """What the model sees: the conversation, never the ledger."""
        return [r["message"] for r in self.records() if r["type"] == "message"]


# -- the agent -------------------------------------------------------------------------------


class Agent:
    def __init__(self, store: Store, client: OpenAI, model: str) -> None:
        self.store = store
        self.client = client
        self.model = model

    def key_for(self, call: dict[str, Any], execution_id: str) -> str:
        """The runtime builds the key, not the model (seed 004): the business action is this
        tool call with these arguments, so every attempt at it carries the same key. The
        call's site (how many messages came before the assistant message that made it) is
        part of it: the same id and arguments in a later turn are a new business action."""
        arguments = json.loads(call["function"]["arguments"] or "{}")
        parts = ["state-agent", f"m{call['site']}", call["id"], arguments_sha256(arguments)[:16]]
        if BUG == "new_key_per_attempt":
            parts.append(execution_id)  # BUG: every attempt is a new business action
        return ":".join(parts)

    def ledger(self, call: dict[str, Any], execution_id: str, status: str, result: Any = None) -> None:
        arguments = json.loads(call["function"]["arguments"] or "{}")
        record: dict[str, Any] = {
            "execution_id": execution_id,
            "tool_call_id": call["id"],
            "status": status,
            "tool_name": call["function"]["name"],
            "idempotency_key": self.key_for(call, execution_id),
            "arguments_sha256": arguments_sha256(arguments),
        }
        if result is not None:
            record["result"] = result
        self.store.save_execution(record)

    def publish(self, call: dict[str, Any], result: dict[str, Any]) -> None:
        content = json.dumps(result, ensure_ascii=False)
        self.store.save_message({"role": "tool", "tool_call_id": call["id"], "content": content})

    def approve(self, call: dict[str, Any], *, again: bool) -> bool:
        word = "again " if again else ""
        answer = input(f"Approve {word}{call['function']['name']} ({call['id']})? [y/n] ")
        return answer.strip().lower() == "y"

    def uncertain(self, call: dict[str, Any], execution_id: str, why: str) -> dict[str, Any]:
        """What the model is told when nobody knows whether the effect happened (seed 004)."""
        return {
            "ok": False,
            "code": "SIDE_EFFECT_UNCERTAIN",
            "execution_id": execution_id,
            "content": f"{call['function']['name']} may have happened ({why}); not retried: check first.",
            "metadata": {"retryable": False, "idempotency": "non_idempotent"},
        }

    def refused(self, call: dict[str, Any], execution_id: str, acted: str) -> dict[str, Any]:
        """The receipt of a refusal of ``execution_id``. ``acted``: an earlier execution that
        may have acted: nothing is known to have not happened, so the model is told that."""
        if acted:
            return self.uncertain(
                call, acted, "an earlier execution may have acted; the user refused another"
            )
        return rejected(execution_id)

    def effect(self, call: dict[str, Any], execution_id: str) -> tuple[str, dict[str, Any]]:
        """Run the tool. The functions are looked up by name at call time, so whatever the
        module holds under that name now is what runs."""
        arguments = json.loads(call["function"]["arguments"] or "{}")
        name = call["function"]["name"]
        try:
            if name == "send_email":
                result = send_email(arguments["to"], arguments["subject"], arguments["body"])
            elif name == "create_order":
                result = create_order(
                    arguments["item"], int(arguments["quantity"]), self.key_for(call, execution_id)
                )
            else:  # run_call lets only these two through
                raise AssertionError(name)
        except TimeoutError as error:
            # Sent, no answer: the effect may have happened. Never "failed".
            return "unknown", self.uncertain(call, execution_id, str(error))
        return ("succeeded" if result.get("ok") else "failed"), result

    def run_call(
        self, call: dict[str, Any], *, again: bool = False, retries: int = 2, acted: str = ""
    ) -> None:
        """One execution: approval, approved, running, the tool, its terminal status, the
        Tool Result. ``retries``: how many more executions an unknown order may take.
        ``acted``: an earlier execution of the call that may have acted (see ``refused``)."""
        if call["function"]["name"] not in TOOL_NAMES:
            # Nothing can run, so there is no execution to record: the model is told at once.
            self.publish(call, {"ok": False, "code": "UNKNOWN_TOOL", "error": "no such tool"})
            return
        execution_id = f"exec_{uuid.uuid4().hex[:12]}"
        if not self.approve(call, again=again):
            self.ledger(call, execution_id, "rejected")
            self.publish(call, self.refused(call, execution_id, acted))
            return
        self.ledger(call, execution_id, "approved")
        if BUG == "running_after_effect":
            status, result = self.effect(call, execution_id)  # BUG: the effect before running is durable
            self.ledger(call, execution_id, "running")
        else:
            self.ledger(call, execution_id, "running")
            status, result = self.effect(call, execution_id)
        self.ledger(call, execution_id, status, result)
        if status == "unknown" and retries > 0 and self.settle(call, execution_id, retries - 1):
            return
        self.publish(call, result)

    def settle(
        self, call: dict[str, Any], execution_id: str, retries: int, *, interrupted: bool = False
    ) -> bool:
        """Seed 004's rule for ``execution_id``, which ended unknown, by the tool's contract:
        True if a new execution took over (it publishes the Tool Result). ``interrupted``: the
        execution was found ``running`` and closed just now."""
        if call["function"]["name"] == "create_order":
            # Keyed: the API keeps at most one order under the key, so a new execution is safe.
            self.run_call(call, again=True, retries=retries, acted=execution_id)
            return True
        if BUG == "blind_retry_after_unknown" and not interrupted:
            self.run_call(call, again=True, retries=retries)  # BUG: unknown read as "did not happen"
            return True
        return False  # send_email has no key: never sent again

    def recover_call(self, call: dict[str, Any], history: list[dict[str, Any]]) -> None:
        """Seed 000's recovery of one call that has no Tool Result yet."""
        latest = history[-1] if history else None
        if latest is None or latest["status"] == "approved":
            # Nothing of this execution started: route it again (an earlier one may have acted).
            self.run_call(call, again=latest is not None, acted=may_have_acted(history))
            return
        status, execution_id = latest["status"], latest["execution_id"]
        result = latest.get("result")
        if status == "running":
            # The attempt that may have acted is closed as unknown first, with what the model
            # will be told if nothing better can be found out.
            result = self.uncertain(call, execution_id, "the agent stopped while it ran")
            self.ledger(call, execution_id, "unknown", result)
            if BUG == "retry_non_idempotent":
                self.run_call(call, again=True)  # BUG: an email may go out twice
                return
            if self.settle(call, execution_id, 2, interrupted=True):
                return
        elif status == "unknown" and self.settle(call, execution_id, 2):
            return
        elif status == "rejected":
            # Seed 000: rebuilt from the ledger, nothing was stored.
            result = self.refused(call, execution_id, may_have_acted(history))
        # A terminal status: its stored result is published again.
        self.publish(call, result or self.uncertain(call, execution_id, "no result was saved"))

    def recover(self) -> None:
        """Finish what an earlier process left: every call without a Tool Result, then the
        turn. A call's Tool Result and ledger are looked for in its own scope (``scope_end``)."""
        records = self.store.records()
        for index, record in enumerate(records):
            for call in (record.get("message") or {}).get("tool_calls") or ():
                scope = records[index + 1 : scope_end(records, index, call["id"])]
                answered = any((r.get("message") or {}).get("tool_call_id") == call["id"] for r in scope)
                history = [
                    r for r in scope if r["type"] == "tool_execution" and r["tool_call_id"] == call["id"]
                ]
                # BUG: a call whose result was published has it published again.
                again = BUG == "duplicate_tool_result" and bool(history) and history[-1]["status"] in TERMINAL
                if answered and not again:
                    continue
                site = sum(1 for r in records[:index] if r["type"] == "message")
                self.recover_call({**call, "site": site}, history)
        messages = self.store.messages()
        if messages and (messages[-1]["role"] != "assistant" or messages[-1].get("tool_calls")):
            self.loop()

    def loop(self) -> None:
        """Ask the model until it answers without tool calls."""
        while True:
            reply = (
                self.client.chat.completions.create(
                    model=self.model,
                    messages=self.store.messages(),  # type: ignore[arg-type]
                    tools=TOOLS,  # type: ignore[arg-type]
                )
                .choices[0]
                .message
            )
            calls = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in reply.tool_calls or ()
                if c.type == "function"
            ]
            message: dict[str, Any] = {"role": "assistant", "content": reply.content or ""}
            if calls:
                message["tool_calls"] = calls
            site = len(self.store.messages())  # the call site: the messages before this one
            self.store.save_message(message)
            if not calls:
                print(reply.content)
                return
            for call in calls:
                self.run_call({**call, "site": site})

    def turn(self, text: str) -> None:
        self.store.save_message({"role": "user", "content": text})
        self.loop()


def main() -> None:
    agent = Agent(Store(DATABASE), OpenAI(max_retries=0), os.environ.get("STATE_AGENT_MODEL", "gpt-4o-mini"))
    agent.recover()
    while True:
        try:
            text = input("> ")
        except EOFError:
            return
        if text.strip():
            agent.turn(text)


if __name__ == "__main__":
    main()
