"""order-desk: an agent that places orders, written as a black box.

It only talks HTTP: the model at $OPENAI_BASE_URL (OpenAI chat completions, plain urllib)
and its tools at $CRASHMATRIX_TOOLS_URL (POST /<tool> with JSON arguments). Any language
could do the same; nothing here imports crashmatrix.

Its session ($CRASHMATRIX_SESSION_PATH) is JSONL with its own vocabulary: lines have a
"kind" ("message" or "ledger"), and ledger lines follow seed 004's ToolLedgerEntry
(callId, stepId, toolName, inputHash, idempotencyKey, status planned / approved / started /
succeeded / failed / uncertain). Recovery: a call whose saved arguments no longer match its
steps' inputHash (someone edited the session) is neither sent nor replayed: ARGUMENTS_MISMATCH.
A step left "started" becomes "uncertain" and is retried with the SAME idempotency key, which
the order service deduplicates. A tool request whose answer never came back whole (the tools
server gone mid-call, the answer cut off or not JSON) is "uncertain" too, and said so.

``BLACKBOX_AGENT_BUG`` plants one bug, for the tests of a crash harness:
blind_retry_after_unknown (a step left started is retried as if it never ran: a new key, so the
service cannot tell it from a new order).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

MODEL_URL = os.environ["OPENAI_BASE_URL"].rstrip("/")
TOOLS_URL = os.environ["CRASHMATRIX_TOOLS_URL"].rstrip("/")
SESSION = Path(os.environ.get("CRASHMATRIX_SESSION_PATH", ".order-desk/session.jsonl"))
FINAL = ("succeeded", "failed", "uncertain")
BUG = os.environ.get("BLACKBOX_AGENT_BUG", "")


def post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return dict(json.load(response))
    except urllib.error.HTTPError as error:
        raise SystemExit(f"{url}: HTTP {error.code}: {error.read()[:300]!r}") from error


def run_tool(url: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """(ledger status, result) of one tool request. The tools server going away mid-call is
    no reason to die: an error answer means nothing ran (failed); a request sent whose answer
    never came back whole -- the connection dropped, cut off, a body that is not JSON -- may
    have placed the order (uncertain: said so, never retried here)."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            result = json.loads(response.read())
        if not isinstance(result, dict):
            raise ValueError(f"a JSON {type(result).__name__}, not the result object")
    except urllib.error.HTTPError as error:
        return "failed", {"ok": False, "code": f"HTTP_{error.code}", "content": repr(error.read()[:300])}
    except (OSError, http.client.HTTPException, ValueError) as error:
        why = f"{type(error).__name__}: {error}"
        return "uncertain", {
            "ok": False,
            "code": "SIDE_EFFECT_UNCERTAIN",
            "content": f"no readable answer ({why}); it may have happened: check before doing it again",
        }
    return ("succeeded" if result.get("ok") else "failed"), dict(result)


def append(record: dict[str, Any]) -> None:
    SESSION.parent.mkdir(parents=True, exist_ok=True)
    with open(SESSION, "a", encoding="utf-8") as file:
        file.write(json.dumps(record, separators=(",", ":")) + "\n")
        file.flush()
        os.fsync(file.fileno())


def entries() -> list[dict[str, Any]]:
    if not SESSION.exists():
        return []
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
    return [e["message"] for e in entries() if e["kind"] == "message"]


