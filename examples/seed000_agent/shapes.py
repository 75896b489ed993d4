"""How ledger-agent's intercepted tools answer: the mock tools' result shaped as the agent's
own functions return it in production (``returns: shapes:...`` in adapter.yaml).

In production each tool returns its data or raises: a refusal that did nothing
(PermissionError, FileNotFoundError, ValueError), or a TimeoutError when the request went
out and no answer came back (a lost response, a timeout). The agent classifies those
itself (failed or unknown), so the hook only translates the mock tool's ``code`` into the
exception the wire would have shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["email", "file_read", "file_written", "lookup", "order"]

_RAISES: Mapping[str, type[Exception]] = {
    "PERMISSION_DENIED": PermissionError,
    "NOT_FOUND": FileNotFoundError,
    "INVALID_ARGUMENTS": ValueError,
    "ARGUMENTS_MISMATCH": ValueError,
    "TIMEOUT": TimeoutError,  # a read changes nothing; anything else cannot tell
    "SIDE_EFFECT_UNCERTAIN": TimeoutError,  # the answer was lost: it may have acted
    "CONFLICT": TimeoutError,  # the same key is in flight: the outcome is not known yet
}


def _data(result: Mapping[str, Any], *fields: str) -> dict[str, Any]:
    if not result.get("ok"):
        code = str(result.get("code") or "TOOL_ERROR")
        raise _RAISES.get(code, OSError)(f"{code}: {result.get('content') or ''}".strip())
    return {field: result[field] for field in fields if field in result}


def file_read(result: Mapping[str, Any]) -> dict[str, Any]:
    """read_file: path, content, truncated."""
    return _data(result, "path", "content", "truncated")


def file_written(result: Mapping[str, Any]) -> dict[str, Any]:
    """write_file: path, bytes_written."""
    return _data(result, "path", "bytes_written")


def order(result: Mapping[str, Any]) -> dict[str, Any]:
    """create_order: {"order": the order service's order}."""
    return _data(result, "order")


def lookup(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """find_order: the order placed under the key, or None (the service has none)."""
    found = _data(result, "found", "order")
    return found.get("order") if found.get("found") else None


def email(result: Mapping[str, Any]) -> dict[str, Any]:
    """send_email: {"email": the relay's email}."""
    return _data(result, "email")
