"""How state-agent's intercepted tools answer: the mock tools' result shaped as the agent's
own ``send_email`` / ``create_order`` return it in production (``returns: shapes:...`` in
adapter.yaml).

In production both return ``{"ok": True, **the service's JSON}`` or ``{"ok": False, "code",
"error"}``, and raise ``TimeoutError`` when the request went out and no answer came back. A
mock result that says SIDE_EFFECT_UNCERTAIN (a lost response) is that TimeoutError: the
agent must see what it would see on the wire, not a tidy refusal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["email", "order"]


def _shaped(result: Mapping[str, Any], field: str) -> dict[str, Any]:
    if result.get("code") == "SIDE_EFFECT_UNCERTAIN":
        raise TimeoutError(str(result.get("content") or "the response was lost"))
    if not result.get("ok"):
        return {"ok": False, "code": result.get("code"), "error": result.get("content")}
    body = result.get(field)
    return {"ok": True, **(dict(body) if isinstance(body, Mapping) else {})}


def email(result: Mapping[str, Any]) -> dict[str, Any]:
    """send_email: the relay's email (id, to, subject)."""
    return _shaped(result, "email")


def order(result: Mapping[str, Any]) -> dict[str, Any]:
    """create_order: the order API's order (id, item, quantity, status, idempotency_key)."""
    return _shaped(result, "order")
