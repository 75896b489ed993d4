"""http-agent: an office assistant that mails and orders through real HTTP services.

It knows nothing about crashmatrix and uses only the standard library. Everything it does is
an HTTP request: the model at $OPENAI_BASE_URL (POST /chat/completions, OpenAI JSON), orders
at $HTTP_AGENT_ORDERS_URL (POST /orders with an ``Idempotency-Key`` header; GET
/orders?idempotency_key=K to look one up) and mail at $HTTP_AGENT_MAIL_URL (POST /emails, no
key: the mail service sends one email per request).

Its session ($HTTP_AGENT_SESSION) is one JSONL file in seed 004's vocabulary: lines say
``kind: message`` (the conversation) or ``kind: ledger`` (callId, stepId, toolName,
inputHash, idempotencyKey, status planned / approved / started / succeeded / failed /
uncertain; a refusal is ``denied``). Every line is fsynced before the agent goes on.

Recovery is seed 000's table, with seed 004's contracts deciding what an uncertain step
may do next. A call with steps is first compared with the inputHash they recorded: a saved
call someone changed since is neither run nor replayed (ARGUMENTS_MISMATCH). Then:

* no ledger, or the last step ``planned`` / ``approved``: nothing started; the call is
  routed again, approval asked again;
* ``started``: the request may have gone out. The step is closed ``uncertain`` first; then
  create_order (keyed) runs a NEW step under the SAME Idempotency-Key (the service
  deduplicates, and a lookup by key comes first), send_email (no key) is never resent: the
  model is told SIDE_EFFECT_UNCERTAIN;
* a terminal step (succeeded / failed / uncertain / denied) has its stored result published
  again, except an uncertain create_order, which the key makes safe to settle;

then the turn goes on from the saved history, with no new user message. A request whose
connection closed without an answer is uncertain, not failed: the service may have acted,
and so is a call whose new step the user refuses after an earlier step may have acted.

A tool call is a call SITE, not an id: providers reuse ids (``call_0`` in every turn), so a
call owns only the lines after the assistant message that made it, up to the next user
message or the next assistant message reusing its id; its key names the site too.

``HTTP_AGENT_BUG`` plants one bug, for the tests of a crash harness: new_key_per_attempt,
blind_retry_after_unknown, running_after_effect, retry_non_idempotent, duplicate_tool_result.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import sys
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

BUG = os.environ.get("HTTP_AGENT_BUG", "")
MODEL_URL = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1").rstrip("/")
API_KEY = os.environ.get("OPENAI_API_KEY", "")
MODEL = os.environ.get("HTTP_AGENT_MODEL", "gpt-4o-mini")
ORDERS_URL = os.environ.get("HTTP_AGENT_ORDERS_URL", "http://localhost:8001").rstrip("/")
MAIL_URL = os.environ.get("HTTP_AGENT_MAIL_URL", "http://localhost:8002").rstrip("/")
SESSION = Path(os.environ.get("HTTP_AGENT_SESSION", ".http-agent/session.jsonl"))
# Steps whose story is over: what they end with is what the model is told.
TERMINAL = ("succeeded", "failed", "uncertain", "denied")
# A keyed order settles in a few attempts or something is wrong with the service: stop and
# tell the model rather than loop.
MAX_ATTEMPTS = 3
TIMEOUT = 30.0
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


# -- the session file ------------------------------------------------------------------------


def append(record: dict[str, Any]) -> None:
    """One line, on disk before returning: recovery can only trust what was fsynced."""
    SESSION.parent.mkdir(parents=True, exist_ok=True)
    with open(SESSION, "a", encoding="utf-8") as file:
        file.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        file.flush()
        os.fsync(file.fileno())


def entries() -> list[dict[str, Any]]:
    if not SESSION.exists():
        return []
    # The piece after the last newline is empty, or a line a dead process was writing.
    return [json.loads(line) for line in SESSION.read_text(encoding="utf-8").split("\n")[:-1] if line]


def drop_torn_tail(path: Path) -> None:
    """A last line without its newline is one a dead process was writing: cut it off before
    anything is appended, or the next line would be glued to it (and the file corrupt)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as file:
            file.truncate(data.rfind(b"\n") + 1)
            file.flush()
            os.fsync(file.fileno())


def messages() -> list[dict[str, Any]]:
    """What the model sees: the conversation only, never the ledger."""
    return [e["message"] for e in entries() if e.get("kind") == "message"]


