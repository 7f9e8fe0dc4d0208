"""bench/impact: a pull request changing policies, their impact measured by the endpoint's
impact reports (issue 45, ``plan --impact 7d``).

A reference server (a process, ``--latency-ms``, 50 by default) seeded with --logs
logged requests (100,000 by default) spread over the last week: 50 users, 10 resources,
sessions, queries and rows.  It holds --policies policies (10); each one's code changes
(the new code blocks DELETE and UPDATE of its resource by non-admins and asks
contractors for MFA; the recorded code blocks DELETE only).  Measured: one
``refresh.impact.measure`` of them all, as a plan runs it, in this process: two reports
a policy, created at once, polled, read page by page (500 logs a page).

It prints the wall time beside what it is bound by if the reports are waited for
concurrently: the report seen completed last (its creation, the server's evaluation and
the polling), plus one round trip for each page of its logs; and the calls made.

Usage: python bench/impact/run.py [--logs 100000] [--policies 10] [--latency-ms 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from common import KEY, compile_package, start_server  # noqa: E402

from govsync import runtime  # noqa: E402
from govsync.planning.impact import Impact, Target, parse_window  # noqa: E402
from govsync.refresh.impact import measure  # noqa: E402

USERS, RESOURCES = 50, 10
STATEMENTS = ("SELECT", "SELECT", "INSERT", "UPDATE", "DELETE")

NEW = """package formal.v2
import future.keywords.if
import future.keywords.in

default pre_request := {{"action": "allow"}}

pre_request := {{"action": "block", "type": "block_with_formal_message",
                "message": "policy {i}: ask for a change window"}} if {{
    input.resource.name == "db-{i}"
    input.query.statement_type in {{"DELETE", "UPDATE"}}
    not "admins" in input.user.groups
}}

session := {{"action": "mfa"}} if {{
    input.resource.name == "db-{i}"
    "contractors" in input.user.groups
}}
"""
RECORDED = """package formal.v2
import future.keywords.if
import future.keywords.in

default pre_request := {{"action": "allow"}}

pre_request := {{"action": "block"}} if {{
    input.resource.name == "db-{i}"
    input.query.statement_type == "DELETE"
    not "admins" in input.user.groups
}}
"""


def user(n: int) -> dict[str, Any]:
    groups = ["admins"] if n % 10 == 0 else ["contractors"] if n % 5 == 1 else ["staff"]
    return {"username": f"user-{n:03d}", "email": f"user-{n:03d}@example.com",
            "groups": groups, "type": "machine" if n % 17 == 0 else "human"}


def logs(count: int, rng: random.Random) -> list[dict[str, Any]]:
    """``count`` logged requests over the last week (a minute short of it)."""
    now = time.time()
    out = []
    for i in range(count):
        r = rng.randrange(RESOURCES)
        given: dict[str, Any] = {
            "user": user(rng.randrange(USERS)),
            "resource": {"id": f"res-{r}", "name": f"db-{r}", "technology": "postgres",
                         "environment": "production"}}
        roll = rng.random()
        if roll < 0.2:
            stage = "session"
        elif roll < 0.9:
            stage = "pre_request"
            given["query"] = {"statement_type": rng.choice(STATEMENTS)}
        else:
            stage = "post_request"
            given["row"] = [{"path": "orders.email", "data_label": "email", "value": "x"}]
        at = now - 60 - rng.random() * (7 * 86400 - 120)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1e6):06d}Z"
        out.append({"id": f"log-{i:06d}", "time": stamp, "stage": stage, "input": given})
    return out


class Timed:
    """The client, each call's operation, request, answer and time kept."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.key_variable = client.key_variable
        self.began = time.monotonic()
        self.calls: list[tuple[float, float, str, dict[str, Any], dict[str, Any]]] = []

    async def call(self, operation: Any, body: Any = None, **kw: Any) -> dict[str, Any]:
        sent = time.monotonic() - self.began
        answer: dict[str, Any] = await self.client.call(operation, body, **kw)
        name = getattr(operation, "name", operation)
        self.calls.append((sent, time.monotonic() - self.began, name, dict(body or {}), answer))
        return answer


