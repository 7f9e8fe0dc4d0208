"""Two applies at once: one lock per workspace, on SQLite and PostgreSQL state.

The server answers after 400 ms and an apply sends its creates two at a
time, so 16 hooks hold the workspace's lock for about three seconds.
"""

from __future__ import annotations

import getpass
import re
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from applykit import Govsync, Server, doc, write_docs, write_hooks

from testkit import until

pytestmark = pytest.mark.slow

LATENCY = ("--latency-ms", "400")
SLOW = ("--auto-approve", "--parallelism", "2")


def applying(line: str) -> bool:
    return line.startswith("Applying ")


def hooks(directory: Path, prefix: str, n: int = 16) -> Path:
    write_docs(directory / "hooks.yaml", [
        doc("Hook", f"{prefix}_{i}", {"code": f"def handler(e):\n    return {i}\n"})
        for i in range(n)])
    return directory


def me() -> tuple[str, str]:
    try:
        user = getpass.getuser()
    except Exception:
        user = ""
    return user, socket.gethostname()


def test_second_apply_fails_at_once_naming_the_holder_or_waits(
        serve: Callable[..., Server], make_govsync: Callable[..., Govsync], state_url: str,
        tmp_path: Path) -> None:
    server = serve(*LATENCY)
    manifests = hooks(tmp_path / "m", "lock", 24)  # about 5 s
    gov = make_govsync(state_url, server.url)

    first = gov.popen("apply", str(manifests), *SLOW)
    assert first.wait_for_line(applying), first.result()
    started = time.monotonic()
    second = gov.run("apply", str(manifests), "--auto-approve")
    took = time.monotonic() - started
    assert first.proc.poll() is None, "the first apply ended before the second tried"
    assert second.code == 1, second
    message = second.err
    user, host = me()
    assert "is locked by" in message, second
    assert f"pid {first.proc.pid}" in message
    assert host in message and (not user or user in message)
    assert "--lock-timeout" in message
    assert took < 10
    # State commands that write take the same lock.
    repair = gov.invoke("state", "resolve", "Hook/lock_0", "--absent")
    assert repair.code == 1 and "is locked by" in repair.err, repair

    # With a lock timeout long enough, the next one waits, then has nothing to do.
    assert first.proc.poll() is None
    third = gov.run("apply", str(manifests), "--auto-approve", "--lock-timeout", "120")
    assert first.finish() == 0, first.result()
    assert "24 applied" in first.out
    assert third.code == 0, third
    assert "No changes. Nothing to apply." in third.out
    assert len(server.objects()["Hook"]) == 24


def test_applies_on_two_workspaces_proceed_together(
        serve: Callable[..., Server], make_govsync: Callable[..., Govsync], state_url: str,
        tmp_path: Path) -> None:
    server = serve(*LATENCY)
    a = make_govsync(state_url, server.url)
    b = make_govsync(state_url, server.url)
    first = a.popen("apply", str(hooks(tmp_path / "a", "ws_a")), *SLOW)
    assert first.wait_for_line(applying), first.result()
    second = b.popen("apply", str(hooks(tmp_path / "b", "ws_b")), *SLOW)
    assert second.wait_for_line(applying), second.result()
    assert first.proc.poll() is None, "not concurrent: the first apply had already ended"
    assert first.finish() == 0, first.result()
    assert second.finish() == 0, second.result()
    assert "16 applied" in first.out and "16 applied" in second.out
    names = sorted(h["name"] for h in server.objects()["Hook"])
    assert names == sorted([f"ws_a_{i}" for i in range(16)] + [f"ws_b_{i}" for i in range(16)])


