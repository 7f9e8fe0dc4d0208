"""The benchmarks in bench/ still run, at a size that takes seconds.

They are issue 12's measurements: a benchmark that no longer runs is a
figure nobody can reproduce.  Each one runs here as a process at a toy size
and must exit 0 and print what its report is built on; no figure is checked
(speed is measured by the benchmarks, not asserted by tests).  bench/peer
needs Terraform and is skipped without it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
POSTGRES = os.environ.get("GOVSYNC_TEST_POSTGRES", "")

pytestmark = pytest.mark.slow


def bench(*args: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GOVSYNC_") or k == "GOVSYNC_TEST_POSTGRES"}
    # A session of its own: on a timeout, its servers are killed with it.
    proc = subprocess.Popen([sys.executable, *args], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{args[0]} did not finish in 600 s")
    assert proc.returncode == 0, f"{args[0]} failed:\n{out[-3000:]}\n{err[-3000:]}"
    return out


def bench_schemas(own: str) -> set[str]:
    """The schemas in the test database that a bench names as ``own`` (a regular
    expression) does: tests running beside this one make their own meanwhile."""
    import psycopg

    with psycopg.connect(POSTGRES, autocommit=True) as conn:
        rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'bench%%'")
        return {str(r[0]) for r in rows.fetchall() if re.fullmatch(own, str(r[0]))}


APPLY_SCHEMA = r"bench_[0-9a-f]{12}"  # bench/apply/run.py
RTT_SCHEMA = r"bench_rtt_[0-9a-f]{10}"  # bench/roundtrips.py


def test_bench_apply_prints_the_apply_the_second_apply_drift_and_the_floor(tmp_path: Path) -> None:
    out = bench(str(ROOT / "bench/apply/run.py"), "--objects", "40", "--latency-ms", "5",
                "--no-sequential", "--h11-lanes", cwd=tmp_path)
    assert "parallel apply:" in out and "40 applied, 0 failed" in out
    assert "second apply:" in out and "No changes. Nothing to apply." in out
    assert "drift:" in out and "bare HTTP/1.1 client" in out
    # The what-if apply (govsync on h11 lanes) ran to the end on its own server.
    what_if = out.split("what-if, govsync with h11 lanes", 1)[1]
    assert "40 applied, 0 failed" in what_if, out


@pytest.mark.postgres
def test_bench_apply_with_a_postgres_state_behind_the_delay_proxy(tmp_path: Path) -> None:
    if not POSTGRES:
        pytest.skip("GOVSYNC_TEST_POSTGRES is not set")
    before = bench_schemas(APPLY_SCHEMA)
    out = bench(str(ROOT / "bench/apply/run.py"), "--objects", "30", "--latency-ms", "5",
                "--no-sequential", "--postgres", POSTGRES, "--state-delay-ms", "0.5",
                cwd=tmp_path)
    assert "state: PostgreSQL, 1 ms added to each round trip" in out
    assert "30 applied, 0 failed" in out and "No changes. Nothing to apply." in out
    # The state really went through the proxy, and its schema is gone.
    forwarded = re.search(r"delay proxy: (\d+) connections to PostgreSQL forwarded", out)
    assert forwarded and int(forwarded.group(1)) > 0, out
    assert bench_schemas(APPLY_SCHEMA) <= before


@pytest.mark.postgres
def test_bench_roundtrips_of_the_commands_that_read_a_postgres_state(tmp_path: Path) -> None:
    if not POSTGRES:
        pytest.skip("GOVSYNC_TEST_POSTGRES is not set")
    before = bench_schemas(RTT_SCHEMA)
    out = bench(str(ROOT / "bench/roundtrips.py"), "--postgres", POSTGRES, "--one-way-ms", "1",
                "--runs", "1", cwd=tmp_path)
    for command in ("plan", "drift (offline)", "state list", "apply (nothing to do)"):
        assert re.search(rf"^{re.escape(command)}: .* round trips$", out, re.M), out
    assert bench_schemas(RTT_SCHEMA) <= before


def test_bench_plan_and_startup(tmp_path: Path) -> None:
    out = bench(str(ROOT / "bench/plan/run.py"), "--runs", "1", "--sizes", "50", cwd=tmp_path)
    assert "govsync plan examples/manifests" in out
    startup = tmp_path / "startup.md"
    bench(str(ROOT / "bench/peer/startup.py"), "--repeat", "1", "--importtime-runs", "1",
          "--objects", "50", "--out", str(startup), cwd=tmp_path)
    text = startup.read_text()
    assert "validate / floor" in text and "`import yaml, click` s" in text
    halves = bench(str(ROOT / "bench/plan/two_processes.py"), "--objects", "200", "--runs",
                   "1", cwd=tmp_path)
    assert "read on two free cores:" in halves, halves


def test_bench_code_prints_validate_with_and_without_code_and_the_engines_share(
        tmp_path: Path) -> None:
    out = bench(str(ROOT / "bench/code/run.py"), "--policies", "20", "--repeat", "1",
                cwd=tmp_path)
    assert "validate, 20 policies with their code checks: wall" in out
    assert "validate, 20 spaces (no code)" in out and "validate, the examples" in out
    assert "policycode.check of the 21 sources" in out and "ms of CPU a source" in out


def test_bench_paired_prints_each_pair_and_the_median_and_stops_on_a_failure(
        tmp_path: Path) -> None:
    py = sys.executable
    out = bench(str(ROOT / "bench/paired.py"), "-n", "2", "--vs", f"{py} -c pass", "--",
                py, "-c", "'import json'", cwd=tmp_path)
    assert len(re.findall(r"^pair \d: baseline [\d.]+ s, command [\d.]+ s, ratio [\d.]+$",
                          out, re.M)) == 2, out
    assert re.search(r"^ratio: median [\d.]+ \(min [\d.]+, max [\d.]+, 2 pairs\)$", out, re.M)
    failed = subprocess.run([py, str(ROOT / "bench/paired.py"), "-n", "2", "--vs",
                             f"{py} -c pass", "--", "exit 3"],
                            cwd=tmp_path, capture_output=True, text=True)
    assert failed.returncode == 1 and "exit 3: exit 3" in failed.stderr
    assert "ratio: median" not in failed.stdout


def test_bench_migrate_prints_a_row_per_size(tmp_path: Path) -> None:
    out = bench(str(ROOT / "bench/migrate/run.py"), "--sizes", "60", "--runs", "1",
                cwd=tmp_path)
    assert "instances  state MB  migrate s" in out
    # 60 instances of 12 types, of which the 5 groups stay in Terraform.
    assert re.search(r"^\s+60\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+55\s+\d+$", out, re.M), out


def test_bench_scale_and_soak(tmp_path: Path) -> None:
    out = bench(str(ROOT / "bench/scale/run.py"), "--state-sizes", "100", "--plan-sizes", "100",
                "--puts", "10", "--snapshot-runs", "1", "--plan-runs", "1",
                "--server-objects", "200", "--block", "100", cwd=tmp_path)
    assert "### State backends" in out and "### Reference server" in out
    # The soak's kills with its attacks between them (it exits 1 on any count not 0).
    soak = bench(str(ROOT / "bench/soak/run.py"), "--objects", "20", "--kills", "4",
                 "--latency-ms", "5", "--attacks", "--seed", "3", cwd=tmp_path)
    assert '"duplicates": 0' in soak and '"losses": 0' in soak
    assert '"missingAfterSettle": 0' in soak
    assert '"attacksAccepted": 0' in soak and '"forgedOnServer": 0' in soak


@pytest.mark.skipif(shutil.which("terraform") is None, reason="terraform is not installed")
def test_bench_peer_against_terraform(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text("# bench/peer results\n\n- 20 plan, govsync: an earlier run's\n")
    bench(str(ROOT / "bench/peer/run.py"), "--sizes", "20", "--repeat", "1",
          "--out", str(results), cwd=tmp_path)
    text = results.read_text()
    # The file holds the current run only (earlier ones: its git history).
    assert text.startswith("# bench/peer results") and text.count("# bench/peer results") == 1
    assert text.count("- 20 plan, govsync:") == 1
    assert "| 20 | apply |" in text


def test_bench_ui_prints_each_page_the_browser_and_the_plan_file(tmp_path: Path) -> None:
    out = bench(str(ROOT / "bench/ui/run.py"), "--objects", "120", "--changes", "30",
                "--runs", "1", cwd=tmp_path)
    for page in ("/environments/prod ", "/environments/staging ", "/environments/prod/graph "):
        assert page in out, out
    assert "in headless Chromium" in out or "browser: skipped" in out
    assert re.search(r"plan file: govsync plan --format html of 30 creates: [\d.]+ MB", out)


def test_bench_agent_prints_the_cycle_the_plan_idle_memory_and_take_over(tmp_path: Path) -> None:
    out = bench(str(ROOT / "bench/agent/run.py"), "--objects", "20", "--runs", "1",
                "--cycles", "2", "--idle-seconds", "1", "--interval", "1", cwd=tmp_path)
    assert "no-op cycle of 20 objects (Synced):" in out
    assert "no-op govsync plan of the same:" in out
    assert "idle agent:" in out and "resident memory (MiB)" in out
    assert "take-over" in out


def test_bench_refresh_reads_every_recorded_object(tmp_path: Path) -> None:
    out = bench(str(ROOT / "bench/refresh/run.py"), "--sizes", "40", "--latency-ms", "1",
                "--runs", "1", cwd=tmp_path)
    assert "refresh of 40 objects:" in out and "40 read; bound N x 1 ms / 10" in out
    assert "no-op plan of 40 objects (median of 1):" in out


def test_bench_impact_replay_prints_the_command_and_the_growth(tmp_path: Path) -> None:
    out = bench(str(ROOT / "bench/impact/replay.py"), "--inputs", "600", "--sizes",
                "100,500", "--rules", "1,5", "--repeat", "1", cwd=tmp_path)
    assert re.search(r"plan --impact-from, 600 recorded inputs, new and recorded code "
                     r"\(10 rules\): wall [\d.]+ s", out), out
    assert "evaluated 600" in out
    assert "        100 inputs:" in out and "        500 inputs:" in out
    assert "one worker" in out
    assert "   1 rule(s):" in out and "   5 rule(s):" in out


def test_bench_impact_waits_for_the_reports_at_once(tmp_path: Path) -> None:
    out = bench(str(ROOT / "bench/impact/run.py"), "--logs", "300", "--policies", "2",
                "--latency-ms", "1", cwd=tmp_path)
    assert "server seeded with 300 logged requests" in out
    assert "impact of 2 changed policies (4 reports) over 300 logged requests" in out
    assert "slowest report seen completed at" in out and "x the bound" in out
    assert "calls: 4 CreatePolicyReport" in out and "known: 2 of 2" in out
