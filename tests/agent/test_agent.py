"""``govsync agent`` end to end (contract section 9, issue 25), with real processes:
agents started as subprocesses, a real git repository the test commits to, the
reference server as a process, real PostgreSQL (where GOVSYNC_TEST_POSTGRES is
set), and a local HTTP receiver as the notification sink."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentkit import KEY, Agent, Receiver, Repo, hooks, reconcile, workspace

from govsync.state import now, open_store
from testkit import drop_pg_workspaces, environ, govsync, until
from testkit import serve as serve_process
from testkit import stop as stop_process

pytestmark = pytest.mark.slow
POSTGRES = os.environ.get("GOVSYNC_TEST_POSTGRES", "")


def objects(url: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{url}/_govsync/objects", headers={"X-API-KEY": KEY}, timeout=10)
    return list(answer.json().get("Hook", []))


def project(environments: str, top: str = "") -> str:
    return ("apiVersion: govsync/v1\nkind: Project\npaths: [manifests/]\n" + top
            + "environments:\n" + environments)


def test_a_commit_goes_out_of_sync_then_is_auto_applied(tmp_path: Path, server: str) -> None:
    # Each environment has its endpoint: on one shared endpoint, prod's creates would be
    # found existing (staging's) and blocked, never made twice.
    proc, prod_server = serve_process(["--api-key", KEY], key=KEY,
                                      output=tmp_path / "prod-server.log")
    repo = Repo(tmp_path / "repo", project(
        f"  staging:\n    endpoint: {server}\n    agent: {{autoApply: true}}\n"
        f"  prod:\n    endpoint: {prod_server}\n    agent: {{autoApply: false}}\n"))
    repo.commit({"manifests/hooks.yaml": hooks(["a1", "a2"])})
    agent = Agent(repo, tmp_path / "run", endpoint=None)
    try:
        found = agent.wait(lambda e: e["staging"]["status"] == "Synced"
                           and e["prod"]["status"] == "OutOfSync", what="first cycles")
        assert found["prod"]["pendingChanges"] == 2
        assert found["staging"]["lastApply"]["ok"] is True
        assert sorted(o["name"] for o in objects(server)) == ["a1", "a2"]
        revision = repo.commit({"manifests/hooks.yaml": hooks(["a1", "a2", "a3"])})
        found = agent.wait(lambda e: e["staging"]["revision"] == revision
                           and e["staging"]["status"] == "Synced"
                           and e["prod"]["revision"] == revision, what="the new commit")
        assert found["prod"]["status"] == "OutOfSync" and found["prod"]["pendingChanges"] == 3
        # The history keeps each cycle's result (equal ones merged), and survives restarts.
        history = agent.get("/api/v1/environments/staging/history").json()["records"]
        assert {r.get("type", "apply") for r in history} == {"drift", "apply"}
        assert history[0]["status"] == "Synced" and history[0]["revision"] == revision
        metrics = httpx.get(agent.url + "/metrics", timeout=10).text
        assert 'govsync_environment_status{environment="prod",status="OutOfSync"} 1.0' in metrics
        assert 'govsync_pending_changes{environment="prod"} 3.0' in metrics
        assert "govsync_last_apply_timestamp_seconds" in metrics
        assert httpx.get(agent.url + "/healthz").status_code == 200
        assert httpx.get(agent.url + "/readyz").status_code == 200
        # The API and the dashboard need the token; the dashboard shows the statuses.
        assert httpx.get(agent.url + "/api/v1/environments").status_code == 401
        page = agent.get("/")
        assert page.status_code == 200 and "OutOfSync" in page.text
    finally:
        assert agent.stop() == 0
    restarted = now()
    again = Agent(repo, tmp_path / "run", endpoint=None, interval="1h")
    try:
        # The status is restored from history at once: wait for the restart's own cycle.
        found = again.wait(lambda e: e["prod"]["status"] == "OutOfSync"
                           and e["prod"]["lastCycle"]["at"] > restarted, what="a restart")
        history = again.get("/api/v1/environments/prod/history").json()["records"]
        assert history[0]["cycles"] >= 2, history[:2]  # the cycles before the restart, kept
    finally:
        again.stop()
        stop_process(proc)


def test_a_wrong_webhook_signature_gets_401_and_a_right_one_a_cycle_at_once(
        tmp_path: Path, server: str) -> None:
    repo = Repo(tmp_path / "repo", project("  staging:\n    agent: {autoApply: true}\n"))
    repo.commit({"manifests/hooks.yaml": hooks(["w1"])})
    secret = "webhook-secret"
    agent = Agent(repo, tmp_path / "run", endpoint=server, interval="1h",
                  env={"GOVSYNC_AGENT_WEBHOOK_SECRET": secret})
    try:
        agent.wait(lambda e: e["staging"]["status"] == "Synced", what="the first cycle")
        revision = repo.commit({"manifests/hooks.yaml": hooks(["w1", "w2"])})
        body = json.dumps({"ref": "refs/heads/main", "after": revision}).encode()
        wrong = httpx.post(agent.url + "/hooks/git", content=body, headers={
            "X-Hub-Signature-256": "sha256=" + "0" * 64, "X-GitHub-Event": "push"})
        assert wrong.status_code == 401
        # The point: a window in which a cycle the refused call had started would have
        # run (interval 1h: no other cycle comes); no condition marks a cycle not run.
        time.sleep(2)
        assert agent.environments()["staging"]["revision"] != revision  # nothing changed
        signed = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        right = httpx.post(agent.url + "/hooks/git", content=body, headers={
            "X-Hub-Signature-256": signed, "X-GitHub-Event": "push"})
        assert right.status_code == 202
        agent.wait(lambda e: e["staging"]["revision"] == revision
                   and e["staging"]["status"] == "Synced", timeout=30, what="the push")
        assert sorted(o["name"] for o in objects(server)) == ["w1", "w2"]
    finally:
        agent.stop()


def test_prod_waits_for_approvals(tmp_path: Path, server: str) -> None:
    key = tmp_path / "ana"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ana", "-f", str(key)],
                   check=True)
    signers = "ana@example.com " + (tmp_path / "ana.pub").read_text().split(" ", 2)[0] + " " + \
        (tmp_path / "ana.pub").read_text().split(" ", 2)[1] + "\n"
    repo = Repo(tmp_path / "repo", project(
        "  prod:\n    agent: {autoApply: true, plans: approved/}\n",
        top="approvals: {required: 1, allowedSigners: allowed_signers}\n"))
    repo.commit({"manifests/hooks.yaml": hooks(["p1"]), "allowed_signers": signers})
    agent = Agent(repo, tmp_path / "run", endpoint=server)
    try:
        found = agent.wait(lambda e: e["prod"]["status"] == "OutOfSync"
                           and "waiting for approvals" in e["prod"]["reason"],
                           what="prod waiting")
        agent.cycles("prod", 2)
        assert objects(server) == []  # never applied without the approvals
        assert found["prod"]["lastApply"] is None
        # A saved plan of the workspace, approved by ana and committed: the agent
        # applies it (`govsync apply PLAN`'s checks).
        checkout = tmp_path / "review"
        subprocess.run(["git", "clone", "-q", str(repo.root), str(checkout)], check=True)
        (checkout / "approved").mkdir()
        made = govsync("plan", "--env", "prod", "--out", "approved/p1.json", "--state",
                       agent.state, cwd=checkout, env=environ())
        assert made.code == 0, made
        signed = govsync("approve", "--yes", "approved/p1.json", "--key", str(key),
                         cwd=checkout, env=environ())
        assert signed.code == 0, signed
        repo.commit({"approved/p1.json": (checkout / "approved/p1.json").read_text(),
                     "approved/p1.json.sig": (checkout / "approved/p1.json.sig").read_text()})
        found = agent.wait(lambda e: e["prod"]["status"] == "Synced", what="the approved plan")
        assert [o["name"] for o in objects(server)] == ["p1"]
        history = agent.get("/api/v1/environments/prod/history").json()["records"]
        applied = next(r for r in history if r.get("type") is None)
        assert [a["principal"] for a in applied["approvers"]] == ["ana@example.com"]
    finally:
        agent.stop()


def test_a_freeze_window_plans_and_never_applies(tmp_path: Path, server: str) -> None:
    repo = Repo(tmp_path / "repo", project(
        "  prod:\n    agent: {autoApply: true, freeze: ['* * * * *']}\n"))
    repo.commit({"manifests/hooks.yaml": hooks(["f1"])})
    state = str(tmp_path / "state.db")
    for _ in range(2):  # a cycle, and the next: planned each time, never applied
        found = reconcile(repo, tmp_path / "run", endpoint=server, state=state)["prod"]
        assert "freeze window" in found["reason"], found
        assert found["status"] == "OutOfSync" and found["frozen"] == "* * * * *"
        assert objects(server) == []


def test_pause_and_resume(tmp_path: Path, server: str) -> None:
    repo = Repo(tmp_path / "repo", project("  staging:\n    agent: {autoApply: true}\n"))
    repo.commit({"manifests/hooks.yaml": hooks(["r1"])})
    run, state = tmp_path / "run", str(tmp_path / "state.db")
    assert reconcile(repo, run, endpoint=server, state=state)["staging"]["status"] == "Synced"
    checkout = run / "checkout"
    paused = govsync("agent", "pause", "staging", "--reason", "incident 4711", "--state", state,
                     cwd=checkout, env=environ())
    assert paused.code == 0, paused
    repo.commit({"manifests/hooks.yaml": hooks(["r1", "r2"])})
    for _ in range(2):  # a cycle, and the next: planned each time, never applied
        found = reconcile(repo, run, endpoint=server, state=state)["staging"]
        assert found["status"] == "Paused" and found["pendingChanges"] == 1, found
        assert "incident 4711" in found["reason"]
        assert [o["name"] for o in objects(server)] == ["r1"]
    resumed = govsync("agent", "resume", "staging", "--state", state, cwd=checkout,
                      env=environ())
    assert resumed.code == 0, resumed
    found = reconcile(repo, run, endpoint=server, state=state)["staging"]
    assert found["status"] == "Synced", found
    assert sorted(o["name"] for o in objects(server)) == ["r1", "r2"]
    with open_store(state) as store:
        kinds = [r.get("type") for r in store.history(found["workspace"])]
    assert "pause" in kinds and "resume" in kinds


def test_ten_cycles_on_one_revision_send_one_message_and_a_failing_sink_recovers(
        tmp_path: Path, server: str) -> None:
    good, flaky = Receiver(), Receiver(fail=2)
    secret = "sink-secret"
    sinks = (
        "agent:\n  notify:\n"
        "    - {type: webhook, name: ops, url: {fromEnv: ALERT_URL}, "
        "secret: {fromEnv: ALERT_SECRET}, events: [outOfSync, applied]}\n"
        "    - {type: slack, name: chat, url: {fromEnv: SLACK_URL}, events: [outOfSync]}\n")
    repo = Repo(tmp_path / "repo", project("  prod: {}\n", top=sinks))
    repo.commit({"manifests/hooks.yaml": hooks(["n1"])})
    agent = Agent(repo, tmp_path / "run", endpoint=server, interval="0.3s", env={
        "ALERT_URL": good.url + "/hook", "ALERT_SECRET": secret,
        "SLACK_URL": flaky.url + "/slack"}, args=("--allow-sink-host", "127.0.0.1"))
    try:
        def cycles(e: dict[str, Any]) -> bool:
            history = agent.get("/api/v1/environments/prod/history").json()["records"]
            return e["prod"]["status"] == "OutOfSync" and history[0]["cycles"] >= 10
        agent.wait(cycles, what="ten cycles")
        agent.wait(lambda e: e["prod"]["notifications"]["chat"]["sent"] == 1, timeout=30,
                   what="the flaky sink recovering")
        payloads = good.payloads()
        assert len(payloads) == 1, payloads
        assert payloads[0]["event"] == "outOfSync" and payloads[0]["environment"] == "prod"
        assert {"formatVersion", "event", "environment", "revision", "status", "summary",
                "url"} <= set(payloads[0])
        request = good.requests[0]
        expected = "sha256=" + hmac.new(secret.encode(), request["body"],
                                        hashlib.sha256).hexdigest()
        assert request["headers"]["X-Govsync-Signature-256"] == expected
        assert len(flaky.requests) == 1 and flaky.attempts == 3
        found = agent.environments()["prod"]["notifications"]["chat"]
        assert found["failedAttempts"] == 2 and found["lastError"] == "slack sink chat answered 500"
        metrics = httpx.get(agent.url + "/metrics").text
        assert 'govsync_notifications_total{result="failed",sink="chat"} 2.0' in metrics
        assert 'govsync_notifications_total{result="sent",sink="ops"} 1.0' in metrics
    finally:
        agent.stop()
        good.close()
        flaky.close()
    # A restart sends nothing again: the ledger is in the state.
    again = Agent(repo, tmp_path / "run", endpoint=server, interval="0.3s", env={
        "ALERT_URL": good.url + "/hook", "ALERT_SECRET": secret, "SLACK_URL": flaky.url},
        args=("--allow-sink-host", "127.0.0.1"))
    try:
        again.wait(lambda e: e["prod"]["status"] == "OutOfSync", what="restart")
        found = again.cycles("prod", 3)["notifications"]
        assert all(h["sent"] == 0 and h["queued"] == 0 for h in found.values()), found
    finally:
        again.stop()


def test_github_gets_a_commit_status_and_one_issue_opened_and_closed(
        tmp_path: Path, server: str) -> None:
    github = Receiver()
    sinks = ("agent:\n  notify:\n    - {type: github, repository: acme/gov, "
             "token: {fromEnv: GH_TOKEN}, apiUrl: " + github.url + "}\n")
    repo = Repo(tmp_path / "repo", project("  prod: {}\n", top=sinks))
    revision = repo.commit({"manifests/hooks.yaml": hooks(["g1"])})
    agent = Agent(repo, tmp_path / "run", endpoint=server, interval="0.5s",
                  env={"GH_TOKEN": "gh-token"}, args=("--github-api", github.url))
    try:
        agent.wait(lambda e: e["prod"]["notifications"].get("github-1", {}).get("sent") == 1,
                   what="the issue")
        calls = [(r["method"], r["path"]) for r in github.requests]
        assert ("POST", f"/repos/acme/gov/statuses/{revision}") in calls
        assert ("POST", "/repos/acme/gov/issues") in calls
        assert github.requests[0]["headers"]["authorization"] == "Bearer gh-token"
        issue = next(json.loads(r["body"]) for r in github.requests
                     if (r["method"], r["path"]) == ("POST", "/repos/acme/gov/issues"))
        assert "Changes: 1 create." in issue["body"], issue["body"]  # the no-ops left out
        # Applied by hand: the agent sees it in sync and closes the issue.
        applied = govsync("apply", "--env", "prod", "--auto-approve", "--endpoint", server,
                          "--state", agent.state, cwd=tmp_path / "run" / "checkout",
                          env=environ({"GOVSYNC_API_KEY": KEY}))
        assert applied.code == 0, applied
        agent.wait(lambda e: e["prod"]["notifications"]["github-1"]["sent"] == 2,
                   what="the issue closed")
        calls = [(r["method"], r["path"]) for r in github.requests]
        opened = calls.index(("POST", "/repos/acme/gov/issues")) + 1  # the receiver's number
        assert ("PATCH", f"/repos/acme/gov/issues/{opened}") in calls
        assert calls.count(("POST", "/repos/acme/gov/issues")) == 1
    finally:
        agent.stop()
        github.close()


def test_sigterm_mid_apply_finishes_the_calls_in_flight_and_exits_0(tmp_path: Path) -> None:
    proc, url = serve_process(["--api-key", KEY, "--latency-ms", "300"], key=KEY)
    try:
        repo = Repo(tmp_path / "repo", project("  staging:\n    agent: {autoApply: true}\n"))
        names = [f"t{i:03d}" for i in range(150)]
        repo.commit({"manifests/hooks.yaml": hooks(names)})
        agent = Agent(repo, tmp_path / "run", endpoint=url)
        until(lambda: objects(url), "the apply started", 60)
        agent.proc.send_signal(signal.SIGTERM)
        assert agent.proc.wait(timeout=30) == 0
        with open_store(agent.state) as store:
            entries = store.snapshot("staging").entries
        created = {o["name"] for o in objects(url)}
        assert 0 < len(created) < len(names), "SIGTERM came too late to test anything"
        assert {e.status for e in entries.values()} == {"applied"}  # nothing left uncertain
        assert {a.split("/", 1)[1] for a in entries} == created  # every call recorded
    finally:
        stop_process(proc)


@pytest.mark.postgres
@pytest.mark.skipif(not POSTGRES, reason="GOVSYNC_TEST_POSTGRES is not set")
def test_two_agents_one_killed_mid_apply_the_other_takes_over(tmp_path: Path) -> None:
    proc, url = serve_process(["--api-key", KEY, "--latency-ms", "250"], key=KEY)
    ws = workspace()
    try:
        repo = Repo(tmp_path / "repo", project(
            f"  prod:\n    workspace: {ws}\n    agent: {{autoApply: true}}\n"))
        names = [f"k{i:03d}" for i in range(150)]
        repo.commit({"manifests/hooks.yaml": hooks(names)})
        first = Agent(repo, tmp_path / "one", endpoint=url, state=POSTGRES, interval="2s")
        until(lambda: objects(url), "the first agent applying", 60)
        second = Agent(repo, tmp_path / "two", endpoint=url, state=POSTGRES, interval="2s")
        try:
            second.wait(lambda e: e["prod"]["acting"] is False, what="the second following")
            first.stop(kill=True)
            killed = time.monotonic()
            second.wait(lambda e: e["prod"]["acting"] is True, timeout=2 + 5 + 5,
                        what="the take-over")
            assert time.monotonic() - killed < 2 + 5
            found = second.wait(lambda e: e["prod"]["status"] in ("Synced", "Uncertain")
                                and e["prod"]["pendingChanges"] == 0, what="the rest applied")
            assert found["prod"]["leader"]["tookOver"] is True
            with open_store(POSTGRES) as store:
                entries = store.snapshot(ws).entries
            created = Counter(o["name"] for o in objects(url))
            assert max(created.values()) == 1  # 0 duplicates
            recorded = {a.split("/", 1)[1] for a in entries}
            assert recorded == set(names)  # 0 lost: every object is in the state
            applied = {a.split("/", 1)[1] for a, e in entries.items() if e.status == "applied"}
            assert applied <= set(created)
            # What the killed agent had in flight is uncertain (it may or may not have
            # reached the server): recorded, never sent again, for a person to settle.
            assert set(created) - applied <= recorded - applied
            assert found["prod"]["uncertainEntries"] == len(entries) - len(applied)
            assert 'govsync_takeovers_total{environment="prod"} 1.0' in httpx.get(
                second.url + "/metrics").text
        finally:
            second.stop()
            first.stop(kill=True)
    finally:
        stop_process(proc)
        drop_pg_workspaces(POSTGRES, [ws])


def test_an_unreachable_repository_and_endpoint_are_a_status(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo", project("  prod: {}\n"))
    repo.commit({"manifests/hooks.yaml": hooks(["u1"])})
    agent = Agent(repo, tmp_path / "run", endpoint="http://127.0.0.1:9")
    try:
        agent.wait(lambda e: e["prod"]["status"] in ("OutOfSync", "Error"), what="a status")
        (tmp_path / "repo").rename(tmp_path / "gone")
        found = agent.wait(lambda e: "cannot update the checkout" in e["prod"]["reason"],
                           what="the repository gone")
        assert found["prod"]["status"] == "Error"
        assert httpx.get(agent.url + "/healthz").status_code == 200  # never a crash loop
    finally:
        agent.stop()


def test_a_bad_agent_section_is_a_validation_error_at_its_line(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo", project("  prod:\n    agent: {autoApply: maybe}\n"))
    repo.commit({"manifests/hooks.yaml": hooks(["v1"])})
    done = govsync("validate", cwd=repo.root, env=environ())
    assert done.code == 1
    assert "govsync.yaml:6:24: agent.autoApply must be true or false" in done.err