def input_hash(call: dict[str, Any]) -> str:
    """Seed 000's recipe (sorted keys, compact JSON), so a judge can recompute it."""
    arguments = json.loads(call["function"]["arguments"] or "{}")
    canonical = json.dumps(arguments, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def idempotency_key(call: dict[str, Any], step: str) -> str:
    """The runtime builds the key, not the model (seed 004): the business action is this
    tool call with these arguments, so every attempt at it carries the same key. The call's
    site (how many messages came before the assistant message that made it) is part of it:
    the same id and arguments in a later turn are a new business action."""
    parts = ["http-agent", f"m{call['site']}", call["id"], input_hash(call)[:16]]
    if BUG == "new_key_per_attempt":
        parts.append(step)  # BUG: every attempt is a new business action
    return ":".join(parts)


def ledger(call: dict[str, Any], step: str, key: str, status: str, result: Any = None) -> None:
    record: dict[str, Any] = {
        "kind": "ledger",
        "callId": call["id"],
        "stepId": step,
        "toolName": call["function"]["name"],
        "inputHash": input_hash(call),
        "idempotencyKey": key,
        "status": status,
    }
    if result is not None:
        record["result"] = result
    append(record)


def publish(call: dict[str, Any], result: dict[str, Any]) -> None:
    message = {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result, ensure_ascii=False)}
    append({"kind": "message", "message": message})


# -- HTTP ------------------------------------------------------------------------------------


class Uncertain(Exception):
    """The request was sent and no answer came back: the service may or may not have acted."""


class Unreachable(Exception):
    """The connection was never made: nothing was sent, so nothing happened."""


