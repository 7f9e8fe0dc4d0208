"""Faults during updates and deletes (contract section 12): the reference server over
real HTTP, failing a share of the writes (half before storing, half storing and
dropping the connection).  Applied again until nothing is left to do: no duplicate, no
object the manifests keep lost, every update and delete whose answer was lost settled
by a read (none left uncertain in state)."""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from pathlib import Path

import yaml
from refreshkit import Gov, copy_examples, faulty_endpoint, write


def faulty(gov: Gov, rate: float, seed: int) -> contextlib.AbstractContextManager[Gov]:
    return faulty_endpoint(gov, rate, random.Random(seed))


def edit_all_hooks_and_remove_forms(manifests: Path) -> list[str]:
    removed = []
    for path in sorted(manifests.glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        kept = []
        for d in docs:
            if d["kind"] == "Hook":
                d["spec"]["timeoutMs"] = int(d["spec"].get("timeoutMs", 1000)) + 7
            if d["kind"] == "Form":
                removed.append(f"Form/{d['metadata']['name']}")
                continue
            kept.append(d)
        path.write_text(yaml.safe_dump_all(kept, sort_keys=False))
    for address in removed:
        name = address.replace("/", "-").lower()
        write(manifests, f"removed-{name}.yaml", f"""\
            apiVersion: govsync/v1
            kind: Removed
            metadata: {{name: {name}}}
            spec: {{from: {address}, destroy: true}}
            """)
    return removed


def test_updates_and_deletes_under_faults_settle_without_duplicates_or_losses(
        gov: Gov) -> None:
    manifests = copy_examples(gov.folder)
    gov.ok("apply", str(manifests), "--auto-approve")
    hooks = {h["name"]: h["timeoutMs"] for h in gov.objects("Hook")}
    removed = edit_all_hooks_and_remove_forms(manifests)
    assert removed
    with faulty(gov, rate=0.5, seed=7) as flaky:
        for _ in range(12):
            run = flaky.run("apply", str(manifests), "--auto-approve", "--allow-endpoint-change")
            if run.code == 0 and "Apply:" not in run.out:
                break
            plan = flaky.run("plan", str(manifests), "--detailed-exitcode")
            if plan.code == 0:
                break
        else:
            raise AssertionError(f"never settled: {run}")
    entries = gov.entries()
    assert all(e["status"] == "applied" for e in entries.values())
    names = Counter(h["name"] for h in gov.objects("Hook"))
    assert all(n == 1 for n in names.values()), names  # no duplicate
    assert {h["name"]: h["timeoutMs"] for h in gov.objects("Hook")} == {
        name: t + 7 for name, t in hooks.items()}
    assert not [f for f in gov.objects("Form")]
    assert not set(removed) & set(entries)
    kept = {a for a in entries}
    live_ids = {o.get("id") for kind in ("Hook", "Policy", "Space", "Connector")
                for o in gov.objects(kind)}
    for address in kept:
        if address.split("/")[0] in ("Hook", "Policy", "Space", "Connector"):
            assert entries[address]["id"] in live_ids, address  # nothing kept was lost
    # The state records the faulty endpoint; the same objects are read here.
    assert "No changes" in gov.ok("plan", str(manifests), "--allow-endpoint-change").out
