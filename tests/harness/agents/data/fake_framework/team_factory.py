"""The team's factory module of the fake framework's tests (never called: loading only)."""

import json  # noqa: F401  (an import the adapter's name check accepts as module.attr)


def build(ctx: object) -> object:
    return ctx


def send_email(to: str, subject: str, body: str) -> str:
    return "sent"