def service(
    method: str, url: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """(status, JSON body) of one request on its own connection.

    The connection is opened before the request is written so that "nothing was sent"
    (Unreachable) and "sent, answer lost" (Uncertain) are told apart: a closed connection
    after the request went out must never be read as a failure."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "localhost", parts.port, timeout=TIMEOUT)
    try:
        try:
            connection.connect()
        except OSError as error:
            raise Unreachable(f"{url}: {error}") from error
        try:
            data = None if body is None else json.dumps(body).encode("utf-8")
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            connection.request(
                method, target, body=data, headers={"Content-Type": "application/json", **(headers or {})}
            )
            response = connection.getresponse()
            raw = response.read()
        except (OSError, http.client.HTTPException) as error:
            raise Uncertain(f"{method} {url}: {type(error).__name__}: {error}") from error
        try:
            return response.status, json.loads(raw or b"null")
        except ValueError as error:
            if 200 <= response.status < 300:
                # It says done, and what it did (the order, its id) cannot be read: a broken
                # answer is no success to report; the key's lookup can settle it.
                why = f"{method} {url}: {response.status}, a body that is not JSON ({error})"
                raise Uncertain(why) from error
            return response.status, {"raw": raw[:200].decode("utf-8", "replace")}
    finally:
        connection.close()


def chat() -> dict[str, Any]:
    """The model's next message for the saved conversation."""
    body = {"model": MODEL, "messages": messages(), "tools": TOOLS}
    request = urllib.request.Request(
        f"{MODEL_URL}/chat/completions",
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"},
    )
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
        reply = json.load(response)
    return dict(reply["choices"][0]["message"])


# -- the tools -------------------------------------------------------------------------------


def uncertain_result(call: dict[str, Any], step: str, why: str) -> dict[str, Any]:
    """What the model is told when nobody knows whether the effect happened (seed 004)."""
    return {
        "ok": False,
        "code": "SIDE_EFFECT_UNCERTAIN",
        "stepId": step,
        "content": f"{call['function']['name']} may have happened ({why}); it was not retried: check first.",
        "metadata": {"retryable": False, "idempotency": "non_idempotent"},
    }


def failed_result(status: int, body: Any) -> dict[str, Any]:
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return {"ok": False, "code": str(code or f"HTTP_{status}").upper(), "content": json.dumps(body)[:500]}


def send_email(
    call: dict[str, Any], arguments: dict[str, Any], step: str, key: str
) -> tuple[str, dict[str, Any]]:
    """POST /emails: no key, so every request that arrives is one more email."""
    try:
        status, body = service("POST", f"{MAIL_URL}/emails", arguments)
    except Unreachable as error:
        return "failed", {"ok": False, "code": "UNAVAILABLE", "content": str(error)}
    except Uncertain as error:
        return "uncertain", uncertain_result(call, step, str(error))
    if 200 <= status < 300:
        return "succeeded", {"ok": True, "email": body}
    return "failed", failed_result(status, body)


def create_order(
    call: dict[str, Any], arguments: dict[str, Any], step: str, key: str
) -> tuple[str, dict[str, Any]]:
    """POST /orders under the key: the service replays the first answer for a repeated key."""
    try:
        status, body = service("POST", f"{ORDERS_URL}/orders", arguments, {"Idempotency-Key": key})
    except Unreachable as error:
        return "failed", {"ok": False, "code": "UNAVAILABLE", "content": str(error)}
    except Uncertain as error:
        return "uncertain", uncertain_result(call, step, str(error))
    if 200 <= status < 300:
        return "succeeded", {"ok": True, "order": body}
    return "failed", failed_result(status, body)


def find_order(key: str) -> dict[str, Any] | None:
    """The order an earlier attempt placed under ``key``, if the service has one. A lookup
    changes nothing, so any failure of it just means "not known": the keyed POST settles it."""
    try:
        status, body = service(
            "GET", f"{ORDERS_URL}/orders?{urllib.parse.urlencode({'idempotency_key': key})}"
        )
    except (Unreachable, Uncertain):
        return None
    return body if status == 200 and isinstance(body, dict) else None


TOOL_FUNCTIONS = {"send_email": send_email, "create_order": create_order}


# -- the loop --------------------------------------------------------------------------------


def approve(call: dict[str, Any], *, again: bool) -> bool:
    word = "again " if again else ""
    sys.stdout.write(f"Approve {word}{call['function']['name']} ({call['id']})? [y/n] ")
    sys.stdout.flush()
    return sys.stdin.readline().strip().lower() == "y"


def execute(
    call: dict[str, Any], *, again: bool = False, key: str | None = None, attempt: int = 1, acted: str = ""
) -> None:
    """One step of ``call``: planned, approval, started, the request, its outcome, the Tool
    Result. ``key``: the key of the business action, when an earlier step made it.
    ``acted``: an earlier step that may have acted (closed uncertain): if the user refuses
    this one, the model is told that, not that nothing happened."""
    name = call["function"]["name"]
    tool = TOOL_FUNCTIONS.get(name)
    if tool is None:
        # Nothing can run, so there is no step to record: the model is told at once.
        publish(call, {"ok": False, "code": "UNKNOWN_TOOL", "content": f"no tool {name!r}"})
        return
    step = f"step_{uuid.uuid4().hex[:12]}"
    if key is None or BUG == "new_key_per_attempt":
        key = idempotency_key(call, step)
    ledger(call, step, key, "planned")
    if not approve(call, again=again):
        result = (
            uncertain_result(call, acted, "an earlier step may have acted; the user refused another")
            if acted
            else {"ok": False, "code": "REJECTED", "content": "the user said no"}
        )
        ledger(call, step, key, "denied", result)
        publish(call, result)
        return
    ledger(call, step, key, "approved")
    arguments = json.loads(call["function"]["arguments"] or "{}")
    if BUG == "running_after_effect":
        status, result = tool(call, arguments, step, key)  # BUG: the request before started is durable
        ledger(call, step, key, "started")
    else:
        ledger(call, step, key, "started")
        found = find_order(key) if name == "create_order" and attempt > 1 else None
        if found is not None:
            status, result = "succeeded", {"ok": True, "order": found}
        else:
            status, result = tool(call, arguments, step, key)
    ledger(call, step, key, status, result)
    if status == "uncertain" and settle(call, key, step, attempt):
        return
    publish(call, result)


def settle(call: dict[str, Any], key: str, step: str, attempt: int, *, interrupted: bool = False) -> bool:
    """Seed 004's rule for ``step``, which ended uncertain, by the tool's contract: True if a
    new step took over (it publishes the Tool Result), False if the uncertainty is what the
    model must be told. ``interrupted``: the step was found ``started`` and closed just now."""
    if attempt >= MAX_ATTEMPTS:
        return False
    if call["function"]["name"] == "create_order":
        # Keyed: the service keeps at most one order under the key, so a new step may ask.
        execute(call, again=True, key=key, attempt=attempt + 1, acted=step)
        return True
    if BUG == "blind_retry_after_unknown" and not interrupted:
        execute(call, again=True, key=key, attempt=attempt + 1)  # BUG: uncertain read as "did not happen"
        return True
    return False  # send_email has no key: never sent again


def mismatch_result(call: dict[str, Any]) -> dict[str, Any]:
    return {
        "ok": False,
        "code": "ARGUMENTS_MISMATCH",
        "content": f"the saved {call['function']['name']} call changed after its step was recorded: not run",
        "metadata": {"retryable": False},
    }


def refuse_changed(call: dict[str, Any], last: dict[str, Any]) -> None:
    """The saved call is not the one its steps were recorded for (someone edited the
    session): nothing runs, nothing stored is replayed for the new arguments. An open step is
    closed under what it recorded (its inputHash and key, not the edited call's): one that
    never started is denied, a started one may have acted, so uncertain. A closed step keeps
    its status; only the model is told."""
    result = mismatch_result(call)
    if last["status"] not in TERMINAL:
        status = "uncertain" if last["status"] == "started" else "denied"
        append({**{k: v for k, v in last.items() if k != "result"}, "status": status, "result": result})
    publish(call, result)


def recover_call(call: dict[str, Any], steps: list[dict[str, Any]]) -> None:
    """Seed 000's recovery of one call that has no Tool Result yet."""
    last = steps[-1] if steps else None
    if last is not None and last.get("inputHash") != input_hash(call):
        refuse_changed(call, last)
        return
    if last is None or last["status"] in ("planned", "approved"):
        # Nothing of this step started; an earlier one may have (a retry that was cut short).
        acted = next((s["stepId"] for s in reversed(steps) if s["status"] in ("started", "uncertain")), "")
        execute(call, again=last is not None, key=last["idempotencyKey"] if last else None, acted=acted)
        return
    status, step, key = last["status"], last["stepId"], last["idempotencyKey"]
    result = last.get("result")
    interrupted = status == "started"
    if interrupted:
        # The request may have gone out: close the step as uncertain before anything else,
        # with what the model will be told if nothing better can be found out.
        result = uncertain_result(call, step, "the agent stopped while the request was in flight")
        ledger(call, step, key, "uncertain", result)
        status = "uncertain"
        if BUG == "retry_non_idempotent":
            execute(call, again=True, key=key)  # BUG: an email may go out twice
            return
    if status == "uncertain" and settle(call, key, step, 1, interrupted=interrupted):
        return
    publish(call, result or uncertain_result(call, step, "no result was saved"))


def scope_end(log: list[dict[str, Any]], index: int, call_id: str) -> int:
    """Where the call made at ``index`` stops owning the session: the next user message, or
    the next assistant message that reuses its id."""
    for later in range(index + 1, len(log)):
        message = log[later].get("message") or {}
        if message.get("role") == "user" or call_id in [c["id"] for c in message.get("tool_calls") or ()]:
            return later
    return len(log)


def recover() -> None:
    """Finish what an earlier process left: every call without a Tool Result, then the turn.
    A call's Tool Result and steps are looked for in its own scope only (``scope_end``)."""
    log = entries()
    for index, entry in enumerate(log):
        for call in (entry.get("message") or {}).get("tool_calls") or ():
            scope = log[index + 1 : scope_end(log, index, call["id"])]
            answered = any((e.get("message") or {}).get("tool_call_id") == call["id"] for e in scope)
            steps = [e for e in scope if e.get("kind") == "ledger" and e["callId"] == call["id"]]
            # BUG: a call whose result was published has it published again.
            again = BUG == "duplicate_tool_result" and bool(steps) and steps[-1]["status"] in TERMINAL
            if answered and not again:
                continue
            site = sum(1 for e in log[:index] if e.get("kind") == "message")
            recover_call({**call, "site": site}, steps)
    history = messages()
    if history and (history[-1]["role"] != "assistant" or history[-1].get("tool_calls")):
        think()


def think() -> None:
    """Ask the model until it answers without tool calls."""
    while True:
        reply = chat()
        site = len(messages())  # the call site: the messages before this one
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content") or ""}
        if reply.get("tool_calls"):
            message["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": c["function"]} for c in reply["tool_calls"]
            ]
        append({"kind": "message", "message": message})
        if not message.get("tool_calls"):
            print(message["content"])
            return
        for call in message["tool_calls"]:
            execute({**call, "site": site})


def main() -> None:
    drop_torn_tail(SESSION)
    recover()
    while True:
        sys.stdout.write("> ")
        sys.stdout.flush()
        line = sys.stdin.readline()
        if not line:
            return
        if line.strip():
            append({"kind": "message", "message": {"role": "user", "content": line.strip()}})
            think()


if __name__ == "__main__":
    main()
