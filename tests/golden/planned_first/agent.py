"""A black box whose seed 004 ledger records every call ``planned`` before it asks the user.

It places orders through the harness's tools (POST $CRASHMATRIX_TOOLS_URL/<tool>, passing the
results on as they are) and keeps one JSONL session: ``kind: message`` lines and ``kind:
ledger`` steps (callId, stepId, toolName, inputHash, idempotencyKey, status planned /
approved / started / succeeded / failed / uncertain). Recovery: a call whose saved arguments
no longer match its steps' inputHash is neither sent nor replayed (ARGUMENTS_MISMATCH, its
open step closed under what it recorded: started -> uncertain); a step left started is closed
uncertain and asked again under the same key; a finished step's result is told again.

It is crash-only: a tool request that fails in any way (the tools server gone mid-call, an
answer cut off or not JSON, an error status) raises out of ``urlopen`` and the process exits
non-zero, leaving its step ``started``; its supervisor restarts it and recovery does the rest.
The harness restarts it likewise in a tool-side column (issue 32), and judges what it did then.

``PLANNED_FIRST_BUG=started_failed`` is its twin: a changed call's started step is closed
``failed`` (a step that may have placed the order recorded as one that did nothing).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

MODEL_URL = os.environ["OPENAI_BASE_URL"].rstrip("/")
TOOLS_URL = os.environ["CRASHMATRIX_TOOLS_URL"].rstrip("/")
SESSION = Path(os.environ.get("CRASHMATRIX_SESSION_PATH", ".planned/session.jsonl"))
FINAL = ("succeeded", "failed", "uncertain", "rejected")
BUG = os.environ.get("PLANNED_FIRST_BUG", "")


def post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json", **(headers or {})}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return dict(json.load(response))


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


def input_hash(arguments: str) -> str:
    """Seed 000's recipe (sorted keys, compact JSON), so the judge can compare it."""
    canonical = json.dumps(
        json.loads(arguments or "{}"), ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def step_line(call: dict[str, Any], step: str, status: str, key: str, result: Any = None) -> None:
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


def tell(call: dict[str, Any], result: dict[str, Any]) -> None:
    append(
        {
            "kind": "message",
            "message": {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)},
        }
    )


def approve(call: dict[str, Any], again: bool) -> bool:
    sys.stdout.write(f"Approve {'again ' if again else ''}{call['function']['name']} ({call['id']})? [y/n] ")
    sys.stdout.flush()
    return sys.stdin.readline().strip() == "y"


def execute(call: dict[str, Any], key: str, *, again: bool = False) -> None:
    step = f"step_{uuid.uuid4().hex[:10]}"
    step_line(call, step, "planned", key)  # recorded before anyone is asked
    if not approve(call, again):
        refused = {"ok": False, "code": "REJECTED"}
        step_line(call, step, "rejected", key, refused)
        tell(call, refused)
        return
    step_line(call, step, "approved", key)
    step_line(call, step, "started", key)
    headers = {"X-Tool-Call-Id": call["id"], "X-Execution-Id": step, "Idempotency-Key": key}
    result = post(
        f"{TOOLS_URL}/{call['function']['name']}", json.loads(call["function"]["arguments"]), headers
    )
    step_line(call, step, "succeeded" if result.get("ok") else "failed", key, result)
    tell(call, result)


def refuse_changed(call: dict[str, Any], last: dict[str, Any]) -> None:
    result = {"ok": False, "code": "ARGUMENTS_MISMATCH", "recovery": "conflict"}
    if last["status"] not in FINAL:
        closed = "rejected" if last["status"] in ("planned", "approved") else "uncertain"
        if BUG == "started_failed" and last["status"] == "started":
            closed = "failed"  # BUG: the order may have been placed
        append({**{k: v for k, v in last.items() if k != "result"}, "status": closed, "result": result})
    tell(call, result)


def recover() -> None:
    log = entries()
    answered = {e["message"].get("tool_call_id") for e in log if e["kind"] == "message"}
    for entry in log:
        for call in entry.get("message", {}).get("tool_calls") or ():
            if call["id"] in answered:
                continue
            steps = [e for e in log if e["kind"] == "ledger" and e["callId"] == call["id"]]
            last = steps[-1] if steps else None
            key = last["idempotencyKey"] if last else f"planned:{call['id']}"
            if last is not None and last["inputHash"] != input_hash(call["function"]["arguments"]):
                refuse_changed(call, last)
            elif last is not None and last["status"] in FINAL and last["status"] != "uncertain":
                tell(call, last.get("result") or {"ok": False, "code": "SIDE_EFFECT_UNCERTAIN"})
            else:
                if last is not None and last["status"] == "started":
                    step_line(call, last["stepId"], "uncertain", key)  # the request may have gone out
                execute(call, key, again=last is not None)
    history = [e["message"] for e in entries() if e["kind"] == "message"]
    if history and (history[-1]["role"] != "assistant" or history[-1].get("tool_calls")):
        think()


def think() -> None:
    while True:
        messages = [e["message"] for e in entries() if e["kind"] == "message"]
        reply = post(f"{MODEL_URL}/chat/completions", {"model": "planned-first", "messages": messages})
        message = reply["choices"][0]["message"]
        saved: dict[str, Any] = {"role": "assistant", "content": message.get("content") or ""}
        if message.get("tool_calls"):
            saved["tool_calls"] = message["tool_calls"]
        append({"kind": "message", "message": saved})
        if not message.get("tool_calls"):
            print(message.get("content"))
            return
        for call in message["tool_calls"]:
            execute(call, f"planned:{call['id']}")


def main() -> None:
    recover()
    for line in iter(lambda: (sys.stdout.write("> "), sys.stdout.flush(), sys.stdin.readline())[2], ""):
        if line.strip():
            append({"kind": "message", "message": {"role": "user", "content": line.strip()}})
            think()


if __name__ == "__main__":
    main()
