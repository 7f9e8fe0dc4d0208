"""An apply of updates and deletes killed with SIGKILL, then faults: the next runs settle
everything by reads (issue 33).

The server (a real process) answers every call after 50 ms and fails a share of the
writes (half before storing, half storing and dropping the connection).  A real
``govsync apply`` process, mid-way through a batch of updates and deletes, is killed
with SIGKILL; apply is then run again (nobody calls ``state resolve``) until the plan
is empty.  Afterwards: no object twice on the server, every object the manifests keep
on the server under the id state records and with the manifest's value, every removed
object gone from the server and from state, no entry pending or uncertain.  SQLite
and PostgreSQL state.
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from applykit import Govsync, Server, doc, write_docs

from testkit import until

pytestmark = pytest.mark.slow

LATENCY_MS = 50
HOOKS = 80


def hooks(directory: Path, timeout_ms: dict[str, int]) -> Path:
    write_docs(directory / "hooks.yaml", [
        doc("Hook", name, {"code": "def handler(e):\n    return 1\n", "timeoutMs": t})
        for name, t in sorted(timeout_ms.items())])
    return directory


def removed(directory: Path, names: list[str]) -> None:
    write_docs(directory / "removed.yaml", [
        {"apiVersion": "govsync/v1", "kind": "Removed", "metadata": {"name": f"rm-{name}"},
         "spec": {"from": f"Hook/{name}", "destroy": True}} for name in names])


def test_sigkill_and_faults_during_updates_and_deletes_settle_by_reads(
        serve: Callable[..., Server], make_govsync: Callable[..., Govsync],
        state_url: str, tmp_path: Path) -> None:
    names = [f"chg_{i:03d}" for i in range(HOOKS)]
    manifests = hooks(tmp_path / "manifests", dict.fromkeys(names, 1000))
    server = serve("--latency-ms", str(LATENCY_MS))
    gov = make_govsync(state_url, server.url)
    first = gov.invoke("apply", str(manifests), "--auto-approve", "--parallelism", "16")
    assert first.code == 0, first
    ids = {a.split("/", 1)[1]: e["id"] for a, e in gov.entries().items()}
    assert len(ids) == HOOKS

    # Half the hooks updated, the other half removed (Removed, destroy: true).
    kept, gone = names[: HOOKS // 2], names[HOOKS // 2:]
    wanted = {name: 1000 + i + 1 for i, name in enumerate(kept)}
    hooks(manifests, wanted)
    removed(manifests, gone)

    # Few in flight, so the batch takes a while and the kill lands in its middle.
    apply = gov.popen("apply", str(manifests), "--auto-approve", "--parallelism", "2")
    assert apply.wait_for_line(lambda line: line.startswith("Applying ")), apply.result()
    assert apply.wait_for_line(lambda line: " applied " in line or " deleted " in line), \
        apply.result()
    until(lambda: server.in_flight() > 0, "a change on its way")
    assert apply.kill() == -signal.SIGKILL, apply.result()
    until(lambda: server.in_flight() == 0, "the requests on their way answered")
    left = gov.plan_json(str(manifests))["summary"]
    assert left.get("update", 0) + left.get("delete", 0) > 0, \
        f"the apply finished before the kill: {left}"

    # The same server restarted on its database, now failing a third of the writes.
    server.stop()
    server.flags += ["--fault-rate", "0.35"]
    server.start(seed=False)
    for _ in range(15):
        run = gov.invoke("apply", str(manifests), "--auto-approve", "--parallelism", "16")
        if run.code == 0 and gov.invoke("plan", str(manifests),
                                        "--detailed-exitcode").code == 0:
            break
    else:
        raise AssertionError(f"never settled: {run}")

    entries = gov.entries()
    assert {a: e["status"] for a, e in entries.items()} == {
        f"Hook/{n}": "applied" for n in kept}  # nothing uncertain left, removed ones gone
    live = server.objects().get("Hook", [])
    count = Counter(h["name"] for h in live)
    assert all(n == 1 for n in count.values()), count  # 0 duplicates
    by_name = {h["name"]: h for h in live}
    for name in kept:  # 0 objects lost that the manifests keep; updated in place
        assert by_name[name]["id"] == ids[name] == entries[f"Hook/{name}"]["id"], name
        assert by_name[name]["timeoutMs"] == wanted[name], name
    assert not set(gone) & set(by_name)
