"""A secret a server echoes in what a read returns is never printed nor written (issue
41, finding 9).

Between govsync and the reference server stands a proxy that echoes what it should
not: the caller's API key into every hook's description a read returns, and the
secret of each log integration created through it into that integration's
``accountId``.  The "changed outside govsync" diff then holds both; the text plan,
its JSON and Markdown (the pull-request comment), a saved plan and ``show``, drift's
JSON, ``govsync import --out``'s manifests, what an apply sends and what the state
records show ``(sensitive)`` in their place."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from govkit import KEY, Repo

SIEM = "siem-secret-4f1c9a"

SIEM_MANIFEST = """\
apiVersion: govsync/v1
kind: LogIntegration
metadata: {name: siem}
spec:
  logStoreB:
    site: eu1.logstore-b.example
    accountId: security
    apiKey: {fromEnv: SIEM_KEY}
"""


class Echo:
    """The echoing proxy, on loopback, in a thread of the test process."""

    def __init__(self, upstream: str) -> None:
        self.upstream = httpx.Client(base_url=upstream, timeout=30)
        self.secrets: dict[str, str] = {}  # a log integration's name -> its secret
        echo = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                key = self.headers.get("x-api-key", "")
                if self.path.endswith("/CreateIntegrationLog"):
                    sent = json.loads(body)
                    echo.secrets[sent["name"]] = sent["logStoreB"]["apiKey"]
                answer = echo.upstream.post(self.path, content=body, headers={
                    k: v for k, v in self.headers.items()
                    if k.lower() in ("content-type", "x-api-key", "connect-protocol-version",
                                     "connect-timeout-ms")})
                data = answer.content
                read = self.path.rsplit("/", 1)[1].startswith(("Get", "List"))
                if answer.status_code == 200 and read:
                    data = json.dumps(echo.echoed(json.loads(data), key)).encode()
                self.send_response(answer.status_code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def echoed(self, value: Any, key: str) -> Any:
        if isinstance(value, list):
            return [self.echoed(v, key) for v in value]
        if not isinstance(value, dict):
            return value
        found = {k: self.echoed(v, key) for k, v in value.items()}
        if "code" in found and "timeoutMs" in found:  # a hook
            found["description"] = f"{found.get('description') or 'hook'}, read with {key}"
        store = found.get("logStoreB")
        if isinstance(store, dict) and found.get("name") in self.secrets:
            store["accountId"] = f"{store['accountId']} ({self.secrets[found['name']]})"
        return found

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.upstream.close()


@pytest.fixture
def echo(repo: Repo) -> Iterator[Echo]:
    made = Echo(repo.url)
    yield made
    made.close()


def clean(*texts: str) -> None:
    for text in texts:
        assert KEY not in text and SIEM not in text, text[-3000:]


def test_a_secret_echoed_by_a_read_is_never_printed_nor_written(
        repo: Repo, echo: Echo, tmp_path: Path) -> None:
    (repo.root / "manifests" / "siem.yaml").write_text(SIEM_MANIFEST)
    env = repo.environ(GOVSYNC_ENDPOINT=echo.url, SIEM_KEY=SIEM)
    first = repo.gov("apply", "--env", "staging", "--auto-approve", env=env)
    assert first.code == 0, first
    assert echo.secrets == {"siem": SIEM}

    text = repo.gov("plan", "--env", "staging", env=env)
    assert "changed outside govsync" in text.out, text
    assert "hook, read with (sensitive)" in text.out, text
    assert "security ((sensitive))" in text.out, text
    as_json = repo.gov("plan", "--env", "staging", "--format", "json", env=env)
    markdown = repo.gov("plan", "--env", "staging", "--format", "markdown", env=env)
    drift = repo.gov("drift", "--env", "staging", "--format", "json", env=env)
    assert drift.code == 2 and "(sensitive)" in drift.out, drift
    saved = tmp_path / "plan.json"
    made = repo.gov("plan", "--env", "staging", "--out", str(saved), env=env)
    shown = repo.gov("show", str(saved), env=env)
    for done in (text, as_json, markdown, drift, made, shown):
        assert "(sensitive)" in done.out, done
        clean(done.out, done.err)
    clean(saved.read_text())

    # An object no state records, imported: its manifest is written without the key.
    created = httpx.post(f"{repo.url}/core.v1.HookService/CreateHook",
                         headers={"X-API-KEY": KEY}, timeout=10,
                         json={"name": "foreign", "code": "def handler(e): return 1",
                               "timeoutMs": 100, "status": "active"})
    assert created.status_code == 200, created.text
    out = tmp_path / "imported"
    imported = repo.gov("import", "--env", "staging", "--kind", "Hook", "--out", str(out), env=env)
    assert imported.code == 0, imported
    written = "".join(p.read_text() for p in sorted(out.rglob("*.yaml")))
    assert "foreign" in written and "(sensitive)" in written, written
    clean(imported.out, imported.err, written)

    # An update is laid over the object as read: what it sends, and what the state
    # records, hold no secret either.
    repo.set_timeout(2500)
    applied = repo.gov("apply", "--env", "staging", "--auto-approve", "--target", "Hook/risk",
                       env=env)
    assert applied.code == 0, applied
    clean(applied.out, applied.err)
    stored = repo.hooks()["risk"]
    assert stored["timeoutMs"] == 2500 and KEY not in json.dumps(stored), stored
    exported = repo.gov("state", "export", "--env", "staging", env=env)
    assert exported.code == 0, exported
    clean(exported.out)
