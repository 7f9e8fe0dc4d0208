"""The agent's /metrics, judged by Prometheus' own linter (`promtool check metrics`,
from Debian's prometheus package: skipped with the reason where it is missing)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from govsync.agent.applied import Applied
from govsync.agent.cycle import Cycle
from govsync.agent.metrics import Metrics
from govsync.statuses import Status


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    return found


def check(text: bytes) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), "check", "metrics"], input=text.decode(),
                          capture_output=True, text=True)


def test_promtool_finds_nothing_in_the_metrics() -> None:
    metrics = Metrics()
    for environment, status in (("staging", Status.SYNCED), ("prod", Status.OUT_OF_SYNC)):
        metrics.observe(Cycle(environment, environment, status, "", "abc", seconds=0.2,
                              applied=Applied("2026-01-01T00:00:00Z", True, ""),
                              found=Status.DRIFTED, healed=2), ran=True)
    text = metrics.text()
    assert b"govsync_cycles_total{" in text  # every family has samples
    done = check(text)
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), \
        done.stdout + done.stderr


def test_promtool_finds_a_counter_without_total() -> None:
    done = check(b"# HELP bad_count A count.\n# TYPE bad_count counter\nbad_count 1\n")
    assert "counter metrics should have \"_total\" suffix" in done.stdout + done.stderr
