"""An apply killed with SIGKILL at any moment leaves a state the next run recovers.

The server answers every call after 100 ms, so a kill lands with requests
in flight.  Afterwards, without any help from the dead process: no object
exists twice on the server, and every object on the server is in state,
applied or as a ``pending`` intent (shown as uncertain by plan and drift).
Settling the intents from what the server holds and applying again ends
with state and server equal.  SQLite and PostgreSQL state.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from applykit import (
    UNSETTLED,
    Govsync,
    Server,
    Wanted,
    big_manifests,
    check_consistent,
    on_server,
    settle,
)

from testkit import until

pytestmark = pytest.mark.slow

LATENCY_MS = 100
# Seconds after apply printed "Applying N change(s)..." (the lock is held, the
# plan made, the first intents being written); a full run takes about 2 s.
MOMENTS = (0.0, 0.15, 0.35, 0.7, 1.1)


def test_sigkill_at_five_moments(serve: Callable[..., Server],
                                 make_govsync: Callable[..., Govsync],
                                 state_url: str, tmp_path: Path) -> None:
    server = serve("--latency-ms", str(LATENCY_MS))
    seen_unsettled = 0
    for i, moment in enumerate(MOMENTS):
        manifests = tmp_path / f"crash-{i}"
        size = big_manifests(manifests, f"k{i}", scale=0.22, blocked_users=False)
        assert size >= 100
        wanted = Wanted.load(manifests)
        gov = make_govsync(state_url, server.url)

        apply = gov.popen("apply", str(manifests), "--auto-approve", "--parallelism", "8")
        assert apply.wait_for_line(lambda line: line.startswith("Applying ")), apply.result()
        time.sleep(moment)  # the point: a kill at this moment of the apply, not a wait
        finished = apply.count(lambda line: " applied " in line)
        assert apply.kill() == -signal.SIGKILL, (moment, apply.result())
        assert finished < size, f"apply finished before the kill at {moment}s"
        # Requests already on their way finish on the server first (as a
        # careful operator waits before looking).
        until(lambda: server.in_flight() == 0, "the requests on their way answered")

        entries = check_consistent(gov, server, wanted, settled=False)
        unsettled = sorted(a for a, e in entries.items() if e["status"] in UNSETTLED)
        seen_unsettled += len(unsettled)
        plan = gov.plan_json(str(manifests))
        summary = plan["summary"]
        # Each unsettled create is settled by a read where one finds its kind (contract
        # 12, amended): found, it is recorded (import); absent, created; else uncertain.
        settled = {c["address"]: c["action"] for c in plan["changes"]
                   if c["address"] in unsettled}
        assert set(settled.values()) <= {"uncertain", "import", "create"}, settled
        assert summary["uncertain"] == sum(a == "uncertain" for a in settled.values())
        assert summary["import"] == sum(a == "import" for a in settled.values())
        assert summary["create"] == size - len(entries) + sum(
            a == "create" for a in settled.values())
        objects = server.objects()
        for address, action in settled.items():
            kind, value = wanted.objects[address]
            live = on_server(objects, kind, value)
            assert action == "uncertain" or (action == "import") == bool(live), (
                address, action, live)
        if unsettled:
            drift = gov.invoke("drift", str(manifests), "--format", "json")
            assert drift.code == 2, drift
            report = json.loads(drift.out)
            assert {c["address"] for c in report["changes"] if c["action"] == "uncertain"} \
                == {a for a, action in settled.items() if action == "uncertain"}

        settle(gov, server, wanted)
        # Nothing kills the rerun: in-process, saving a start-up.
        rerun = gov.invoke("apply", str(manifests), "--auto-approve", "--parallelism", "16")
        assert rerun.code == 0, rerun
        check_consistent(gov, server, wanted, settled=True)
        final = gov.invoke("plan", str(manifests), "--detailed-exitcode")
        assert final.code == 0, final
    # Some kill landed between an intent and its answer.
    assert seen_unsettled > 0