def test_lock_of_a_killed_apply_does_not_block(
        serve: Callable[..., Server], make_govsync: Callable[..., Govsync], state_url: str,
        tmp_path: Path) -> None:
    server = serve(*LATENCY)
    manifests = hooks(tmp_path / "m", "killed")
    gov = make_govsync(state_url, server.url)
    doomed = gov.popen("apply", str(manifests), *SLOW)
    assert doomed.wait_for_line(applying), doomed.result()
    until(lambda: server.in_flight() > 0, "a create on its way")
    assert doomed.kill() == -signal.SIGKILL
    until(lambda: server.in_flight() == 0, "the requests in flight answered")

    started = time.monotonic()
    run = gov.run("apply", str(manifests), "--auto-approve")
    assert "locked" not in run.err, run
    assert run.code in (0, 1) and "Apply:" in run.out, run
    assert time.monotonic() - started < 30
    # The intents of the killed run are still uncertain, never sent again.
    plan = gov.plan_json(str(manifests))
    pending = [e for e in gov.entries().values() if e["status"] != "applied"]
    assert plan["summary"]["uncertain"] == len(pending)


def test_plan_says_an_apply_is_running_and_resolve_waits_for_it(
        serve: Callable[..., Server], make_govsync: Callable[..., Govsync], state_url: str,
        tmp_path: Path) -> None:
    # Issue 11: in-flight creates looked uncertain with no word of the lock, and
    # `state resolve --absent` then made a duplicate.
    server = serve("--latency-ms", "400")
    gov = make_govsync(state_url, server.url)
    manifests = tmp_path / "m"
    write_hooks(manifests, (f"busy_{i}" for i in range(12)))
    running = gov.popen("apply", str(manifests), "--auto-approve", "--parallelism", "1")
    assert running.wait_for_line(lambda line: line.startswith("Applying "))
    plan = gov.plan_json(str(manifests))
    (lock,) = [c for c in plan["checks"] if c["name"] == "lock"]
    assert lock["status"] == "warning" and "an apply is running" in lock["detail"]
    # Settling is refused while the apply runs, whatever is pending.
    refused = gov.run("state", "resolve", "Hook/busy_0", "--absent")
    assert refused.code == 1 and "locked by" in refused.err, refused
    assert running.finish() == 0, running.result()
    assert not [c for c in gov.plan_json(str(manifests))["checks"] if c["name"] == "lock"]


def test_ctrl_c_says_what_is_uncertain_and_resolve_settles_several(
        serve: Callable[..., Server], make_govsync: Callable[..., Govsync], sqlite_state: str,
        tmp_path: Path) -> None:
    server = serve("--latency-ms", "1500")
    gov = make_govsync(sqlite_state, server.url)
    manifests = tmp_path / "m"
    write_hooks(manifests, (f"intr_{i}" for i in range(6)))
    running = gov.popen("apply", str(manifests), "--auto-approve", "--parallelism", "3")
    assert running.wait_for_line(lambda line: line.startswith("Applying "))
    until(lambda: server.in_flight() >= 3, "three creates sent, none answered")
    # The first Ctrl-C waits for them (tests/apply/test_interrupt.py); the second aborts.
    running.proc.send_signal(signal.SIGINT)
    assert running.wait_for_line(lambda line: "Interrupted: nothing more is sent" in line)
    running.proc.send_signal(signal.SIGINT)
    assert running.finish() == 1, running.result()
    assert "Traceback" not in running.err
    told = re.search(r"interrupted after \d+ change\(s\) were applied and recorded; (\d+) "
                     r"create\(s\) were sent but not answered and are now uncertain", running.err)
    assert told, running.err
    assert "the API cannot read Hook, so look for them where you can see them" in running.err
    assert "govsync state resolve ADDR... --absent" in running.err
    unsure = sorted(a for a, e in gov.entries().items() if e["status"] != "applied")
    assert len(unsure) == int(told.group(1)) >= 1
    on_server = {h["name"] for h in server.objects()["Hook"]}
    absent = [a for a in unsure if a.split("/", 1)[1] not in on_server]
    present = [a for a in unsure if a not in absent]
    if absent:
        assert gov.run("state", "resolve", *absent, "--absent").code == 0
    for address in present:
        name = address.split("/", 1)[1]
        (hook_id,) = [h["id"] for h in server.objects()["Hook"] if h["name"] == name]
        assert gov.run("state", "resolve", address, "--id", hook_id).code == 0
    assert gov.run("apply", str(manifests), "--auto-approve").code == 0
    names = [h["name"] for h in server.objects()["Hook"]]
    assert sorted(names) == sorted(f"intr_{i}" for i in range(6))  # none twice
