"""The command line's `plan` and `drift` read the server in a second process while the
manifests load (cli/early.py).  A real process is the point here: the refresh is
forked only by a process with no other thread, which a test runner is not.  What the
second process finds must be what the plan would have found itself, its failures
must read as the plan's own, and it must never outlive the command."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from refreshkit import Gov, copy_examples

from testkit import EXAMPLE_SEED, serve, stop

KEY = "early-key"
SECOND = "reading the server in a second process"


@pytest.fixture
def served(sqlite_gov: Gov) -> Iterator[Gov]:
    """The examples applied to a served reference server (a process of its own)."""
    proc, url = serve(["--api-key", KEY, "--seed", str(EXAMPLE_SEED),
                       "--db", str(sqlite_gov.folder / "served.db")], key=KEY)
    try:
        gov = dataclasses.replace(sqlite_gov, env={**sqlite_gov.env, "GOVSYNC_ENDPOINT": url,
                                                   "GOVSYNC_API_KEY": KEY})
        gov.ok("apply", str(copy_examples(gov.folder)), "--auto-approve")
        yield gov
    finally:
        stop(proc)


def process(gov: Gov, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m govsync ARGS`` as a real process, with the debug log on stderr."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("GOVSYNC_")}
    full.update(GOVSYNC_STATE=gov.state, GOVSYNC_WORKSPACE=gov.workspace,
                GOVSYNC_LOG="debug")
    full.update(gov.env)
    full.update(env)
    return subprocess.run([sys.executable, "-m", "govsync", *args], cwd=gov.folder,
                          env=full, capture_output=True, text=True, timeout=120)


def edited(gov: Gov) -> None:
    """The issue's console edit, through the served API."""
    import httpx

    url = gov.env["GOVSYNC_ENDPOINT"]
    hooks = httpx.post(f"{url}/core.v1.HookService/ListHooks", json={"limit": 100},
                       headers={"X-API-KEY": KEY}).json()["hooks"]
    hook = next(h for h in hooks if h["name"] == "risk_score")
    hook = {k: v for k, v in hook.items() if k not in ("createdAt", "updatedAt")}
    hook["allowlistedNetworkHosts"] = [*hook["allowlistedNetworkHosts"], "exfil.example.net"]
    answer = httpx.post(f"{url}/core.v1.HookService/UpdateHook", json={"hook": hook},
                        headers={"X-API-KEY": KEY})
    assert answer.status_code == 200, answer.text


def same(plan: dict[str, Any]) -> dict[str, Any]:
    """What a plan says, without what differs between two runs (its id, timings)."""
    return {"changes": plan["changes"], "drift": plan["drift"],
            "checks": plan["checks"], "summary": plan["summary"]}


def test_a_console_edit_read_in_a_second_process_is_the_plan_made_in_one(served: Gov) -> None:
    gov = served
    edited(gov)
    forked = process(gov, "plan", "manifests", "--format", "json")
    assert forked.returncode == 0, forked.stderr
    assert SECOND in forked.stderr
    assert "did not finish" not in forked.stderr  # what the second process read was used
    plan = json.loads(forked.stdout)
    assert [d["address"] for d in plan["drift"]] == ["Hook/risk_score"]
    (change,) = [c for c in plan["changes"] if c["address"] == "Hook/risk_score"]
    assert "exfil.example.net" in json.dumps(change["outside"])
    # The same plan, made in one process (the test runner has threads: no fork).
    alone = gov.ok("plan", "manifests", "--format", "json").json()
    assert same(plan) == same(alone)
    drift = process(gov, "drift", "manifests", "--format", "json")
    assert drift.returncode == 2, drift.stderr
    assert SECOND in drift.stderr
    assert [d["address"] for d in json.loads(drift.stdout)["drift"]] == ["Hook/risk_score"]


def test_a_missing_object_found_by_the_second_process_is_planned_as_a_create(
        served: Gov) -> None:
    gov = served
    import httpx

    url = gov.env["GOVSYNC_ENDPOINT"]
    hook = gov.entries()["Hook/risk_score"]
    answer = httpx.post(f"{url}/core.v1.HookService/DeleteHook", json={"id": hook["id"]},
                        headers={"X-API-KEY": KEY})
    assert answer.status_code == 200, answer.text
    forked = process(gov, "plan", "manifests", "--format", "json")
    assert forked.returncode == 0 and SECOND in forked.stderr, forked.stderr
    plan = json.loads(forked.stdout)
    assert [(d["address"], d["kind"]) for d in plan["drift"]] == [("Hook/risk_score",
                                                                   "missing")]
    (change,) = [c for c in plan["changes"] if c["address"] == "Hook/risk_score"]
    assert change["action"] == "create"


def test_a_refused_key_is_said_once_as_without_the_second_process(served: Gov) -> None:
    gov = served
    forked = process(gov, "plan", "manifests", GOVSYNC_API_KEY="not-the-key")
    assert forked.returncode == 1
    assert SECOND in forked.stderr
    assert "did not finish" in forked.stderr  # the plan read the server itself
    assert forked.stderr.count("refused the key") == 1, forked.stderr
    assert "Traceback" not in forked.stderr
    alone = gov.run("plan", "manifests", env={"GOVSYNC_API_KEY": "not-the-key"})
    assert alone.code == 1
    said = [line for line in forked.stderr.splitlines() if line.startswith("Error")]
    assert said and said == [line for line in alone.err.splitlines()
                             if line.startswith("Error")]


def test_the_second_process_does_not_outlive_a_plan_that_fails(served: Gov) -> None:
    gov = served
    (gov.folder / "manifests" / "broken.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Hook\nmetadata: {name: broken}\nspec: [\n")
    began = time.monotonic()
    forked = process(gov, "plan", "manifests")
    assert forked.returncode == 1
    assert "broken.yaml:5:1: YAML syntax error" in forked.stderr and "Traceback" not in forked.stderr
    assert SECOND in forked.stderr
    pid = int(forked.stderr.split(f"{SECOND} (pid ", 1)[1].split(")", 1)[0])
    assert not Path(f"/proc/{pid}").exists(), "the second process is still running"
    assert time.monotonic() - began < 60


def test_no_second_process_where_another_thread_runs(served: Gov) -> None:
    gov = served
    stop_it = threading.Event()
    other = threading.Thread(target=stop_it.wait, daemon=True)
    other.start()
    try:
        run = gov.run("plan", "manifests", env={"GOVSYNC_LOG": "debug"})
    finally:
        stop_it.set()
        other.join()
    assert run.code == 0, run
    assert "sending POST" in run.err  # the debug log is there
    assert SECOND not in run.err
    assert "Check refresh: passed" in run.out
