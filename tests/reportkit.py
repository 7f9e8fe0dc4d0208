"""Logged requests and a policy's code for the impact report tests (the reference
server's, and ``refresh.impact.measure``'s)."""

from __future__ import annotations

import time
from typing import Any

from govsync.server.store import timestamp

HOUR = 3_600_000_000_000
CODE = """package formal.v2
import future.keywords.if
import future.keywords.in

default pre_request := {"action": "allow"}
pre_request := {"action": "block", "type": "block_with_formal_message", "message": "no"} if {
    input.query.statement_type == "DELETE"
}
session := {"action": "mfa"} if { "admins" in input.user.groups }
"""


def log(i: int, hours_ago: float, stage: str, user: str, *, admin: bool = False,
        statement: str = "SELECT", resource: str = "orders-db") -> dict[str, Any]:
    return {"id": f"log-{i:03d}", "time": timestamp(time.time_ns() - int(hours_ago * HOUR)),
            "stage": stage,
            "input": {"user": {"username": user, "groups": ["admins"] if admin else []},
                      "resource": {"name": resource, "technology": "postgres"},
                      "query": {"statement_type": statement}}}


# In the last day: 2 DELETEs (block), 2 SELECTs (allow), 2 admin sessions (mfa), 1 other
# session (undefined); two days ago, a DELETE and an admin session (outside a 1-day window).
LOGS = [
    log(1, 1, "pre_request", "ann", statement="DELETE"),
    log(2, 2, "pre_request", "bob", statement="DELETE", resource="billing"),
    log(3, 3, "pre_request", "ann"),
    log(4, 4, "pre_request", "bob"),
    log(5, 5, "session", "ann", admin=True),
    log(6, 6, "session", "cy", admin=True),
    log(7, 7, "session", "bob"),
    log(8, 48, "pre_request", "ann", statement="DELETE"),
    log(9, 49, "session", "ann", admin=True),
]
