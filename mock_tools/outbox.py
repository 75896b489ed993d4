"""``send_email`` and ``list_sent_emails``: a mail service with no idempotency key support.

Every ``send_email`` is one more ``outbox`` row, committed with its event, so a retried
email is visibly a second email. That is the point: nothing here can deduplicate.
"""

from __future__ import annotations

from crashmatrix.harness.core.tools import ToolObservation
from crashmatrix.mock_tools.calls import Call

__all__ = ["list_sent_emails", "send_email"]


def send_email(call: Call) -> ToolObservation:
    to, subject, body = (str(call.arguments[k]) for k in ("to", "subject", "body"))
    with call.world.transaction() as conn:
        seq = call.world.record_event(
            conn, "email", call.name, **call.event_ids(), detail={"to": to, "subject": subject}
        )
        email_id = conn.execute(
            "INSERT INTO outbox (to_addr, subject, body, tool_call_id, execution_id, seq)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (to, subject, body, call.ctx.tool_call_id, call.ctx.execution_id, seq),
        ).lastrowid
    return ToolObservation(
        ok=True, data={"email": {"id": f"msg_{email_id:06d}", "to": to, "subject": subject}}
    )


def list_sent_emails(call: Call) -> ToolObservation:
    rows = call.world.read().execute("SELECT id, to_addr, subject, body FROM outbox ORDER BY id").fetchall()
    emails = [
        {"id": f"msg_{row['id']:06d}", "to": row["to_addr"], "subject": row["subject"], "body": row["body"]}
        for row in rows
    ]
    return ToolObservation(ok=True, data={"emails": emails})