def input_hash(arguments: str) -> str:
    """seed 000's recipe: canonical JSON (sorted keys, compact), so a judge can compare it."""
    canonical = json.dumps(
        json.loads(arguments or "{}"), ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def ledger(call: dict[str, Any], step: str, status: str, key: str, result: Any = None) -> None:
    record = {
        "kind": "ledger",
        "callId": call["id"],
        "stepId": step,
        "toolName": call["function"]["name"],
        "inputHash": input_hash(call["function"]["arguments"]),
        "idempotencyKey": key,
        "status": status,
    }
    if result is not None:
        record["result"] = result
    append(record)


def approve(call: dict[str, Any], again: bool) -> bool:
    sys.stdout.write(f"Approve {'again ' if again else ''}{call['function']['name']} ({call['id']})? [y/n] ")
    sys.stdout.flush()
    return sys.stdin.readline().strip() == "y"


def execute(call: dict[str, Any], key: str, *, again: bool = False, planned: bool = True) -> None:
    step = f"step_{uuid.uuid4().hex[:10]}"
    if planned:
        ledger(call, step, "planned", key)
    if not approve(call, again):
        ledger(call, step, "failed", key, {"ok": False, "code": "REJECTED"})
        append(
            {
                "kind": "message",
                "message": {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": '{"ok": false, "code": "REJECTED"}',
                },
            }
        )
        return
    ledger(call, step, "approved", key)
    ledger(call, step, "started", key)
    headers = {"X-Tool-Call-Id": call["id"], "X-Execution-Id": step, "Idempotency-Key": key}
    status, result = run_tool(
        f"{TOOLS_URL}/{call['function']['name']}", json.loads(call["function"]["arguments"]), headers
    )
    ledger(call, step, status, key, result)
    append(
        {
            "kind": "message",
            "message": {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)},
        }
    )


def refuse_changed(call: dict[str, Any], last: dict[str, Any]) -> None:
    """The saved call is not the one its steps were recorded for (someone edited the
    session): nothing is sent, no stored result is replayed for the new arguments. An open
    step is closed under what it recorded (its inputHash, not the edited call's): a started
    one may have acted (uncertain), one that never started was not carried out (rejected)."""
    result = {
        "ok": False,
        "code": "ARGUMENTS_MISMATCH",
        "recovery": "conflict",
        "content": f"the saved {call['function']['name']} call changed after its step was recorded",
    }
    if last["status"] not in FINAL:
        status = "uncertain" if last["status"] == "started" else "rejected"
        append({**{k: v for k, v in last.items() if k != "result"}, "status": status, "result": result})
    content = json.dumps(result)
    append({"kind": "message", "message": {"role": "tool", "tool_call_id": call["id"], "content": content}})


def think() -> None:
    while True:
        reply = post(f"{MODEL_URL}/chat/completions", {"model": "order-desk", "messages": messages()})
        message = reply["choices"][0]["message"]
        saved: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("tool_calls"):
            saved["tool_calls"] = message["tool_calls"]
        append({"kind": "message", "message": saved})
        if not message.get("tool_calls"):
            print(message.get("content"))
            return
        for call in message["tool_calls"]:
            execute(call, f"order-desk:{call['id']}")


def recover() -> None:
    log = entries()
    answered = {e["message"].get("tool_call_id") for e in log if e["kind"] == "message"}
    for entry in log:
        for call in entry.get("message", {}).get("tool_calls") or ():
            if call["id"] in answered:
                continue
            steps = [e for e in log if e["kind"] == "ledger" and e["callId"] == call["id"]]
            last = steps[-1] if steps else None
            key = last["idempotencyKey"] if last else f"order-desk:{call['id']}"
            if last is not None and last["inputHash"] != input_hash(call["function"]["arguments"]):
                refuse_changed(call, last)
                continue
            if last is not None and last["status"] == "started":
                ledger(call, last["stepId"], "uncertain", key)  # the request may have gone out
                if BUG == "blind_retry_after_unknown":
                    key = f"order-desk:{call['id']}:{uuid.uuid4().hex[:8]}"  # BUG: "it did not happen"
            if last is not None and last["status"] in ("succeeded", "failed"):
                content = json.dumps(last.get("result") or {})
                append(
                    {
                        "kind": "message",
                        "message": {"role": "tool", "tool_call_id": call["id"], "content": content},
                    }
                )
            else:
                execute(call, key, again=last is not None, planned=last is None)
    history = messages()
    if history and (history[-1]["role"] != "assistant" or history[-1].get("tool_calls")):
        think()


def main() -> None:
    drop_torn_tail(SESSION)
    recover()
    for line in iter(lambda: (sys.stdout.write("> "), sys.stdout.flush(), sys.stdin.readline())[2], ""):
        if line.strip():
            append({"kind": "message", "message": {"role": "user", "content": line.strip()}})
            think()


if __name__ == "__main__":
    main()