def summary(timed: Timed, wall: float) -> list[str]:
    created: dict[str, float] = {}
    completed: dict[str, float] = {}
    pages: Counter[str] = Counter()
    trips: list[float] = []
    for sent, answered, name, body, answer in timed.calls:
        trips.append(answered - sent)
        if name == "CreatePolicyReport":
            created[answer["reportId"]] = answered
        elif name == "GetPolicyReport" and answer["report"]["status"] == "completed":
            completed.setdefault(body["id"], answered)
        elif name == "ListPolicyImpactReportLogs":
            pages[body["reportId"]] += 1
    last = max(completed, key=lambda r: completed[r])
    trip = statistics.median(trips)
    bound = completed[last] + pages[last] * trip
    kinds = Counter(name for _, _, name, _, _ in timed.calls)
    return [
        f"reports: {len(created)} created in {max(created.values()):.2f} s; completed "
        f"(as polled) from {min(completed.values()):.2f} s to {completed[last]:.2f} s",
        f"slowest report seen completed at {completed[last]:.2f} s; its logs: "
        f"{pages[last]} pages; a round trip: {trip * 1000:.0f} ms (median); "
        f"bound {completed[last]:.2f} + {pages[last]} x {trip:.3f} = {bound:.2f} s",
        f"wall {wall:.2f} s ({wall / bound:.2f} x the bound); one after another the "
        f"reports' waits alone would take "
        f"{sum(completed[r] - created[r] for r in completed):.1f} s",
        "calls: " + ", ".join(f"{n} {name}" for name, n in sorted(kinds.items())),
    ]


async def run(url: str, policies: int) -> tuple[dict[str, Impact], Timed, float]:
    client = runtime.connect(url, KEY, connections=32)
    async with client:
        made = await asyncio.gather(*(client.call("CreatePolicy", {
            "name": f"policy-{i}", "code": RECORDED.format(i=i), "groupName": "admins",
            "status": "active"}) for i in range(policies)))
        targets = [Target(f"Policy/policy-{i}", made[i]["policy"]["id"], NEW.format(i=i),
                          RECORDED.format(i=i)) for i in range(policies)]
        timed = Timed(client)
        began = time.monotonic()
        timed.began = began
        found = await measure(timed, targets, parse_window("7d"),  # type: ignore[arg-type]
                              timeout=600)
        return found, timed, time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--logs", type=int, default=100_000)
    parser.add_argument("--policies", type=int, default=10)
    parser.add_argument("--latency-ms", type=int, default=50)
    args = parser.parse_args()
    compile_package()
    with tempfile.TemporaryDirectory() as tmp:
        seed = os.path.join(tmp, "seed.yaml")
        entries = logs(args.logs, random.Random(45))
        with open(seed, "w", encoding="utf-8") as f:
            json.dump({"groups": [{"id": "grp-admins", "name": "admins"}], "logs": entries}, f)
        distinct = len({(e["stage"], json.dumps(e["input"], sort_keys=True)) for e in entries})
        began = time.monotonic()
        proc, url = start_server(os.path.join(tmp, "api.db"), latency_ms=args.latency_ms,
                                 seed=False, extra=["--seed", seed], wait=600)
        print(f"server seeded with {args.logs:,} logged requests ({distinct:,} distinct) "
              f"and started in {time.monotonic() - began:.1f} s")
        try:
            found, timed, wall = asyncio.run(run(url, args.policies))
        finally:
            proc.terminate()
            proc.wait(30)
    known = [i for i in found.values() if i.known]
    unknown = {a: i.why for a, i in found.items() if not i.known}
    print(f"impact of {args.policies} changed policies ({2 * args.policies} reports) over "
          f"{args.logs:,} logged requests at {args.latency_ms} ms a call: wall {wall:.2f} s")
    for line in summary(timed, wall):
        print(line)
    new = sum(Impact.total(i.new) for i in known)
    recorded = sum(Impact.total(i.recorded) for i in known)
    per_stage: dict[str, int] = defaultdict(int)
    for i in known:
        for stage, actions in (i.new or {}).items():
            per_stage[stage] += sum(actions.values())
    print(f"known: {len(known)} of {len(found)}; the new code triggers on {new:,} requests "
          f"({', '.join(f'{s} {n:,}' for s, n in sorted(per_stage.items()))}), the recorded "
          f"code on {recorded:,}")
    if unknown:
        raise SystemExit(f"unknown impact: {unknown}")


if __name__ == "__main__":
    main()
