"""An apply of deletes that loses its workspace lock sends no delete more (contract
section 7, fencing; issue 33): each delete, like each create and update, waits for the
check that the lock is still held.  The next apply, under a new lock, deletes the rest,
and every delete sent was settled (no entry of a deleted object left in state)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from applykit import Govsync, Server, write_docs, write_hooks
from test_lock_lost import lose_the_lock

from testkit import until


def test_deletes_stop_when_the_lock_is_lost(
        serve: Callable[..., Server], make_govsync: Callable[..., Govsync],
        state_url: str, tmp_path: Path) -> None:
    server = serve("--latency-ms", "400")
    gov = make_govsync(state_url, server.url)
    manifests = tmp_path / "m"
    names = [f"gone_{gov.workspace.replace('-', '_')}_{i}" for i in range(8)]
    write_hooks(manifests, names)
    first = gov.invoke("apply", str(manifests), "--auto-approve", "--parallelism", "8")
    assert first.code == 0, first

    (manifests / "hooks.yaml").unlink()
    write_docs(manifests / "removed.yaml", [
        {"apiVersion": "govsync/v1", "kind": "Removed", "metadata": {"name": f"rm-{i}"},
         "spec": {"from": f"Hook/{name}", "destroy": True}} for i, name in enumerate(names)])
    running = gov.popen("apply", str(manifests), "--auto-approve", "--parallelism", "1")
    assert running.wait_for_line(lambda line: line.startswith("Applying "))
    until(lambda: running.count(lambda line: " applied" in line) >= 2
          and server.in_flight() > 0, "a few deletes done, one on its way")
    lose_the_lock(gov)
    assert running.finish() == 1, running.result()
    assert f"the lock on workspace '{gov.workspace}' was lost" in running.err

    def on_server() -> set[str]:
        return {h["name"] for h in server.objects().get("Hook", []) if h["name"] in names}

    left = on_server()
    assert left, "every delete was sent after the lock was lost"
    assert len(left) < len(names), running.result()  # some were sent before
    # The next apply, under a new lock, deletes the rest; nothing stays recorded.
    rerun = gov.invoke("apply", str(manifests), "--auto-approve")
    assert rerun.code == 0, rerun
    assert not on_server()
    assert not gov.entries()
