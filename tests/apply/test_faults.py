"""500 objects applied through a server that fails 10% of write calls.

Half of the injected faults answer 500 before storing anything (the client
retries them); the other half store the object and drop the connection
(the create's outcome is unknown: apply must record it ``uncertain``, never
``failed``, and never send it again).  The test settles every uncertain
entry the way an operator would, by finding the object on the server, and
applies again until nothing is left to do.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from applykit import (
    Govsync,
    Server,
    Wanted,
    big_manifests,
    check_consistent,
    duplicates,
    on_server,
    settle,
)

from govsync.api.kinds import BY_KIND, SEEDED_KINDS

pytestmark = pytest.mark.slow

MAX_ROUNDS = 12
# LineReporter: "ADDRESS: ACTION STATUS[ (id ...)|: error] [0.01s]"
OUTCOME = re.compile(r"^(\S+/\S+): (create|update) (applied|failed|skipped|uncertain)\b(.*)$",
                     re.M)


def test_apply_settles_through_faults(serve: Callable[..., Server],
                                      make_govsync: Callable[..., Govsync],
                                      sqlite_state: str, tmp_path: Path) -> None:
    server = serve("--fault-rate", "0.1")
    manifests = tmp_path / "big"
    assert big_manifests(manifests, "f") == 500
    wanted = Wanted.load(manifests)
    gov = make_govsync(sqlite_state, server.url)

    totals: Counter[str] = Counter()
    for _round in range(1, MAX_ROUNDS + 1):
        run = gov.run("apply", str(manifests), "--auto-approve", "--parallelism", "16")
        assert run.code in (0, 1), run
        assert "Traceback" not in run.text
        outcomes = {m[0]: (m[1], m[2], m[3]) for m in OUTCOME.findall(run.err)}
        totals.update(status for _, status, _ in outcomes.values())
        objects = server.objects()

        # A create that failed cleanly left nothing on the server; one that may
        # have reached it is uncertain, in the output and in state (creates
        # that are safe to repeat are simply retried, then sent again).
        entries = check_consistent(gov, server, wanted, settled=False)
        for address, (action, status, detail) in outcomes.items():
            kind, value = wanted.objects[address]
            if status == "failed" and action == "create" and not BY_KIND[kind].create.retry_safe:
                assert on_server(objects, kind, value) == [], (address, detail)
            if status == "uncertain":
                assert action == "create" and not BY_KIND[kind].create.retry_safe, address
                assert entries[address]["status"] == "uncertain", address
                assert "govsync state resolve" in detail
        unsure = {a for a, e in entries.items() if e["status"] in ("pending", "uncertain")}
        assert unsure == {a for a, o in outcomes.items() if o[1] == "uncertain"}
        if unsure:
            assert run.code == 1 and f"{len(unsure)} uncertain" in run.out, run
            # Settled by a read where one can find the kind (contract 12, amended).
            plan = gov.plan_json(str(manifests))
            settled = {c["address"]: c["action"] for c in plan["changes"]
                       if c["address"] in unsure}
            assert set(settled) == unsure, settled
            assert set(settled.values()) <= {"uncertain", "import", "create"}, settled
            for address, action in settled.items():
                kind, value = wanted.objects[address]
                if action != "uncertain":
                    assert (action == "import") == bool(on_server(objects, kind, value))
        settle(gov, server, wanted)
        if run.code == 0:
            assert not unsure
            break
    else:
        pytest.fail(f"apply did not settle in {MAX_ROUNDS} rounds: {dict(totals)}")

    # Faults happened, and every ambiguous one became uncertain.
    assert totals["uncertain"] > 0, dict(totals)
    plan = gov.run("plan", str(manifests), "--detailed-exitcode")
    assert plan.code == 0, plan

    # State and server agree exactly: every object once, every one in state.
    objects = server.objects()
    assert duplicates(objects, wanted) == []
    check_consistent(gov, server, wanted, settled=True)
    on_the_server = Counter({k: len(v) for k, v in objects.items()
                             if k not in SEEDED_KINDS and v})
    expected = Counter({k: n for k, n in wanted.counts().items() if k not in SEEDED_KINDS})
    assert on_the_server == expected

    # Updates through the same faults: safe to repeat, so retried, never uncertain.
    ids = {a: e["id"] for a, e in gov.entries().items()}
    updated = rewrite(manifests / "hooks.yaml", lambda spec: spec.update(timeoutMs=4321))
    updated += rewrite(manifests / "connector-ai.yaml",
                       lambda spec: spec["config"]["providerB"].update(maxTokens=4321))
    for _round in range(1, 6):
        run = gov.run("apply", str(manifests), "--auto-approve", "--parallelism", "16")
        assert not [m for m in OUTCOME.findall(run.err) if m[2] == "uncertain"], run
        if run.code == 0:
            break
    else:
        pytest.fail(f"the updates did not go through: {run}")
    objects = server.objects()
    assert all(h["timeoutMs"] == 4321 for h in objects["Hook"])
    assert all(p["config"]["providerB"]["maxTokens"] == 4321
               for p in objects["ConnectorAIProvider"])
    assert len(objects["Hook"]) + len(objects["ConnectorAIProvider"]) == updated
    check_consistent(gov, server, wanted, settled=True)
    assert {a: e["id"] for a, e in gov.entries().items()} == ids
    assert gov.run("plan", str(manifests), "--detailed-exitcode").code == 0


def rewrite(path: Path, change: Callable[[dict[str, Any]], None]) -> int:
    """Apply ``change`` to the spec of every document in a manifest file."""
    docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    for d in docs:
        change(d["spec"])
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    return len(docs)
