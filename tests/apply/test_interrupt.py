"""Ctrl-C during apply (issue 34, finding 4), with a real process and a served
reference server that answers every call after a delay, so that calls are in
flight when the signal lands: the first SIGINT lets them answer and records them
(no ``uncertain`` entry), sends nothing more and exits 1 saying what was and was
not applied; a second SIGINT aborts at once, as before."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

from applykit import UNSETTLED, Govsync, Server, write_hooks

LATENCY_MS = 400
HOOKS = 24


def test_the_first_sigint_waits_for_the_calls_in_flight_and_records_them(
        serve: Callable[..., Server], make_govsync: Callable[..., Govsync],
        sqlite_state: str, tmp_path: Path) -> None:
    server = serve("--latency-ms", str(LATENCY_MS))
    gov = make_govsync(sqlite_state, server.url)
    manifests = tmp_path / "m"
    write_hooks(manifests, (f"h{i:02d}" for i in range(HOOKS)))

    apply = gov.popen("apply", str(manifests), "--auto-approve", "--parallelism", "4")
    # The first answer came: the other three calls of the first four are in flight.
    assert apply.wait_for_line(lambda line: " applied " in line), apply.result()
    apply.proc.send_signal(signal.SIGINT)
    assert apply.finish() == 1, apply.result()

    entries = gov.entries()
    assert not [a for a, e in entries.items() if e["status"] in UNSETTLED], entries
    # What was in flight answered and is recorded; what was not sent was not.
    assert 1 < len(entries) < HOOKS, apply.result()
    assert len(server.objects()["Hook"]) == len(entries)
    assert "Interrupted: nothing more is sent" in apply.err
    assert "Error: apply stopped: stopped on request" in apply.err, apply.result()
    assert f"Apply: {len(entries)} applied, 0 failed, {HOOKS - len(entries)} skipped" \
        in apply.out, apply.result()
    # The next apply sends the rest, and nothing twice.
    again = gov.invoke("apply", str(manifests), "--auto-approve")
    assert again.code == 0, again
    assert len(server.objects()["Hook"]) == HOOKS


def test_a_second_sigint_aborts_at_once(serve: Callable[..., Server],
                                        make_govsync: Callable[..., Govsync],
                                        sqlite_state: str, tmp_path: Path) -> None:
    # Long enough that no create is answered between the two signals, however loaded
    # the machine (the abort does not wait for the answers).
    server = serve("--latency-ms", "6000")
    gov = make_govsync(sqlite_state, server.url)
    manifests = tmp_path / "m"
    write_hooks(manifests, (f"s{i}" for i in range(8)))

    apply = gov.popen("apply", str(manifests), "--auto-approve", "--parallelism", "4")
    assert apply.wait_for_line(lambda line: line.startswith("Applying ")), apply.result()
    # The four creates are at the server (a signal before they are sent would let the
    # apply end by itself before the second one).
    assert server.wait_in_flight(4), apply.result()
    apply.proc.send_signal(signal.SIGINT)
    assert apply.wait_for_line(lambda line: "Interrupted: nothing more is sent" in line)
    apply.proc.send_signal(signal.SIGINT)
    assert apply.finish() == 1, apply.result()
    # Aborted: the calls in flight become uncertain, as before.
    assert "Error: interrupted after 0 change(s) were applied and recorded; 4 create(s) were " \
        "sent but not answered and are now uncertain" in apply.err, apply.result()
    assert "Apply: " not in apply.out
