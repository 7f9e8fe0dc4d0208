"""``govsync serve`` as a real process on loopback: restarts, seeds, fault injection."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from serverkit import KEY, SEED, VIEWER, H, Served, path

from testkit import in_process

pytestmark = pytest.mark.slow


def _objects(base: str) -> dict[str, list[dict[str, Any]]]:
    response = httpx.get(base + "/_govsync/objects", headers=H, timeout=10)
    assert response.status_code == 200
    objects: dict[str, list[dict[str, Any]]] = response.json()
    return objects


def test_restart_with_a_file_database_loses_nothing(
    served: Callable[..., Served], tmp_path: Path
) -> None:
    db = tmp_path / "api.db"
    seed = tmp_path / "seed.yaml"
    seed.write_text(yaml.safe_dump(SEED))
    first = served("--db", str(db), "--api-key", KEY, "--seed", str(seed))
    with httpx.Client(base_url=first.base, headers=H, timeout=10) as client:
        space = client.post(path("CreateSpace"), json={"name": "kept"}).json()["space"]
        client.post(path("CreateConnector"), json={"name": "conn", "spaceId": space["id"]})
        hook = client.post(path("CreateHook"), json={"name": "h", "code": "c"}).json()["hook"]
        client.post(path("UpdateHook"), json={"hook": {"id": hook["id"], "name": "h2",
                                                       "code": "c2", "status": "active"}})
        client.post(path("UpdateConnectorListenerLink"),
                    json={"id": "cll-1", "terminationProtection": True})
        client.post(path("CreateResourceAlias"), json={"resourceId": "res-1", "alias": "a1"})
        for i in range(50):
            assert client.post(path("CreateSpace"), json={"name": f"s{i}"}).status_code == 200
    before = _objects(first.base)
    first.stop(kill=True)  # SIGKILL: no orderly shutdown

    second = served("--db", str(db), "--api-key", KEY)
    after = _objects(second.base)
    assert after == before
    assert len(after["Space"]) == 51 and after["Hook"][0]["name"] == "h2"
    assert after["ConnectorListenerLink"][0]["terminationProtection"] is True
    assert after["Resource"][0]["aliases"] == ["old-alias", "a1"]
    with httpx.Client(base_url=second.base, headers=H, timeout=10) as client:
        again = client.post(path("CreateSpace"), json={"name": "after restart"})
        assert again.status_code == 200
        groups = client.post(path("ListGroups"), json={}).json()["groups"]
        assert [g["id"] for g in groups] == ["grp-admins", "grp-analysts"]


def test_serve_without_api_key_warns_and_accepts_any_key(served: Callable[..., Served]) -> None:
    server = served("--viewer-key", VIEWER)
    assert "warning" in server.stderr and "--api-key" in server.stderr
    response = httpx.post(server.base + path("CreateSpace"), json={"name": "s"},
                          headers={"X-API-KEY": "whatever"})
    assert response.status_code == 200
    viewer = httpx.post(server.base + path("CreateSpace"), json={"name": "s"},
                        headers={"X-API-KEY": VIEWER})
    assert viewer.status_code == 403


def test_fault_rate_fails_writes_both_ways(served: Callable[..., Served]) -> None:
    server = served("--api-key", KEY, "--fault-rate", "0.3")
    outcomes: dict[str, list[str]] = {"ok": [], "error": [], "dropped": []}
    with httpx.Client(base_url=server.base, headers=H, timeout=10) as client:
        for i in range(400):
            name = f"fault-{i}"
            try:
                response = client.post(path("CreateSpace"), json={"name": name})
            except (httpx.RemoteProtocolError, httpx.ReadError):
                outcomes["dropped"].append(name)
                continue
            if response.status_code == 200:
                outcomes["ok"].append(name)
            else:
                assert response.status_code == 500, response.text
                assert response.json()["code"] == "internal_error"
                outcomes["error"].append(name)
        # Reads are never faulted.
        for _ in range(20):
            assert client.post(path("ListGroups"), json={}).status_code == 200
    # 0.3 / 2 = 15% each: 60 of 400 expected, sd ~7; allow ~4 sd either side.
    assert 30 <= len(outcomes["error"]) <= 95, {k: len(v) for k, v in outcomes.items()}
    assert 30 <= len(outcomes["dropped"]) <= 95, {k: len(v) for k, v in outcomes.items()}
    stored = {s["name"] for s in _objects(server.base)["Space"]}
    assert set(outcomes["dropped"]) <= stored  # the dropped ones did store their object
    assert set(outcomes["ok"]) <= stored
    assert not set(outcomes["error"]) & stored  # the 500s stored nothing
    assert len(stored) == len(outcomes["ok"]) + len(outcomes["dropped"])
    assert "Traceback" not in server.stderr and "Exception" not in server.stderr


def test_bad_seed_is_a_one_line_error(tmp_path: Path) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text("spaces: []\n")
    result = subprocess.run(
        [sys.executable, "-m", "govsync", "serve", "--port", "1", "--seed", str(seed)],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 1
    assert "unknown seed key(s) spaces" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_database_in_a_missing_folder_is_a_one_line_error(tmp_path: Path) -> None:
    db = tmp_path / "missing" / "api.db"
    ran = in_process(["serve", "--port", "1", "--db", str(db)], env={"PATH": "/usr/bin:/bin"})
    assert ran.code == 1 and "Traceback" not in ran.err, ran.err
    assert ran.err.startswith(f"Error: cannot open the server database {db}: "), ran.err


def test_serve_says_where_it_listens_and_logs_requests_only_with_v(
    served: Callable[..., Served],
) -> None:
    quiet = served("--api-key", KEY, "--viewer-key", VIEWER)
    loud = served("--api-key", KEY, "-v")
    for server in (quiet, loud):
        assert httpx.post(server.base + path("CreateSpace"), json={"name": "s"},
                          headers=H).status_code == 200
        assert httpx.post(server.base + path("CreateSpace"), json={},
                          headers=H).status_code == 400
        server.stop()
    assert quiet.stderr == (f"govsync serve: listening on {quiet.base} "
                            "(db :memory:, 1 api key, 1 viewer key)\n")
    first, *requests = loud.stderr.splitlines()
    assert first == f"govsync serve: listening on {loud.base} (db :memory:, 1 api key, 0 viewer keys)"
    logged = [line for line in requests if "/core.v1." in line]
    assert [line.split(" (")[0] for line in logged] == [
        "govsync serve: POST /core.v1.SpaceService/CreateSpace -> 200",
        "govsync serve: POST /core.v1.SpaceService/CreateSpace -> 400",
    ]
    assert all(re.search(r" \(\d+\.\d ms\)$", line) for line in logged)
    assert "Traceback" not in loud.stderr


def test_port_in_use_is_one_line_and_exit_1() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "govsync", "serve", "--port", str(port), "--api-key", KEY],
            capture_output=True, text=True, timeout=60,
        )
    assert result.returncode == 1
    assert result.stderr == (f"Error: cannot listen on 127.0.0.1:{port}: the address is already "
                             "in use; pick another --port\n")
    assert result.stdout == ""


def test_serve_operations_spec_answers_the_lifecycle_404(served: Callable[..., Served]) -> None:
    full = served("--api-key", KEY)
    spec = served("--api-key", KEY, "--operations", "spec")
    assert "spec operations only" in spec.stderr and "spec operations" not in full.stderr
    for server, status in ((full, 200), (spec, 404)):
        response = httpx.post(server.base + path("ListSpaces"), json={}, headers=H)
        assert response.status_code == status
        if status == 404:
            assert response.json()["code"] == "not_found"
        assert httpx.post(server.base + path("CreateSpace"), json={"name": "s"},
                          headers=H).status_code == 200
